"""The lowering's shape answers that need a size of at least 2 (``compiler/widen/questions.py``):
where each is moot at 1, and the recomputation at 1 of the layout computations they were
asked in (a view's strides, a convolution's layout, a stride-order check, an extern
kernel's outputs), both ways; and a torch without one of the wrapped internals."""

from __future__ import annotations

import sympy
import torch
from torch.utils._sympy.value_ranges import ValueRanges

from verishape.compiler.widen import questions, recompute
from verishape.compiler.widen.kernel_call import KernelCall
from verishape.core import torch_names
from verishape.core.shape_env import VeriShapeEnv


def test_question_sites_that_are_moot():
    s, t = sympy.symbols("s t", integer=True, positive=True)
    broadcast = questions.Question(sympy.Eq(s, 1), sympy.false, (), (), ("broadcast_symbolic_shapes",), (s, t))
    assert broadcast.moot({s: 1}) == ("a broadcast between sizes equal at 1", sympy.Eq(s, t))
    assert questions.Question(sympy.Gt(s, 1), sympy.true, (), (), ("compare_sizes",)).moot({s: 1})[1] is sympy.true
    assert questions.Question(sympy.Gt(s, 1), sympy.true, (), (), ("pick_tiling",)).moot({s: 1}) is None
    expand = questions.Question(sympy.Eq(s, 1), sympy.false, (), (), ("ExpandView.create",), (s, s))
    assert expand.moot({s: 1})[1] == sympy.true
    assert questions.Question(sympy.Eq(s, 1), sympy.false, (), (), ("ExpandView.create",), (t, s)).moot(
        {s: 1})[1] == sympy.Eq(t, s)
    stride_order = questions.Question(sympy.Gt(96 * s, 96), sympy.true, (), (), ("evaluate", "cmp", "argsort_sym"))
    assert "heuristic" in stride_order.moot({s: 1})[0]
    # a broadcast site whose sizes were not captured is not moot
    assert questions.Question(sympy.Eq(s, 1), sympy.false, (), (), ("broadcast_tensors",)).moot({s: 1}) is None


def test_the_constant_folders_contiguity_test_is_moot_only_where_is_a_size_one_was_answered_no():
    """``constant_fold_uniform_value``'s "is this dimension 1?" (its contiguity test) answered False
    only makes the test stricter; True, or another question there, is not covered."""
    s, t = sympy.symbols("s t", integer=True)
    site = ("constant_fold_uniform_value", "joint_graph_passes")

    def moot(expr, answer):
        return questions.Question(expr, answer, (), (), site).moot({s: 1})

    assert moot(sympy.Eq(s, 1), sympy.false)[1] is sympy.true
    assert moot(sympy.Eq(s, 1), sympy.true) is None
    assert moot(sympy.Eq(s, t), sympy.false) is None
    assert moot(sympy.Gt(s, 1), sympy.false) is None
    assert questions.Question(sympy.Eq(s, 1), sympy.false, (), (), ("remove_no_ops",)).moot({s: 1}) is None


def test_tensor_metadata_is_moot_only_in_the_pattern_matchers_retrace():
    """torch 2.15's check_fn retraces every search pattern; make_fx's ``tensor_meta`` of that
    graph (contiguity per memory format: ``Eq(s, 1)`` on Hugging Face's decode step) is read by
    nothing.  The same extraction in the replacement's trace, which is inserted, is not moot."""
    s = sympy.Symbol("s", integer=True, positive=True)

    def asked(*site: str) -> questions.Question:
        return questions.Question(sympy.Eq(s, 1), sympy.false, (), (), site)

    meta = "_extract_tensor_metadata"
    assert "retrace" in asked(meta, "fwd_only", questions.CHECK_FN, "apply").moot({s: 1})[0]
    assert asked(meta, "_sfdp_pattern_1", "fwd_only", questions.CHECK_FN).moot({s: 1})[1] is sympy.true
    assert asked(meta, "fwd_only", "replace_with_graph", "apply").moot({s: 1}) is None
    assert asked(meta, "joint_graph_passes").moot({s: 1}) is None
    # a question of the retrace that shapes the pattern (a decomposition's branch) is not moot
    assert asked("fwd_only", questions.CHECK_FN, "apply").moot({s: 1}) is None


_PATTERN_MATCHER = """
def fwd_only(fn, args):
    return fn(*args)


def register_replacement(search_fn, replace_fn):
    def check_fn(which):
        def search_fn_new(*args):
            return search_fn(*args)

        traced = {"search": search_fn, "search_new": search_fn_new, "replace": replace_fn}[which]
        return fwd_only(traced, ())

    return check_fn
"""


def test_the_tensor_metadata_extraction_is_a_site_only_in_the_search_patterns_retrace():
    """Frames of the named files and functions (torch's own, compiled from stand-ins): the
    extraction is the site where no Inductor function lies between it and the question;
    ``fwd_only`` is the search pattern's retrace only when check_fn traces its search
    pattern, not its replacement, whose nodes are inserted."""
    def compiled(src: str, filename: str) -> dict:
        namespace: dict = {"site": lambda: questions._site()[0]}
        exec(compile(src, filename, "exec"), namespace)
        return namespace

    asker = compiled("def asker():\n    return site()\n", "/x/torch/fx/experimental/symbolic_shapes.py")
    meta = compiled("def _extract_tensor_metadata():\n    return asker()\n", "/x/torch/fx/passes/shape_prop.py")
    meta["asker"] = asker["asker"]
    lowering = compiled("def make_pointwise():\n    return asker()\n", "/x/torch/_inductor/lowering.py")
    lowering["asker"] = asker["asker"]
    around = compiled("def _extract_tensor_metadata():\n    return inner()\n", "/x/torch/fx/passes/shape_prop.py")
    around["inner"] = lowering["make_pointwise"]
    replacement = compiled("def _extract_tensor_metadata():\n    return asker()\n", "/x/torch/fx/passes/shape_prop.py")
    replacement["asker"] = asker["asker"]
    matcher = compiled(_PATTERN_MATCHER, "/x/torch/_inductor/pattern_matcher.py")
    search, replace = meta["_extract_tensor_metadata"], replacement["_extract_tensor_metadata"]
    check_fn = matcher["register_replacement"](search, replace)
    assert check_fn("search") == ("_extract_tensor_metadata", "fwd_only", questions.CHECK_FN)
    # the closure check_fn wraps a pattern in when sizes become its inputs is one of Inductor's
    assert check_fn("search_new") == ("_extract_tensor_metadata", "search_fn_new", "fwd_only", questions.CHECK_FN)
    for which in ("search", "search_new"):
        q = questions.Question(sympy.Eq(sympy.Symbol("s"), 1), sympy.false, (), (), check_fn(which))
        assert q.moot({})[1] is sympy.true
    assert check_fn("replace") == ("_extract_tensor_metadata", questions.OTHER_TRACE, questions.CHECK_FN)
    q = questions.Question(sympy.Eq(sympy.Symbol("s"), 1), sympy.false, (), (), check_fn("replace"))
    assert q.moot({}) is None
    # an Inductor function between: that function is the site
    other = matcher["register_replacement"](around["_extract_tensor_metadata"], replacement["_extract_tensor_metadata"])
    assert other("search") == ("make_pointwise", "fwd_only", questions.CHECK_FN)
    assert asker["asker"]() == ()  # nothing of Inductor's on the way


def test_a_view_is_moot_only_where_its_strides_agree_at_one():
    """Inductor's view of a permuted (s, 3, 4) buffer: the strides computed for s >= 2 are
    those of an exact computation at s = 1 on every dimension larger than 1, or not."""
    s = sympy.Symbol("s", integer=True, positive=True)
    right = recompute.ViewStrides((s, 3, 4), (12, 1, 3), (s, 12), (12, 1), done=True)
    assert right.right_at({s: 1}) is False  # (1, 3, 4) with strides (12, 1, 3) is not viewable as (1, 12)
    ok = recompute.ViewStrides((s, 3, 4), (12, 4, 1), (s, 12), (12, 1), done=True)
    assert ok.right_at({s: 1})
    wrong = recompute.ViewStrides((3, s, 4), (4 * s, 4, 1), (3, 4 * s), (4 * s, 1), done=True)
    assert wrong.right_at({s: 1})
    bad = recompute.ViewStrides((3, s, 4), (4 * s, 4, 1), (3, 4 * s), (5, 1), done=True)
    assert not bad.right_at({s: 1})
    assert recompute.ViewStrides((s, 2), (2, 1), (2, s), None, done=True).right_at({s: 1})  # reshape math
    t = sympy.Symbol("t", integer=True, positive=True)
    assert not recompute.ViewStrides((s, t), (t, 1), (s * t,), (1,), done=True).right_at({s: 1})  # t symbolic


def test_a_convolution_layout_is_moot_only_where_it_agrees_at_one():
    """ViT's patch embedding, recorded as ``conv_layout``'s fake convolution: the output layout Inductor fixed for
    batch s, at s = 1, is the one torch's fake convolution gives at batch 1 (or a stride differs: not moot)."""
    from torch.utils import _pytree as pytree

    s = sympy.Symbol("s", integer=True, positive=True)
    cpu = torch.device("cpu")
    x = ("tensor", (s, 3, 8, 8), (192, 64, 8, 1), torch.float32, cpu)
    w = ("tensor", (4, 3, 2, 2), (12, 4, 2, 1), torch.float32, cpu)
    params = ([2, 2], [0, 0], [1, 1], False, [0, 0], 1)
    flat, spec = pytree.tree_flatten({"args": ("x", "w", None, *params), "kwargs": {}})
    assert flat[:2] == ["x", "w"] and flat[2] is None
    operands = [x, w, ("value", None), *(("value", v) for v in flat[3:])]
    conv = torch.ops.aten.convolution.default

    def layout(strides):
        return [("tensor", (s, 4, 4, 4), strides, torch.float32, cpu)]

    assert KernelCall(conv, operands, spec, layout((64, 16, 4, 1)), done=True).right_at({s: 1})
    assert not KernelCall(conv, operands, spec, layout((64, 1, 16, 4)), done=True).right_at({s: 1})  # channels last
    t = sympy.Symbol("t", integer=True, positive=True)  # another size symbolic at 1: over its range
    wide = ("tensor", (s, 3, 8, t), (24 * t, 8 * t, t, 1), torch.float32, cpu)
    out = [("tensor", (s, 4, 4, sympy.floor((t - 2) / 2) + 1), (16 * (sympy.floor((t - 2) / 2) + 1),
                                                                  4 * (sympy.floor((t - 2) / 2) + 1),
                                                                  sympy.floor((t - 2) / 2) + 1, 1), torch.float32, cpu)]
    assert not KernelCall(conv, [wide, *operands[1:]], spec, out, done=True).right_at({s: 1})  # t has no range


def test_a_stride_order_check_is_moot_only_where_its_result_is_the_same_at_one():
    """LLaMA's sequence dimension: strides (32*s, 32) compare unequal for s >= 2 and tie
    at 1, where the dimension has size 1 and torch's check ignores it."""
    s = sympy.Symbol("s", integer=True, positive=True)
    same = recompute.StrideOrder((2, s, 32), (32 * s, 32, 1), (2, 1, 0), True, done=True)
    assert same.right_at({s: 1})
    assert not recompute.StrideOrder((2, s, 32), (32 * s, 32, 1), (0, 1, 2), True, done=True).right_at({s: 1})
    assert not recompute.StrideOrder((2, s, 32), (32 * s, 32, 1), (2, 1, 0), None, done=True).right_at({s: 1})


def test_an_extern_kernel_layout_is_moot_only_where_torchs_fake_kernel_agrees_at_one():
    """A fallback kernel's outputs at s = 1: torch's fake kernel on the inputs at 1 gives
    the recorded sizes, and the strides on every dimension larger than 1 (or not)."""
    from torch.utils import _pytree as pytree

    s = sympy.Symbol("s", integer=True, positive=True)
    cpu = torch.device("cpu")
    a = ("tensor", (s, 4), (4, 1), torch.float32, cpu)
    b = ("tensor", (4, 3), (3, 1), torch.float32, cpu)
    flat, spec = pytree.tree_flatten({"args": ("a", "b"), "kwargs": {}})
    assert flat == ["a", "b"]
    mm = torch.ops.aten.mm.default
    right = KernelCall(mm, [a, b], spec, [("tensor", (s, 3), (3, 1), torch.float32, cpu)], done=True)
    assert right.right_at({s: 1})
    # (1, s) differs from (3, 1) only on the dimension of size 1 at s = 1: moot there
    assert KernelCall(mm, [a, b], spec, [("tensor", (s, 3), (1, s), torch.float32, cpu)],
                                done=True).right_at({s: 1})
    padded = KernelCall(mm, [a, b], spec, [("tensor", (s, 3), (6, 2), torch.float32, cpu)], done=True)
    assert not padded.right_at({s: 1})
    opaque = KernelCall(mm, [a, None], spec, right.outputs, done=True)  # an argument not rebuilt
    assert not opaque.right_at({s: 1})


def test_a_missing_torch_internal_is_said_once_and_refuses_instead_of_failing(monkeypatch, caplog):
    """A torch without one of the wrapped internals: the recording says so once and leaves
    it alone (answers asked there are not recomputed); nothing else changes."""
    from torch._inductor import ir

    monkeypatch.setattr(torch_names, "WIDENING_HOOKS",
                        (*torch_names.WIDENING_HOOKS, ("torch._inductor.ir", "Layout.no_such_check")))
    monkeypatch.setattr(recompute, "_said", set())
    original = ir.Layout.__dict__["is_stride_ordered"]
    env = VeriShapeEnv()
    with caplog.at_level("WARNING", logger="verishape"):
        with questions.recording(env, frozenset()):
            assert ir.Layout.__dict__["is_stride_ordered"] is not original  # the others are wrapped
        with questions.recording(env, frozenset()):
            pass
    assert ir.Layout.__dict__["is_stride_ordered"] is original  # restored
    said = [r.getMessage() for r in caplog.records if "no_such_check" in r.getMessage()]
    assert len(said) == 1 and "compiles as stock" in said[0]
    assert not recompute.UNRECORDED.right_at({})


def test_hint_reads_are_heuristics_or_answers_by_where_they_are_read():
    """An optimization hint is a heuristic (counted); a guarding hint read in ``mark_reuse``'s
    callers is one too; a guarding hint attached to a new SymInt decides nothing; any other
    guarding hint of a kept size is an answer that must hold at 1."""
    s = sympy.Symbol("s", integer=True, positive=True)
    log = questions.QuestionLog(frozenset({s}))
    questions._observe_hint(log, "optimization", 4 * s, 8)
    questions._observe_hint(log, "guarding", sympy.Symbol("t"), 3)  # not a kept size: ignored
    questions._observe_hint(log, "guarding", 4 * s, 8, caller="to_symint_or_int")
    assert log.questions == [] and sum(log.heuristic_hints.values()) == 1
    questions._observe_hint(log, "guarding", 4 * s, 8)
    (q,) = log.questions
    assert q.expr == sympy.Eq(4 * s, 8) and q.site[0] == "guarding hint" and q.moot({s: 1}) is None


def test_an_index_variable_keeps_its_lower_bound_when_the_prover_renames_it():
    """An answer with index-variable premises (``q0`` in [0, 8*s)): ``q0 >= 0`` of a symbol
    SymPy declares non-negative must survive as a premise (OPT's split reduction asks
    ``8*(q0//8) + ModularIndexing(q0, 1, 8) < 8*s``, true at s = 1 only because q0 >= 0)."""
    from types import SimpleNamespace

    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    from verishape.compiler.widen import goals as widen_goals
    from verishape.core.premises import current_prover

    s = sympy.Symbol("s", integer=True, positive=True)
    q0 = sympy.Symbol("q0", integer=True, nonnegative=True)
    from torch.utils._sympy.numbers import int_oo

    # as Inductor's range simplification passes them: a symbolic bound is an axiom
    q = questions.Question(sympy.Lt(8 * FloorDiv(q0, 8) + ModularIndexing(q0, 1, 8), 8 * s), sympy.true,
                           ((q0, ValueRanges(0, int_oo)),), (sympy.Lt(q0, 8 * s),), ("_simplify",))
    kept = SimpleNamespace(questions=SimpleNamespace(questions=[q]))
    ((goal, extra, _),) = widen_goals.answer_goals(kept, {s: sympy.Integer(1)})
    assert any(e == sympy.Ge(sympy.Symbol("q0", integer=True), 0) for e in extra)
    from verishape.core.premises import Premises, plain_symbols

    premises = Premises.stated([], plain_symbols([goal, *extra]))
    assert widen_goals._prove_one(current_prover(), premises, goal, "test", extra) is not None
    assert not premises.facts, "the answer's own premises hold for that question only"


# ---------------------------------------------------------------------------- sizes that stay symbolic


def test_layout_computations_with_a_size_that_stays_symbolic_run_over_its_range():
    """A decoder whose sequence length goes to 1 while its batch ``b`` stays a symbol: the
    recorded layout computations run again with ``b`` over its range [2, oo), and are moot
    only where that decides them and gives the recorded result for every ``b``."""
    from torch.utils import _pytree as pytree
    from torch.utils._sympy.numbers import int_oo

    s, b = sympy.symbols("s b", integer=True, positive=True)
    at_one = {s: 1}
    ranges = {b: ValueRanges(2, int_oo), s: ValueRanges(2, int_oo)}
    # a view of a contiguous (b, s, 32) buffer as (b, 32*s): strides (32*s, 1) for every b
    view = recompute.ViewStrides((b, s, 32), (32 * s, 32, 1), (b, 32 * s), (32 * s, 1), done=True, ranges=ranges)
    assert view.right_at(at_one)
    wrong = recompute.ViewStrides((b, s, 32), (32 * s, 32, 1), (b, 32 * s), (64 * s, 1), done=True, ranges=ranges)
    assert not wrong.right_at(at_one)
    unranged = recompute.ViewStrides((b, s, 32), (32 * s, 32, 1), (b, 32 * s), (32 * s, 1), done=True)
    assert not unranged.right_at(at_one)  # no range for b: not decided, refused
    # a stride order over a symbolic batch: (b, 1, 32) with strides (32*s, 32, 1)
    order = recompute.StrideOrder((b, s, 32), (32 * s, 32, 1), (2, 1, 0), True, done=True, ranges=ranges)
    assert order.right_at(at_one)
    assert not recompute.StrideOrder((b, s, 32), (32 * s, 32, 1), (0, 1, 2), True, done=True,
                                     ranges=ranges).right_at(at_one)
    # an extern mm on (b*s, 4) @ (4, 3): its fake run over b's range gives (b, 3), strides (3, 1)
    cpu = torch.device("cpu")
    lhs = ("tensor", (b * s, 4), (4, 1), torch.float32, cpu)
    rhs = ("tensor", (4, 3), (3, 1), torch.float32, cpu)
    _, spec = pytree.tree_flatten({"args": ("a", "b"), "kwargs": {}})
    mm = torch.ops.aten.mm.default
    out = [("tensor", (b * s, 3), (3, 1), torch.float32, cpu)]
    assert KernelCall(mm, [lhs, rhs], spec, out, done=True, ranges=ranges).right_at(at_one)
    bad = [("tensor", (b * s, 3), (1, b * s), torch.float32, cpu)]
    assert not KernelCall(mm, [lhs, rhs], spec, bad, done=True, ranges=ranges).right_at(at_one)


def test_a_dense_check_with_a_size_that_stays_symbolic_runs_over_its_range():
    """Issue 48's decode step: a causal LM's logits ``(b, s, V)`` are checked dense while
    Inductor lowers (``run_node``); at ``s = 1`` with the batch ``b`` a symbol (generic
    recompiles), torch's check runs again over ``b``'s range and must give the recorded
    result for every ``b``, or the answer is not moot (refused)."""
    from torch.utils._sympy.numbers import int_oo

    s, b, c = sympy.symbols("s b c", integer=True, positive=True)
    at_one = {s: 1}
    ranges = {b: ValueRanges(2, int_oo), s: ValueRanges(2, int_oo), c: ValueRanges(2, 10)}
    logits = recompute.DenseCheck((b, s, 128), (128 * s, 128, 1), True, done=True, ranges=ranges)
    assert logits.right_at(at_one)
    assert not recompute.DenseCheck((b, s, 128), (128 * s, 128, 1), False, done=True, ranges=ranges).right_at(at_one)
    # (b, 1) with strides (2, 1) at s = 1: a gap between rows for every b, not dense
    assert not recompute.DenseCheck((b, s), (2, 1), True, done=True, ranges=ranges).right_at(at_one)
    # dense only where c == 4: the range [2, 10] does not decide it, refused
    assert not recompute.DenseCheck((b, 4), (c, 1), True, done=True, ranges=ranges).right_at(at_one)
    # no range for b: not decided, refused
    assert not recompute.DenseCheck((b, s, 128), (128 * s, 128, 1), True, done=True).right_at(at_one)


def test_an_overlap_check_is_moot_where_its_caller_acts_the_same_at_one():
    """torch 2.15's reinplacing pass runs ``copy_``'s meta function on the view it writes
    through, whose internal-overlap check asks ``s < 2``: a ``(1, 2, 4)`` view of rows of 12
    is "no overlap" where ``(s, 2, 4)`` is "too hard".  ``copy_`` raises on "yes" alone, so
    for it the two agree; a caller that reads the whole result does not, and a view that
    overlaps only for ``s >= 2`` (a stride 0) is refused for either."""
    s = sympy.Symbol("s", integer=True, positive=True)
    at_one = {s: sympy.Integer(1)}
    rows = dict(size=(s, 2, 4), stride=(12, 4, 1), result=2, done=True)
    copy_ = ("torch/_meta_registrations.py", "meta_copy_")
    assert recompute.OverlapCheck(**rows, reader=copy_).right_at(at_one)
    assert not recompute.OverlapCheck(**rows, reader=("torch/_inductor/fx_passes/slice_scatter_chunking.py",
                                                       "chunk_slice_scatters")).right_at(at_one)
    # a function of that name elsewhere is not torch's copy_
    assert not recompute.OverlapCheck(**rows, reader=("mine.py", "meta_copy_")).right_at(at_one)
    expanded = dict(size=(s, 4), stride=(0, 1), result=1, done=True, reader=copy_)
    assert not recompute.OverlapCheck(**expanded).right_at(at_one)
    assert not recompute.OverlapCheck(**{**rows, "done": False}, reader=copy_).right_at(at_one)


def test_an_overlap_check_is_recorded_with_its_caller_while_a_lowering_is_tracked(monkeypatch):
    """The wrapped check ties questions asked inside it to the call, and keeps its result
    and the function that called it (how that function reads the result)."""
    calls = []

    def inside(call, original, args, kwargs):
        calls.append(call)
        return original(*args, **kwargs)

    monkeypatch.setattr(recompute, "_inside", inside)

    def meta_copy_(t):  # the name of a caller that acts on "yes" alone
        return getattr(torch, torch_names.OVERLAP_CHECK[1])(t)

    rows = torch.empty_strided((5, 8), (12, 1), device="meta")
    with recompute.tracking(lambda *a: None, lambda s: None, lambda: None):
        assert meta_copy_(rows) == 2  # too hard to tell: not dense
    assert meta_copy_(rows) == 2 and len(calls) == 1  # unwrapped after the block
    (call,) = calls
    assert isinstance(call, recompute.OverlapCheck) and call.done
    assert (call.size, call.stride, call.result) == ((5, 8), (12, 1), 2)
    assert call.reader[1] == "meta_copy_" and call.reader[0].endswith("test_widen_questions.py")
