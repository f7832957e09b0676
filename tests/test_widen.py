"""Batch 1 from the batch-N graph: ``verishape.compile(widen_specializations=True)``.

A dynamic compile keeps its graphs, its artifact and the lowering's answers that needed a
size of at least 2; a later call at size 1 runs that artifact when the size-1 trace is
proved equal to the generic graph at 1 (and every kept answer harmless there), and compiles
as stock otherwise.  The tests check both directions on small programs, with aot_eager and
with Inductor's C++ code generation (the generic kernels run at size 1 and are compared
with eager), and one tiny transformers model through a batch sweep.
"""

from __future__ import annotations

import collections

import pytest
import sympy
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import counters

import verishape
from verishape import solvers
from verishape.compiler import frames
from verishape.compiler.widen import canon, kept, questions, reuse as widen
from verishape.core.premises import use_prover


pytestmark = pytest.mark.usefixtures("fresh_frames")


def _sweep(fn, sizes, make, backend="aot_eager", dynamic=True, **kw):
    compiled = verishape.compile(fn, backend=backend, dynamic=dynamic, widen_specializations=True, **kw)
    for b in sizes:
        args = make(b)
        got, want = compiled(*args), fn(*args)
        torch.testing.assert_close(got, want)
    return compiled


def _frames(fn) -> list:
    return frames.envs_for(fn.__code__)


def _widened(fn) -> list[str]:
    return [ev.sources[0] for env in _frames(fn) for ev in env.verishape_log.widened]


def _refusals(fn) -> list[tuple[str, str]]:
    return [r for env in _frames(fn) for r in env.verishape_log.not_widened]


def _reused() -> int:
    """Size-1 calls that ran a generic artifact instead of compiling."""
    return counters["verishape"]["reused_at_size_1"]


def _entries(fn) -> list:
    return _debug_get_cache_entry_list(fn.__code__)


# ---------------------------------------------------------------------------- same graph: batch 1 reuses it


def same_at_one(x):
    return x * 2 + x.sum(1, keepdim=True)


def test_batch_one_runs_the_generic_artifact():
    _sweep(same_at_one, (2, 3, 1, 4, 1), lambda b: (torch.randn(b, 5),))
    assert _widened(same_at_one) == ["L['x'].size()[0]"]
    assert _reused() == 1  # the second batch-1 call hits the size-1 entry, which reuses it too
    assert len(_entries(same_at_one)) == 2  # the generic entry and the size-1 entry
    (ev,) = [ev for env in _frames(same_at_one) for ev in env.verishape_log.widened]
    assert ev.aot is not None and ev.dynamo and ev.reused
    size_1 = next(e for e in _entries(same_at_one) if e.guard_manager.check({"x": torch.randn(1, 5)}))
    assert not size_1.guard_manager.check({"x": torch.randn(2, 5)})  # the generic entry serves that


def test_only_the_pattern_that_arrived_is_proved():
    """The columns are dynamic too: nothing is traced at 1 until a call has a size 1, and
    then only the sizes that are 1 in it."""
    compiled = _sweep(same_at_one, (2, 3), lambda b: (torch.randn(b, 5),))
    assert _widened(same_at_one) == [] and _reused() == 0
    x = torch.randn(4, 1)
    torch.testing.assert_close(compiled(x), same_at_one(x))
    assert _widened(same_at_one) == ["L['x'].size()[1]"]
    x = torch.randn(1, 1)
    torch.testing.assert_close(compiled(x), same_at_one(x))
    assert "with L['x'].size()[1] at 1 too" in verishape.explain(same_at_one)
    assert _reused() == 2


def test_the_reuse_is_logged_as_a_recheckable_proof():
    """The generic guard equating the columns of x and m is proved at batch 1 from the
    size-1 trace's guards: a proof record that ``solvers.recheck`` re-decides."""
    _sweep(masked, (2, 3, 1), lambda b: (torch.randn(b, 8), torch.ones(b, 8)))
    records = [r for env in _frames(masked) for r in env.verishape_log.records
               if r.obligation.kind == "specialization_widened"]
    assert records and all(solvers.recheck(r).status == solvers.PROVED for r in records)
    assert "widened to admit 1" in verishape.explain(masked)


def shares_batch(x, y):
    return x * 2 + y.sum(1, keepdim=True)


def test_duck_sized_inputs_arrive_together():
    """x and y share the batch symbol (duck sizing): a call with both at 1 reuses; a call
    with one at 1 and the other not is not that symbol at 1, and compiles as stock."""
    _sweep(shares_batch, (2, 3, 1), lambda b: (torch.randn(b, 4), torch.randn(b, 6)), dynamic=None)
    assert _reused() == 1 and len(_widened(shares_batch)) == 1


def masked(x, m):
    return (x * m).sum(1) + x.view(x.size(0), -1).mean(1)


def test_a_symbol_torch_replaced_arrives_with_the_one_that_replaced_it():
    """Automatic dynamic gives x and m a batch symbol each; ``x * m`` equates them (one
    replaces the other), as input_ids and attention_mask on a Hugging Face model."""
    _sweep(masked, (2, 3, 1, 4, 1), lambda b: (torch.randn(b, 8), torch.ones(b, 8)), dynamic=None)
    assert len(_widened(masked)) == 1 and _reused() == 1
    assert len(_entries(masked)) == 3  # static batch 2, dynamic, size 1 (reusing the dynamic artifact)


def test_sizes_the_size_1_trace_keeps_apart_match_one_generic_symbol():
    """dynamic=True duck-sizes x's and m's columns into one generic symbol; the size-1 trace
    may give them two.  Finer is fine: the generic guard equating them is proved at 1."""
    _sweep(masked, (2, 3, 1), lambda b: (torch.randn(b, 8), torch.ones(b, 8)))
    assert _reused() == 1, _refusals(masked)


def through_kwargs(**kwargs):
    x = kwargs["x"]
    return x * 2 + x.sum(1, keepdim=True)


def test_an_input_passed_in_kwargs_is_found():
    compiled = verishape.compile(through_kwargs, backend="aot_eager", dynamic=True, widen_specializations=True)
    for b in (2, 3, 1):
        x = torch.randn(b, 5)
        torch.testing.assert_close(compiled(x=x), through_kwargs(x=x))
    assert _widened(through_kwargs) == ["L['kwargs']['x'].size()[0]"]
    assert _reused() == 1


class _DictOutput(torch.nn.Module):
    """Returns an ``OrderedDict`` built in a loop, as Hugging Face model outputs are."""

    def forward(self, **inputs):
        y = inputs["x"] * 2 + inputs["x"].sum(1, keepdim=True)
        out = collections.OrderedDict()
        for name, value in (("a", y), ("b", y + 1)):
            out[name] = value
        return out


def test_a_module_called_directly_reuses_at_batch_one():
    """The size-1 entry runs its own bytecode (building the dict) around the generic graph."""
    module = _DictOutput()
    compiled = verishape.compile(module, backend="aot_eager", widen_specializations=True)
    for b in (2, 3, 1, 4, 1):
        x = torch.randn(b, 5)
        got, want = compiled(x=x), module(x=x)
        assert list(got) == list(want)
        for k in want:
            torch.testing.assert_close(got[k], want[k])
    assert _reused() == 1


def test_training_graph_is_not_kept():
    w = torch.randn(5, requires_grad=True)

    def uses_weight(x):
        return x * w + x.sum(1, keepdim=True)

    compiled = verishape.compile(uses_weight, backend="aot_eager", dynamic=True, widen_specializations=True)
    for b in (2, 3, 1):
        compiled(torch.randn(b, 5))
    assert _widened(uses_weight) == [] and _reused() == 0
    assert any("no AOTAutograd inference graph" in why for _, why in _refusals(uses_weight))


def test_without_the_flag_nothing_is_kept():
    compiled = verishape.compile(same_at_one, backend="aot_eager", dynamic=True, widen_specializations=False)
    for b in (2, 3, 1):
        compiled(torch.randn(b, 5))
    assert _widened(same_at_one) == [] and _reused() == 0 and kept.kept_count() == 0


def test_eager_backend_compares_the_dynamo_graph():
    _sweep(same_at_one, (2, 1), lambda b: (torch.randn(b, 5),), backend="eager")
    assert _reused() == 1


def batch_and_mask(x, m):
    # as BERT, DistilBERT, T5, BART: input_ids and attention_mask get a batch symbol each and
    # nothing in the graph equates them
    return x * 2 + x.sum(1, keepdim=True), m.float().mean(1)


def test_independent_batch_symbols_are_proved_as_they_arrive():
    """Two batch symbols no guard relates: a call with both at 1 is one pattern (both
    symbols at 1 together), one with only x at 1 another; each is proved when it arrives."""
    compiled = verishape.compile(batch_and_mask, backend="aot_eager", widen_specializations=True)
    for bx, bm in ((2, 2), (3, 3), (1, 1), (4, 4), (1, 3)):
        x, m = torch.randn(bx, 5), torch.ones(bm, 7)
        for got, want in zip(compiled(x, m), batch_and_mask(x, m)):
            torch.testing.assert_close(got, want)
    assert _reused() == 2, _refusals(batch_and_mask)
    text = verishape.explain(batch_and_mask)
    assert "L['m'].size()[0] widened to admit 1 (with L['x'].size()[0] at 1 too)" in text
    assert "L['x'].size()[0] widened to admit 1:" in text


def squeeze_second(x, m):
    return x * 2 + x.sum(1, keepdim=True), m.squeeze(0).float()


def test_a_pattern_whose_graph_differs_compiles_as_stock():
    """m's graph differs at 1 (a squeeze): x alone at 1 reuses, both at 1 compile."""
    compiled = verishape.compile(squeeze_second, backend="aot_eager", widen_specializations=True)
    for bx, bm in ((2, 2), (3, 3), (1, 3), (1, 1)):
        x, m = torch.randn(bx, 5), torch.ones(bm, 7)
        for got, want in zip(compiled(x, m), squeeze_second(x, m)):
            torch.testing.assert_close(got, want)
    assert _widened(squeeze_second) == ["L['x'].size()[0]"] and _reused() == 1
    assert any("differs" in why for _, why in _refusals(squeeze_second))


def indexes_with_ellipsis(x):
    return x[..., :2] * 2 + x.sum(1, keepdim=True)


def test_an_ellipsis_index_is_compared_as_a_constant():
    """LLaMA's rotary embedding indexes with ``x[..., :n]``: the Dynamo graph's getitem has
    an ``Ellipsis`` argument, a constant like ``None``."""
    _sweep(indexes_with_ellipsis, (2, 3, 1), lambda b: (torch.randn(b, 4),), dynamic=None)
    assert _reused() == 1, _refusals(indexes_with_ellipsis)


def shift_right(ids):
    # BART's shift_tokens_right: the clone of a column slice is contiguous, (s, 7) with
    # strides (7, 1), for s >= 2; at batch 1 the slice counts as dense and the clone keeps
    # its strides (8, 1); a stride of a size-1 dimension addresses nothing
    shifted = ids.new_zeros(ids.shape)
    shifted[:, 1:] = ids[:, :-1].clone()
    shifted[:, 0] = 2
    return shifted * 3


def test_a_stride_of_a_size_1_dimension_is_not_a_difference():
    _sweep(shift_right, (2, 3, 1, 4, 1), lambda b: (torch.randint(0, 100, (b, 8)),), dynamic=None)
    assert _reused() == 1, _refusals(shift_right)


class _ClsToken(torch.nn.Module):
    """ViT's embeddings: ``cls_token.expand(batch, -1, -1)`` is dropped by ATen at batch 1."""

    def __init__(self):
        super().__init__()
        self.cls = torch.nn.Parameter(torch.randn(1, 1, 4))

    def forward(self, x):
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) * 2


def test_an_expand_that_is_a_no_op_at_batch_one_is_its_input():
    module = _ClsToken().eval()
    compiled = verishape.compile(module, backend="aot_eager", widen_specializations=True)
    with torch.no_grad():
        for b in (2, 3, 1):
            x = torch.randn(b, 5, 4)
            torch.testing.assert_close(compiled(x), module(x))
    assert _reused() == 1, [r for env in frames.envs_for(type(module).forward.__code__)
                            for r in env.verishape_log.not_widened]


def test_canonical_keeps_the_strides_of_graph_outputs():
    """Intermediates compare their strides on dimensions of size > 1 only; a graph output
    (the caller sees its strides) and an input compare all of them."""
    c = canon.Canonicalizer(lambda s: s)
    loose = c.tensor_meta(torch.empty_strided((1, 7), (8, 1)), {}, loose=True)
    assert loose == c.tensor_meta(torch.empty((1, 7)), {}, loose=True)
    assert c.tensor_meta(torch.empty_strided((1, 7), (8, 1)), {}) != c.tensor_meta(torch.empty((1, 7)), {})
    assert (c.tensor_meta(torch.empty_strided((2, 7), (8, 1)), {}, loose=True)
            != c.tensor_meta(torch.empty((2, 7)), {}, loose=True))


def _one_op_graph(out_stride: tuple[int, ...]) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(1, 7)
    y = graph.call_function(torch.ops.aten.clone.default, (x,))
    y.meta["val"] = torch.empty_strided((1, 7), out_stride)
    z = graph.call_function(torch.ops.aten.relu.default, (y,))
    z.meta["val"] = torch.empty(1, 7)
    graph.output((y, z))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_a_graph_output_keeps_the_stride_of_its_size_1_dimension():
    """In a whole graph: the clone is returned, so the stride of its size-1 dimension
    (8 vs 7) is seen by the caller and is a difference."""
    a, b = (canon.canonical(_one_op_graph(st), lambda s: s) for st in ((8, 1), (7, 1)))
    assert a != b


def test_a_whole_dimension_scatter_is_its_source_only_in_functional_graphs():
    """``slice_scatter(base, src, 0, 0, end >= size)`` with src shaped like base reads as src
    in a graph that mutates nothing; kept when it is a graph output or the graph mutates."""
    from torch.fx.experimental.proxy_tensor import make_fx

    scatter = torch.ops.aten.slice_scatter.default

    def inner(base, src):
        return scatter(base, src, 0, 0, 2**63 - 1) * 2

    def output(base, src):
        return scatter(base, src, 0, 0, 2**63 - 1)

    def mutating(base, src):
        out = scatter(base, src, 0, 0, 2**63 - 1) * 2
        src.add_(1)
        return out

    def partial(base, src):
        return scatter(base, src[:2], 0, 0, 2) * 2

    def targets(fn):
        gm = make_fx(fn, tracing_mode="fake")(torch.zeros(3, 4), torch.ones(3, 4))
        return [e[1] for e in canon.canonical(gm, lambda s: s).entries if e[0] == "call_function"]

    assert "aten.slice_scatter.default" not in targets(inner)
    for fn in (output, mutating, partial):
        assert "aten.slice_scatter.default" in targets(fn), fn.__name__


# ---------------------------------------------------------------------------- different at size 1: compiled as stock


def squeezes(x):
    return x.squeeze(0) * 2


def branches_on_size(x):
    if x.size(0) == 1:  # statically False for s >= 2: no guard, the size-1 trace takes the other path
        return x * 3
    return x * 2


def size_constant_escapes(x):
    return x * 2, x.size(0) > 1  # the returned constant differs at 1 (its own bytecode returns it)


@pytest.mark.parametrize("fn", [squeezes, branches_on_size])
def test_different_graph_is_not_reused(fn):
    _sweep(fn, (2, 3, 1), lambda b: (torch.randn(b, 4),))
    assert _reused() == 0
    assert any("Dynamo graph at size 1 differs" in why for _, why in _refusals(fn)), _refusals(fn)


_SCALE = {"factor": 2}


def reads_a_global_past_one(x):
    if x.size(0) > 1:  # statically True for s >= 2: only the generic trace reads (and guards) the global
        return x * _SCALE["factor"]
    return x * 2


def test_a_non_shape_guard_the_size_1_trace_does_not_check_refuses():
    """The graphs are equal at 1 (both multiply by 2), but the generic frame guards a global
    the size-1 trace never reads: refused, and every later call still equals eager."""
    compiled = _sweep(reads_a_global_past_one, (2, 3, 1), lambda b: (torch.randn(b, 4),))
    assert _reused() == 0
    assert any("checks guards the size-1 trace does not" in why for _, why in _refusals(reads_a_global_past_one)), \
        _refusals(reads_a_global_past_one)
    _SCALE["factor"] = 5
    try:
        for b in (1, 3):
            x = torch.randn(b, 4)
            torch.testing.assert_close(compiled(x), reads_a_global_past_one(x))
    finally:
        _SCALE["factor"] = 2


def accumulates(x, idx, v):
    return x.index_put((idx,), v, accumulate=True) * 2


def _accumulate_args(b: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(b)
    return torch.randn(b, 8, generator=g), torch.randint(0, b, (64,), generator=g), torch.randn(64, 8, generator=g)


def test_an_artifact_lowered_under_another_global_state_is_not_reused():
    """Inductor lowers an accumulating ``index_put`` to an atomic-add kernel, or, under
    ``use_deterministic_algorithms``, to aten's deterministic kernel: a generic artifact
    lowered without it must not serve a size-1 call made with it (stock compiles anew)."""
    compiled = verishape.compile(accumulates, widen_specializations=True)
    for b in (2, 3):
        compiled(*_accumulate_args(b))
    torch.use_deterministic_algorithms(True)
    try:
        torch.testing.assert_close(compiled(*_accumulate_args(1)), accumulates(*_accumulate_args(1)))
    finally:
        torch.use_deterministic_algorithms(False)
    assert _reused() == 0
    assert any("another global state (deterministic_algorithms)" in why for _, why in _refusals(accumulates)), \
        _refusals(accumulates)
    compiled(*_accumulate_args(1))  # the same state as the generic compile's again: that one reuses
    assert _reused() == 1


def adds_noise(x):
    return x + torch.rand_like(x)


def test_a_compile_of_another_backend_object_is_not_reused():
    """Two wrappers of one function share its code and Dynamo's frame, but Dynamo serves each
    entry only to the backend that made it: a size-1 call through the wrapper whose Inductor
    options ask for eager's random numbers (``fallback_random``) must not run the other
    wrapper's generic artifact (Inductor's own random numbers), and equals eager, as stock's."""
    plain = verishape.compile(adds_noise, widen_specializations=True)
    eager_rng = verishape.compile(adds_noise, widen_specializations=True, options={"fallback_random": True})
    for b in (2, 3):
        plain(torch.zeros(b, 4))
    x = torch.zeros(1, 4)
    torch.manual_seed(0)
    got = eager_rng(x)
    torch.manual_seed(0)
    assert torch.equal(got, adds_noise(x))
    assert _reused() == 0
    plain(x)  # the wrapper that compiled the generic artifact runs it at 1
    assert _reused() == 1


def size_returned(x):
    return x * 2, x.shape[0] - 1, x.shape[1]


@pytest.mark.parametrize("fn", [size_constant_escapes, size_returned])
def test_a_size_returned_by_the_frame_comes_from_the_size_1_bytecode(fn):
    """The generic graph returns a size (``s > 1``, ``s - 1``); at 1 Dynamo folds it and the
    size-1 frame's bytecode returns the constant, so its graph lacks that output.  The
    graphs are otherwise equal: the generic artifact runs, its size result is left out, and
    the frame returns the size-1 bytecode's constant (False, 0)."""
    compiled = _sweep(fn, (2, 3), lambda b: (torch.randn(b, 4),))
    got, want = compiled(torch.randn(1, 4)), fn(torch.randn(1, 4))
    assert got[1:] == want[1:] and type(got[1]) is type(want[1])
    assert _reused() == 1, _refusals(fn)
    assert [ev.dropped_outputs for env in _frames(fn) for ev in env.verishape_log.widened] == [1]


def test_returned_sizes_align_only_folded_values():
    """The generic outputs may have extra folded values (sizes); nothing else may differ."""
    g = canon.Canon(("a",), (("node", 0), ("value", sympy.Integer(0)), ("node", 1)))
    assert canon.returned_sizes(g, canon.Canon(("a",), (("node", 0), ("node", 1)))) == (0, 2)
    assert canon.returned_sizes(g, g) == (0, 1, 2)
    assert canon.returned_sizes(g, canon.Canon(("a",), (("node", 1), ("node", 0)))) is None
    assert canon.returned_sizes(g, canon.Canon(("b",), (("node", 0), ("node", 1)))) is None
    assert canon.returned_sizes(g, canon.Canon(("a",), (("node", 0),))) is None


def test_unknown_solver_answer_means_no_reuse():
    class Unknown(solvers.Prover):
        def prove(self, goal, assumptions=(), **kw):
            return solvers.SolveResult("unknown", reason="injected")

    compiled = verishape.compile(masked, backend="aot_eager", dynamic=True, widen_specializations=True)
    compiled(torch.randn(2, 8), torch.ones(2, 8))
    with use_prover(Unknown()):
        compiled(torch.randn(1, 8), torch.ones(1, 8))
    assert _reused() == 0
    assert any("not implied" in why or "not proved" in why for _, why in _refusals(masked)), _refusals(masked)


def test_a_recorded_answer_that_is_not_moot_refuses_and_is_named():
    """An answer the lowering acted on that differs at 1, from a site not known to be
    harmless: no reuse, and the refusal names the question."""
    compiled = verishape.compile(same_at_one, backend="aot_eager", dynamic=True, widen_specializations=True)
    compiled(torch.randn(2, 5))
    (k,) = kept._kept[same_at_one.__code__]
    (s,) = [s for s in k.candidates if widen.source_names(k.env, s)[0] == "L['x'].size()[0]"]
    k.questions.questions.append(questions.Question(sympy.Gt(s, 1), sympy.true, (), (), ("pick_tiling",)))
    x = torch.randn(1, 5)
    torch.testing.assert_close(compiled(x), same_at_one(x))
    assert _reused() == 0
    (why,) = [why for _, why in _refusals(same_at_one) if "pick_tiling" in why]
    assert f"{s} > 1 answered True" in why


# ---------------------------------------------------------------------------- Inductor


def broadcasts(x, y, bias):
    return torch.relu(x + y) * bias + x.sum(1, keepdim=True)


@pytest.mark.slow
def test_inductor_runs_its_generic_kernels_at_batch_one():
    """C++ code generation: the kernels compiled for batch s run at batch 1 and equal
    eager; the lowering's broadcast answers ``Eq(s, 1) -> False`` (``guard_or_false``) are
    its fallback, the branch right at every size, so not kept; anything kept is moot."""
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):  # compiled here, not read from disk
        _sweep(broadcasts, (2, 3, 1, 5, 1),
               lambda b: (torch.randn(b, 6), torch.randn(b, 6), torch.randn(6)), backend="inductor", dynamic=None)
    assert _reused() == 1, _refusals(broadcasts)
    (k,) = kept._kept[broadcasts.__code__]
    assert k.questions is not None
    assert any(isinstance(e, sympy.Eq) and reading == "true" for e, _, _, _, reading in k.questions._seen)
    assert all(q.moot({s: 1 for s in k.candidates}) for q in k.questions.questions)


_W = torch.randn(6, 5)
_C = torch.randn(4, 3, 3, 3)
_INDUCTOR_PROGRAMS = {
    # a view of a permuted buffer (View.create's stride computation)
    "perm_reshape": lambda x: x.view(x.shape[0], 2, 3).permute(0, 2, 1).reshape(x.shape[0], -1) * 2,
    # a convolution's output layout (conv_layout) after an expand of a dimension to its own size
    "conv": lambda x: torch.nn.functional.conv2d(
        x.view(x.shape[0], 3, 2, 1).expand(-1, -1, -1, 3).contiguous(), _C, padding=1),
    "expand_mul": lambda x: x.unsqueeze(2).expand(-1, -1, 4) * torch.arange(4.0),
    # an extern kernel (CPU attention) and its fake inputs
    "attention": lambda x: torch.nn.functional.scaled_dot_product_attention(
        *(x.view(x.shape[0], 1, 2, 3),) * 3),
    "matmul_softmax": lambda x: torch.softmax(x @ _W, 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_INDUCTOR_PROGRAMS))
def test_inductor_artifacts_run_at_batch_one_equal_to_eager(name):
    fn = _INDUCTOR_PROGRAMS[name]
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        compiled = verishape.compile(fn)
        for b in (2, 3, 1, 4, 1):
            x = torch.randn(b, 6)
            torch.testing.assert_close(compiled(x), fn(x))
    assert _reused() == 1, [r for env in frames.envs_for(fn.__code__) for r in env.verishape_log.not_widened]


# ---------------------------------------------------------------------------- a real model


@pytest.mark.slow
def test_tiny_gpt2_batch_sweep_reuses_the_generic_graph_and_equals_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100)).eval()

    def fwd(ids, mask):
        return model(input_ids=ids, attention_mask=mask).logits

    with torch.no_grad():
        _sweep(fwd, (2, 3, 1, 4, 1, 5),
               lambda b: (torch.randint(0, 100, (b, 7)), torch.ones(b, 7, dtype=torch.long)), dynamic=None)
    assert _reused() == 1, _refusals(fwd)
    assert any(name in _widened(fwd) for name in ("L['ids'].size()[0]", "L['mask'].size()[0]"))


@pytest.mark.slow
def test_a_decode_sized_step_reuses_while_the_batch_stays_a_symbol():
    """Batch and length both dynamic (8x16, 9x16, 8x17), then length 1 at batch 8: the
    layout computations recorded with both symbols are checked over the batch's range (a
    view's strides, a stride order, the attention kernel), a replaced symbol's generic
    range is proved in its replacement, and the artifact equals eager (Inductor)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2Model(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100)).eval()

    def fwd(ids, mask):
        return model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state

    shapes = [(8, 16), (9, 16), (8, 17), (8, 1)]
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        compiled = verishape.compile(fwd)
        for b, n in shapes:
            ids, mask = torch.randint(0, 100, (b, n)), torch.ones(b, n, dtype=torch.long)
            torch.testing.assert_close(compiled(ids, mask), fwd(ids, mask))
    assert _reused() == 1, _refusals(fwd)
