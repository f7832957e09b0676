"""Specialization equivalence and ``verishape.compile(widen_specializations=True)``.

A dynamic compile's 0/1 specialization (``2 <= s``) is widened to ``1 <= s`` only when
the frame traced at size 1 gives the same graphs, bytecode and implied guards; the tests
check both directions on small programs, that the widened artifact rejects every input
the proof does not cover, and one tiny transformers model through a widened batch sweep.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

import verishape
from verishape import solvers
from verishape.compiler import canon, frames, widen
from verishape.shape_env import use_prover


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    with frames._envs_lock:  # count only this test's frames
        frames._envs_by_code.clear()
    yield
    torch._dynamo.reset()


def _sweep(fn, sizes, make, backend="aot_eager", **kw):
    compiled = verishape.compile(fn, backend=backend, dynamic=True, widen_specializations=True, **kw)
    for b in sizes:
        args = make(b)
        torch.testing.assert_close(compiled(*args), fn(*args))
    return compiled


def _frames(fn) -> list:
    return frames.envs_for(fn.__code__)


def _widened(fn) -> list[str]:
    return [ev.sources[0] for env in _frames(fn) for ev in env.verishape_log.widened]


def _widened_sizes(fn) -> set[str]:
    """The input sizes widened (a size proved alone and again with others at 1 counts once)."""
    return set(_widened(fn))


def _refusals(fn) -> list[tuple[str, str]]:
    return [r for env in _frames(fn) for r in env.verishape_log.not_widened]


# ---------------------------------------------------------------------------- same graph: widened


def same_at_one(x):
    return x * 2 + x.sum(1, keepdim=True)


def test_equal_graph_is_widened_and_batch_one_reuses_it():
    _sweep(same_at_one, (2, 3, 1, 4, 1), lambda b: (torch.randn(b, 5),))
    # the columns too: x.sum(1, keepdim=True) broadcast over one column is the same graph
    assert _widened_sizes(same_at_one) == {"L['x'].size()[0]", "L['x'].size()[1]"}
    assert len(_frames(same_at_one)) == 1  # batch 1 did not recompile
    evidence = _frames(same_at_one)[0].verishape_log.widened
    assert len(evidence) == 3  # each size alone, and both at 1
    assert all(ev.aot is not None and ev.dynamo and ev.bytecode for ev in evidence)


def test_widening_is_logged_as_a_recheckable_proof():
    _sweep(same_at_one, (2, 1), lambda b: (torch.randn(b, 5),))
    (env,) = _frames(same_at_one)
    records = [r for r in env.verishape_log.records if r.obligation.kind == "specialization_widened"]
    assert len(records) == 2  # each size alone; the trace with both at 1 has no shape guard to prove
    assert all(solvers.recheck(r).status == solvers.PROVED for r in records)
    assert "widened to admit 1" in verishape.explain(same_at_one)


def test_widened_artifact_rejects_what_the_proof_does_not_cover():
    _sweep(same_at_one, (2, 3), lambda b: (torch.randn(b, 5),))
    (entry,) = _debug_get_cache_entry_list(same_at_one.__code__)
    check = entry.guard_manager.check
    assert check({"x": torch.randn(1, 5)})  # proved
    assert check({"x": torch.randn(7, 5)})
    assert not check({"x": torch.randn(0, 5)})  # size 0 was not proved
    # both sizes at 1 (and each alone) were traced and proved: admitted
    assert check({"x": torch.randn(1, 1)}) and check({"x": torch.randn(3, 1)})
    assert not check({"x": torch.randn(1, 0)})
    assert not check({"x": torch.randn(1, 5, dtype=torch.float64)})
    # the size-1 trace saw a contiguous input: other strides at batch 1 are not covered
    assert not check({"x": torch.randn(1, 10)[:, :5]})
    assert not check({"x": torch.randn(5, 1).t()})


def shares_batch(x, y):
    return x * 2 + y.sum(1, keepdim=True)


def test_duck_sized_inputs_are_narrowed_together():
    """x and y share the batch symbol (duck sizing): the size-1 trace sets both to 1."""
    _sweep(shares_batch, (2, 3, 1), lambda b: (torch.randn(b, 4), torch.randn(b, 6)))
    assert _widened_sizes(shares_batch) == {"L['x'].size()[0]", "L['x'].size()[1]", "L['y'].size()[1]"}
    assert len(_frames(shares_batch)) == 1
    (entry,) = _debug_get_cache_entry_list(shares_batch.__code__)
    assert entry.guard_manager.check({"x": torch.randn(1, 4), "y": torch.randn(1, 6)})
    assert not entry.guard_manager.check({"x": torch.randn(1, 4), "y": torch.randn(2, 6)})


def masked(x, m):
    return (x * m).sum(1) + x.view(x.size(0), -1).mean(1)


def test_a_symbol_torch_replaced_is_narrowed_with_the_one_that_replaced_it():
    """Automatic dynamic gives x and m a batch symbol each; ``x * m`` equates them (one
    replaces the other), as input_ids and attention_mask on a Hugging Face model.  Both
    inputs are narrowed to 1 together, batch 1 reuses the graph, and the equality guard
    stays."""
    compiled = verishape.compile(masked, backend="aot_eager", widen_specializations=True)
    for b in (2, 3, 1, 4, 1):
        x, m = torch.randn(b, 8), torch.ones(b, 8)
        torch.testing.assert_close(compiled(x, m), masked(x, m))
    assert len(_widened(masked)) == 1
    assert len(_debug_get_cache_entry_list(masked.__code__)) == 2  # static, then widened dynamic
    dynamic_entry = _debug_get_cache_entry_list(masked.__code__)[0]
    check = dynamic_entry.guard_manager.check
    assert check({"x": torch.randn(1, 8), "m": torch.ones(1, 8)})
    assert not check({"x": torch.randn(1, 8), "m": torch.ones(3, 8)})  # the batches stay equal
    assert not check({"x": torch.randn(0, 8), "m": torch.ones(0, 8)})


def test_sizes_the_size_1_trace_keeps_apart_match_one_generic_symbol():
    """dynamic=True duck-sizes x's and m's columns into one generic symbol; the size-1 trace
    marks them dynamic one by one and gets two symbols.  Finer is fine (the installed
    guards check the generic equality), so the batch is still widened."""
    _sweep(masked, (2, 3, 1), lambda b: (torch.randn(b, 8), torch.ones(b, 8)))
    assert _widened_sizes(masked) == {"L['x'].size()[0]", "L['x'].size()[1]"}
    assert len(_frames(masked)) == 1
    (entry,) = _debug_get_cache_entry_list(masked.__code__)
    assert entry.guard_manager.check({"x": torch.randn(1, 8), "m": torch.ones(1, 8)})
    assert not entry.guard_manager.check({"x": torch.randn(1, 8), "m": torch.ones(1, 9)})


def through_kwargs(**kwargs):
    x = kwargs["x"]
    return x * 2 + x.sum(1, keepdim=True)


def test_an_input_passed_in_kwargs_is_narrowed():
    """A module's forward called as ``model(**inputs)`` names its tensors
    ``L['kwargs']['x']``: they are found and narrowed like locals."""
    compiled = verishape.compile(through_kwargs, backend="aot_eager", dynamic=True, widen_specializations=True)
    for b in (2, 3, 1):
        x = torch.randn(b, 5)
        torch.testing.assert_close(compiled(x=x), through_kwargs(x=x))
    assert _widened_sizes(through_kwargs) == {"L['kwargs']['x'].size()[0]", "L['kwargs']['x'].size()[1]"}
    assert len(_frames(through_kwargs)) == 1


class _DictOutput(torch.nn.Module):
    """Returns an ``OrderedDict`` built in a loop, as Hugging Face model outputs are."""

    def forward(self, **inputs):
        y = inputs["x"] * 2 + inputs["x"].sum(1, keepdim=True)
        out = collections.OrderedDict()
        for name, value in (("a", y), ("b", y + 1)):
            out[name] = value
        return out


def test_a_module_called_directly_is_widened():
    """The code Dynamo generates around the graph names the globals it installs per compile
    (``..._c1``, ``..._c2``) and jumps to absolute offsets that move with the length of the
    argument set-up: neither is a difference between the graphs."""
    module = _DictOutput()
    compiled = verishape.compile(module, backend="aot_eager", widen_specializations=True)
    for b in (2, 3, 1, 4, 1):
        x = torch.randn(b, 5)
        got, want = compiled(x=x), module(x=x)
        assert list(got) == list(want)
        for k in want:
            torch.testing.assert_close(got[k], want[k])
    code = _DictOutput.forward.__code__
    assert [ev.sources[0] for env in frames.envs_for(code) for ev in env.verishape_log.widened] == [
        "L['inputs']['x'].size()[0]"]
    assert len(_debug_get_cache_entry_list(code)) == 2  # static batch 2, widened dynamic


def test_automatic_dynamic_widens_the_second_compile():
    """dynamic=None: static for batch 2, dynamic for batch 3 (widened), batch 1 reuses it."""
    compiled = verishape.compile(same_at_one, backend="aot_eager", widen_specializations=True)
    for b in (2, 3, 1, 4, 1):
        x = torch.randn(b, 5)
        torch.testing.assert_close(compiled(x), same_at_one(x))
    assert _widened(same_at_one) == ["L['x'].size()[0]"]
    assert len(_debug_get_cache_entry_list(same_at_one.__code__)) == 2


def test_training_graph_is_not_widened():
    w = torch.randn(5, requires_grad=True)

    def uses_weight(x):
        return x * w + x.sum(1, keepdim=True)

    _sweep(uses_weight, (2, 3), lambda b: (torch.randn(b, 5),))
    assert _widened(uses_weight) == []
    assert any("training" in why or "no AOTAutograd inference graph" in why for _, why in _refusals(uses_weight))


def test_without_the_flag_nothing_is_widened():
    compiled = verishape.compile(same_at_one, backend="aot_eager", dynamic=True)
    for b in (2, 3, 1):
        compiled(torch.randn(b, 5))
    assert _widened(same_at_one) == []
    assert len(_frames(same_at_one)) == 2  # stock behaviour: batch 1 recompiles


def test_eager_backend_compares_the_dynamo_graph():
    _sweep(same_at_one, (2, 1), lambda b: (torch.randn(b, 5),), backend="eager")
    assert _widened_sizes(same_at_one) == {"L['x'].size()[0]", "L['x'].size()[1]"}
    assert len(_frames(same_at_one)) == 1


def batch_and_mask(x, m):
    # as BERT, DistilBERT, T5, BART: input_ids and attention_mask get a batch symbol each and
    # nothing in the graph equates them
    return x * 2 + x.sum(1, keepdim=True), m.float().mean(1)


def test_independent_batch_symbols_are_widened_together():
    """Two batch symbols no guard relates (automatic dynamic gives each input its own):
    widened one at a time, the second proof assumed the first >= 2 and was refuted, so a
    batch-1 call (both at 1) recompiled.  Each symbol alone and both together are traced
    at 1; all three proved, both ranges are widened and batch 1 reuses the graph."""
    compiled = verishape.compile(batch_and_mask, backend="aot_eager", widen_specializations=True)
    for b in (2, 3, 1, 4, 1):
        x, m = torch.randn(b, 5), torch.ones(b, 7)
        for got, want in zip(compiled(x, m), batch_and_mask(x, m)):
            torch.testing.assert_close(got, want)
    assert sorted(set(_widened(batch_and_mask))) == ["L['m'].size()[0]", "L['x'].size()[0]"], _refusals(batch_and_mask)
    entries = _debug_get_cache_entry_list(batch_and_mask.__code__)
    assert len(entries) == 2  # static batch 2, widened dynamic
    check = entries[0].guard_manager.check
    for bx, bm in ((1, 1), (1, 3), (3, 1), (4, 4)):
        assert check({"x": torch.randn(bx, 5), "m": torch.ones(bm, 7)}), (bx, bm)
    assert not check({"x": torch.randn(0, 5), "m": torch.ones(1, 7)})
    assert not check({"x": torch.randn(1, 5), "m": torch.ones(0, 7)})


def squeeze_second(x, m):
    return x * 2 + x.sum(1, keepdim=True), m.squeeze(0).float()


def test_only_the_symbols_whose_subsets_are_all_proved_are_widened():
    """m's graph differs at 1 (a squeeze): x alone is widened (its proof holds with m >= 2),
    m is refused, and a call with both at 1 still recompiles."""
    compiled = verishape.compile(squeeze_second, backend="aot_eager", widen_specializations=True)
    for b in (2, 3, 1):
        x, m = torch.randn(b, 5), torch.ones(b, 7)
        for got, want in zip(compiled(x, m), squeeze_second(x, m)):
            torch.testing.assert_close(got, want)
    assert _widened(squeeze_second) == ["L['x'].size()[0]"]
    assert "differs" in dict(_refusals(squeeze_second))["L['m'].size()[0]"]
    entries = _debug_get_cache_entry_list(squeeze_second.__code__)
    assert len(entries) == 3  # batch 1 recompiled, as stock does
    check = entries[1].guard_manager.check
    assert check({"x": torch.randn(1, 5), "m": torch.ones(3, 7)})
    assert not check({"x": torch.randn(1, 5), "m": torch.ones(1, 7)})


def indexes_with_ellipsis(x):
    return x[..., :2] * 2 + x.sum(1, keepdim=True)


def test_an_ellipsis_index_is_compared_as_a_constant():
    """LLaMA's rotary embedding indexes with ``x[..., :n]``: the Dynamo graph's getitem has
    an ``Ellipsis`` argument, a constant like ``None``."""
    _sweep(indexes_with_ellipsis, (2, 3, 1), lambda b: (torch.randn(b, 4),))
    assert _widened(indexes_with_ellipsis) == ["L['x'].size()[0]"], _refusals(indexes_with_ellipsis)
    assert len(_frames(indexes_with_ellipsis)) == 1


def shift_right(ids):
    # BART's shift_tokens_right: the clone of a column slice is contiguous, (s, 7) with
    # strides (7, 1), for s >= 2; at batch 1 the slice counts as dense and the clone keeps
    # its strides (8, 1); a stride of a size-1 dimension addresses nothing
    shifted = ids.new_zeros(ids.shape)
    shifted[:, 1:] = ids[:, :-1].clone()
    shifted[:, 0] = 2
    return shifted * 3


def test_a_stride_of_a_size_1_dimension_is_not_a_difference():
    compiled = verishape.compile(shift_right, backend="aot_eager", widen_specializations=True)
    for b in (2, 3, 1, 4, 1):
        ids = torch.randint(0, 100, (b, 8))
        torch.testing.assert_close(compiled(ids), shift_right(ids))
    assert _widened_sizes(shift_right) == {"L['ids'].size()[0]"}, _refusals(shift_right)
    assert len(_debug_get_cache_entry_list(shift_right.__code__)) == 2  # static batch 2, widened dynamic


def test_canonical_keeps_the_strides_of_graph_outputs():
    """Intermediates compare their strides on dimensions of size > 1 only; a graph output
    (the caller sees its strides) and an input compare all of them."""
    c = canon.Canonicalizer(lambda s: s)
    loose = c.tensor_meta(torch.empty_strided((1, 7), (8, 1)), [], loose=True)
    assert loose == c.tensor_meta(torch.empty((1, 7)), [], loose=True)
    assert c.tensor_meta(torch.empty_strided((1, 7), (8, 1)), []) != c.tensor_meta(torch.empty((1, 7)), [])
    assert (c.tensor_meta(torch.empty_strided((2, 7), (8, 1)), [], loose=True)
            != c.tensor_meta(torch.empty((2, 7)), [], loose=True))


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


# ---------------------------------------------------------------------------- different at size 1: not widened


def squeezes(x):
    return x.squeeze(0) * 2


def branches_on_size(x):
    if x.size(0) == 1:  # statically False for s >= 2: no guard, the size-1 trace takes the other path
        return x * 3
    return x * 2


def size_constant_escapes(x):
    return x * 2, x.size(0) > 1  # same graph; the returned constant differs at 1


@pytest.mark.parametrize("fn, reason", [
    (squeezes, "Dynamo graph at size 1 differs"),
    (branches_on_size, "Dynamo graph at size 1 differs"),
    (size_constant_escapes, ("code Dynamo generated", "Dynamo graph at size 1 differs")),
])
def test_different_graph_is_not_widened(fn, reason):
    _sweep(fn, (2, 3, 1), lambda b: (torch.randn(b, 4),))
    assert "L['x'].size()[0]" not in _widened(fn)
    assert len(_frames(fn)) == 2  # batch 1 recompiled, as stock does
    refusals = dict(_refusals(fn))
    reasons = reason if isinstance(reason, tuple) else (reason,)
    assert any(r in refusals["L['x'].size()[0]"] for r in reasons), refusals


def test_unknown_solver_answer_means_no_widening():
    class Unknown(solvers.Prover):
        def prove(self, goal, assumptions=(), **kw):
            return solvers.SolveResult("unknown", reason="injected")

    with use_prover(Unknown()):
        _sweep(same_at_one, (2, 1), lambda b: (torch.randn(b, 5),))
    first = _frames(same_at_one)[0].verishape_log
    assert first.widened == [] and len(first.not_widened) == 3  # each size alone, and both at 1
    assert "L['x'].size()[0]" not in _widened_sizes(same_at_one)
    assert len(_frames(same_at_one)) == 2


# ---------------------------------------------------------------------------- canonical form


def test_canonical_folds_size_nodes_and_substitutes():
    """``x.view(x.size(0), -1)`` at batch s and at batch 1 compare equal once the size
    node is folded and s := 1; with s := 2 they do not."""
    graphs = {}

    def capture(name):
        def backend(gm, example_inputs):
            graphs[name] = (gm, torch._dynamo.symbolic_convert.InstructionTranslator.current_tx().output.shape_env)
            return gm.forward
        return backend

    def f(x):
        return x.view(x.size(0), -1) + 1

    torch.compile(f, backend=capture("generic"), dynamic=True)(torch.randn(3, 2, 2))
    torch._dynamo.reset()
    torch.compile(f, backend=capture("one"), dynamic=True)(torch.randn(1, 2, 2))
    gm, env = graphs["generic"]
    (s,) = [s for s, src in env.var_to_sources.items() if src[0].name == "L['x'].size()[0]"]
    gm1, env1 = graphs["one"]
    one = canon.canonical(gm1, widen._nested_rename(env1, widen._generic_names(env, s)))
    assert canon.canonical(gm, widen._generic_rename(env, s, 1)) == one
    assert canon.canonical(gm, widen._generic_rename(env, s, 2)) != one
    assert any(e[0] == "placeholder" for e in one.entries)
    assert not any(isinstance(e[-1], tuple) and e[-1] and e[-1][0] != "tensor" for e in one.entries
                   if e[0] == "placeholder"), "SymInt placeholders are folded"


# ---------------------------------------------------------------------------- a real model


@pytest.mark.slow
def test_tiny_gpt2_batch_sweep_is_widened_and_equal_to_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100)).eval()

    def fwd(ids, mask):
        return model(input_ids=ids, attention_mask=mask).logits

    with torch.no_grad():
        _sweep(fwd, (2, 3, 1, 4, 1, 5),
               lambda b: (torch.randint(0, 100, (b, 7)), torch.ones(b, 7, dtype=torch.long)))
    # the two inputs share the batch: whichever names it, the batch size is widened
    assert any(name in _widened(fwd) for name in ("L['ids'].size()[0]", "L['mask'].size()[0]"))
    assert sum(len(env.verishape_log.widened) for env in _frames(fwd)) == 1
    # batch 1 reused the dynamic graph: the only frames are the dynamic compile (and a
    # restarted analysis of it, which Dynamo counts as a frame of its own)
    assert not any("size()[0]" in r for r in verishape.explain(fwd).splitlines() if "recompiled" in r)


def _attention_graph(q_len: int, k_len: int, causal: bool, aten: bool) -> torch.fx.GraphModule:
    """An attention call traced with meta values: Dynamo-style (``torch._C._nn`` function,
    ``is_causal`` keyword) or ATen-style (the CPU flash overload, flags positional)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def dynamo_style(q, k):
        return torch.nn.functional.scaled_dot_product_attention(q, k, k, is_causal=causal)

    def aten_style(q, k):
        if causal:
            return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, k, 0.0, True)[0]
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, k)[0]

    q, k = torch.randn(2, 1, q_len, 4), torch.randn(2, 1, k_len, 4)
    if aten:
        return make_fx(aten_style)(q, k)
    gm = torch.fx.symbolic_trace(dynamo_style)
    for node, value in zip(gm.graph.find_nodes(op="placeholder"), (q, k)):
        node.meta["val"] = value
    return gm


@pytest.mark.parametrize("aten", [False, True], ids=["dynamo", "aot"])
def test_is_causal_is_moot_only_for_one_query_and_one_key(aten):
    """BART's decoder passes ``is_causal=q_len > 1``; at one query and one key the flag
    masks nothing, so the graphs compare equal.  With three keys the causal mask keeps only
    the first, a different computation: the graphs still differ (and so do the results)."""
    c = canon.Canonicalizer(lambda s: s)
    one = c.graph(_attention_graph(1, 1, True, aten)), c.graph(_attention_graph(1, 1, False, aten))
    assert one[0].entries == one[1].entries
    three = c.graph(_attention_graph(1, 3, True, aten)), c.graph(_attention_graph(1, 3, False, aten))
    assert three[0].entries != three[1].entries
    q, k = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 3, 4)
    f = torch.nn.functional.scaled_dot_product_attention
    torch.testing.assert_close(f(q, q, q, is_causal=True), f(q, q, q, is_causal=False))
    assert not torch.allclose(f(q, k, k, is_causal=True), f(q, k, k, is_causal=False))
