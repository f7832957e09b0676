"""The comparable form widening checks a size-1 trace in (``compiler/widen/canon.py``, the graph
snapshots of ``compiler/widen/snapshot.py``) and the pieces of ``compiler/widen/reuse.py`` it rests on:
size nodes folded and substituted, ``is_causal`` moot only where it is, intermediates by
value, the storages a graph writes, the size-1 trace's decompositions.  Unit tests on small
graphs; the end-to-end sweeps are in ``tests/test_widen.py``."""

from __future__ import annotations

import functools

import pytest
import torch

from verishape.compiler.widen import canon, effects, snapshot, reuse as widen


def _capture(graphs, name):
    """A backend that files Dynamo's graph and its env under ``name`` and runs the graph as it is."""
    def backend(gm, example_inputs):
        graphs[name] = (gm, torch._dynamo.symbolic_convert.InstructionTranslator.current_tx().output.shape_env)
        return gm.forward
    return backend


def test_canonical_folds_size_nodes_and_substitutes():
    """``x.view(x.size(0), -1)`` at batch s and at batch 1 compare equal once the size
    node is folded and s := 1; with s := 2 they do not."""
    graphs = {}
    capture = functools.partial(_capture, graphs)

    def f(x):
        return x.view(x.size(0), -1) + 1

    torch.compile(f, backend=capture("generic"), dynamic=True)(torch.randn(3, 2, 2))
    torch._dynamo.reset()
    torch.compile(f, backend=capture("one"), dynamic=True)(torch.randn(1, 2, 2))
    gm, env = graphs["generic"]
    (s,) = [s for s, src in env.var_to_sources.items() if src[0].name == "L['x'].size()[0]"]
    gm1, env1 = graphs["one"]
    import dataclasses

    from verishape.compiler.widen import binding

    b = binding.bind(env, (s,), env1, lambda src: None)
    one = canon.canonical(gm1, b.nested_rename(env1))
    assert canon.canonical(gm, b.generic_rename(env)) == one
    assert canon.canonical(gm, dataclasses.replace(b, value=2).generic_rename(env)) != one
    assert any(e[0] == "placeholder" for e in one.entries)
    assert not any(isinstance(e[-1], tuple) and e[-1] and e[-1][0] != "tensor" for e in one.entries
                   if e[0] == "placeholder"), "SymInt placeholders are folded"


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


def test_a_snapshot_reads_as_the_graph_it_was_taken_from():
    """What a kept compile stores instead of a graph copy: the same canonical form, and it
    stays so after the graph is rewritten in place (as a backend's passes do)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x: torch.cat([x.t().contiguous(), x[:1].expand(4, -1)], 0).sum([0]),
                 tracing_mode="symbolic")(torch.randn(4, 4))
    snap = snapshot.Snapshot(gm)
    rename = lambda s: s  # noqa: E731
    before = canon.canonical(gm, rename)
    assert canon.canonical(snap, rename) == before
    assert [n.op for n in snap.graph.find_nodes(op="placeholder")] == ["placeholder"]
    # who uses each node, as FX says (the canonical form's folds read it)
    assert {n.name: [u.name for u in n.users] for n in snap.nodes} == {
        n.name: [u.name for u in n.users] for n in gm.graph.nodes}
    for node in list(gm.graph.nodes):  # rewrite the original: the snapshot does not move
        if node.target is torch.ops.aten.sum.dim_IntList:
            node.target = torch.ops.aten.amax.default
    gm.recompile()
    assert canon.canonical(snap, rename) == before != canon.canonical(gm, rename)


def _aten(fn, *shape):
    """An ATen graph whose values are fake tensors (they keep storage sharing, as Dynamo's
    and AOTAutograd's do)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn, tracing_mode="fake")(torch.randn(*shape))


def test_intermediates_compare_by_value_where_nothing_observes_their_layout():
    """At 1 a reshape of a transposed buffer is a view; the generic graph copies first
    (gemma2, falcon, bloom at batch 1).  By value the two are one reshape: equal when the
    copy's layout cannot be observed (not returned, not written, no op reads a layout)."""
    rename = lambda s: s  # noqa: E731
    copy = _aten(lambda x: x.permute(1, 0, 2).clone(memory_format=torch.contiguous_format).view(4, -1).sum(0),
                 1, 4, 2)
    view = _aten(lambda x: x.permute(1, 0, 2).view(4, -1).sum(0), 1, 4, 2)
    assert canon.canonical(copy, rename) == canon.canonical(view, rename)
    # returned, the reshape's storage is seen (a view of the input, or of a copy): differs
    copy_out = _aten(lambda x: x.permute(1, 0, 2).clone(memory_format=torch.contiguous_format).view(4, -1), 1, 4, 2)
    view_out = _aten(lambda x: x.permute(1, 0, 2).view(4, -1), 1, 4, 2)
    assert canon.canonical(copy_out, rename) != canon.canonical(view_out, rename)
    # an op that reads a layout: intermediates keep their strides, and the graphs differ
    strided = lambda f: _aten(lambda x: torch.as_strided(f(x), (2,), (1,)).sum(), 1, 4, 2)  # noqa: E731
    assert (canon.canonical(strided(lambda x: x.permute(1, 0, 2).clone(memory_format=torch.contiguous_format)
                                    .view(4, -1)), rename)
            != canon.canonical(strided(lambda x: x.permute(1, 0, 2).view(4, -1)), rename))


def test_a_graph_that_writes_elsewhere_still_compares_a_copy_by_value_but_never_one_it_writes():
    """A static cache's decode step writes the cache and reads the attention's values: at 1
    a reshape there is a view where the generic graph copies first (Gemma 2's eager
    attention).  Where the writes miss both the copy and its source, the two graphs are one
    reshape by value; where the graph writes the source (after the read, or between the view
    and its read, where a view sees the write and a copy does not), they differ."""
    from torch.fx.experimental.proxy_tensor import make_fx

    rename = lambda s: s  # noqa: E731

    def two(fn):
        return make_fx(fn, tracing_mode="fake")(torch.randn(1, 4, 2), torch.randn(3))

    def copied(x):
        return x.permute(1, 0, 2).clone(memory_format=torch.contiguous_format).view(4, -1)

    def viewed(x):
        return x.permute(1, 0, 2).view(4, -1)

    def cache_written(reshape):
        return two(lambda x, cache: (cache.add_(1), reshape(x).sum(0))[1])

    assert effects.mutated_storages(cache_written(copied))  # the graph writes (the cache)
    assert canon.canonical(cache_written(copied), rename) == canon.canonical(cache_written(viewed), rename)

    def source_written_after(reshape):
        return two(lambda x, cache: (reshape(x).sum(0), x.add_(1))[0])

    assert canon.canonical(source_written_after(copied), rename) != canon.canonical(source_written_after(viewed), rename)

    def source_written_between(reshape):
        def f(x, cache):
            r = reshape(x)
            x.add_(1)
            return r.sum(0)
        return two(f)

    assert canon.canonical(source_written_between(copied), rename) != canon.canonical(source_written_between(viewed),
                                                                                     rename)


def test_a_snapshot_keeps_what_the_comparison_reads_and_not_the_graph_module():
    """A kept compile lives as long as its cache entry: its snapshot keeps each node's value
    and Dynamo source and the attributes ``get_attr`` names (a constant compares by its
    contents), not the module, whose lowered graph stock frees after the compile."""
    import gc
    import weakref

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.arange(4.0))

        def forward(self, x):
            return x * self.table + 1

    gm = torch.fx.symbolic_trace(Scaled())
    assert gm.graph.find_nodes(op="get_attr"), "the constant is an attribute of the graph"
    for n in gm.graph.nodes:
        n.meta["stack_trace"] = "File x.py, line 1"
    del n  # (an FX node holds its graph, which holds the module)
    rename = lambda s: s  # noqa: E731
    graph, snap = canon.canonical(gm, rename), snapshot.Snapshot(gm)
    assert all(set(n.meta) <= {"val", "example_value", "grapharg"} for n in snap.nodes)
    alive = weakref.ref(gm)
    del gm
    gc.collect()
    assert alive() is None, "the snapshot does not keep its graph module alive"
    assert canon.canonical(snap, rename) == graph


def test_a_value_whose_leading_ones_indexing_dropped_compares_as_the_value_index_put_broadcasts():
    """``y[:, :, i] = v`` with a ``v`` of batch 1: torch's indexing reshapes (1, 2, 1, 4) to
    (2, 1, 4) before ``index_put``, which broadcasts it back; the generic graph passes ``v``
    itself.  The reshape folds into ``v`` only where index_put's values are its one use."""
    from torch.fx.experimental.proxy_tensor import make_fx

    rename = lambda s: s  # noqa: E731
    put = torch.ops.aten.index_put.default

    def traced(fn):
        gm = make_fx(fn, tracing_mode="fake")(torch.randn(1, 2, 5, 4), torch.randn(1, 2, 1, 4), torch.tensor([1]))
        graph = canon.canonical(gm, rename)
        assert canon.canonical(snapshot.Snapshot(gm), rename) == graph  # a kept compile's copy reads the same
        return graph

    generic = traced(lambda y, v, i: put(y, [None, None, i], v) * 2)
    assert traced(lambda y, v, i: put(y, [None, None, i], v.view(2, 1, 4)) * 2) == generic
    # the reshape read elsewhere too: kept
    assert traced(lambda y, v, i: (lambda r: (put(y, [None, None, i], r), r * 3))(v.view(2, 1, 4))) != traced(
        lambda y, v, i: (put(y, [None, None, i], v), v.view(2, 1, 4) * 3))
    # a size-1 dimension dropped that is not leading: kept
    assert traced(lambda y, v, i: put(y, [None, None, i], v.view(1, 2, 4).unsqueeze(2)) * 2) != generic


def test_the_storages_a_graph_writes_are_known_or_it_is_said_they_are_not():
    x = torch.randn(3)
    writes = _aten(lambda t: t.add_(1).sum(), 3)
    (placeholder,) = writes.graph.find_nodes(op="placeholder")
    assert effects.mutated_storages(writes) == {effects.storage_of(placeholder.meta["val"])}
    assert effects.mutated_storages(_aten(lambda t: t.sin().sum(), 3)) == set()
    graph = torch.fx.Graph()
    p = graph.placeholder("x")
    p.meta["val"] = x
    graph.output(graph.call_module("m", (p,)))
    assert effects.mutated_storages(torch.fx.GraphModule({"m": torch.nn.ReLU()}, graph)) is None

    def writes_inside(t):  # Python code kept as one node: what it writes is not known
        t.add_(1)
        return t

    graph = torch.fx.Graph()
    p = graph.placeholder("x")
    p.meta["val"] = x
    graph.output(graph.call_function(writes_inside, (p,)))
    assert effects.mutated_storages(torch.fx.GraphModule(torch.nn.Module(), graph)) is None


def test_the_size_1_trace_keeps_a_matrix_product_its_specialization_would_rewrite():
    """The size-1 comparison trace runs without Inductor's size-1 matrix-product
    specializations (bmm -> multiply and sum when a dimension is 1); every other
    decomposition stays."""
    from torch._inductor.decomposition import select_decomp_table

    table = select_decomp_table()
    kept = widen._without_specializations({"decompositions": table, "keep_inference_input_mutations": True})
    assert kept["keep_inference_input_mutations"] is True
    names = {getattr(getattr(op, "overloadpacket", None), "__name__", None) for op in kept["decompositions"]}
    assert not names & set(widen.SIZE_ONE_SPECIALIZATIONS)
    assert len(kept["decompositions"]) > len(table) - 20 and torch.ops.aten.sspaddmm.default in kept["decompositions"]


def _cond_graphs(branch):
    """Dynamo's graphs of ``torch.cond(x.sum() > 0, branch, cos, (x,))`` generic in the batch (3) and at 1,
    with the generic env and the binding of its batch to 1."""
    from verishape.compiler.widen import binding

    graphs = {}
    capture = functools.partial(_capture, graphs)

    def f(x):
        return torch.cond(x.sum() > 0, branch, lambda t: t.cos() + 1, (x,))

    torch._dynamo.reset()
    torch.compile(f, backend=capture("generic"), dynamic=True)(torch.randn(3, 4))
    torch._dynamo.reset()
    torch.compile(f, backend=capture("one"), dynamic=True)(torch.randn(1, 4))
    torch._dynamo.reset()
    (gm, env), (gm1, env1) = graphs["generic"], graphs["one"]
    (s,) = [s for s, src in env.var_to_sources.items() if src[0].name == "L['x'].size()[0]"]
    return gm, env, gm1, env1, binding.bind(env, (s,), env1, lambda src: None)


def test_a_cond_s_branches_compare_as_graphs_with_the_sizes_dynamo_passes_them():
    """Dynamo passes the true branch the batch it reads (``(x, s0)``) and, at 1, nothing: the size operand is
    compared inside the branch, where it is used, so the graphs are equal at 1 and not at 2; a branch that
    computes something else differs however alike the outer graphs."""
    import dataclasses

    gm, env, gm1, env1, b = _cond_graphs(lambda t: t.sin() * t.shape[0])
    one = canon.canonical(gm1, b.nested_rename(env1))
    assert canon.canonical(gm, b.generic_rename(env)) == one
    assert canon.canonical(snapshot.Snapshot(gm), b.generic_rename(env)) == one
    assert canon.canonical(gm, dataclasses.replace(b, value=2).generic_rename(env)) != one
    gm_other, env_other, *_ = _cond_graphs(lambda t: t.tan() * t.shape[0])
    assert gm_other.code == gm.code  # the outer graphs read alike; the branches do not
    with pytest.raises(widen.NotWidened, match="differs"):
        widen._same_graph(canon.canonical(gm_other, b.generic_rename(env_other)), one, "Dynamo graph")


def test_a_snapshot_keeps_a_branch_as_a_snapshot_and_a_verdict_key_reads_the_branch():
    from verishape.compiler.widen import verdict

    gm, *_ = _cond_graphs(lambda t: t.sin() * t.shape[0])
    gm_other, *_ = _cond_graphs(lambda t: t.tan() * t.shape[0])
    kept = snapshot.Snapshot(gm)
    branches = [n.target for n in kept.nodes if n.op == "get_attr"]
    assert branches and all(isinstance(snapshot.attribute(kept, t), snapshot.Snapshot) for t in branches)
    assert verdict._graph(gm) != verdict._graph(gm_other)  # the outer code alone would read the same


def test_only_a_branch_s_operand_list_loses_its_sizes():
    """``cond``'s operands and ``map_impl``'s extra arguments feed the branch's placeholders one by one; any
    other tuple of a higher-order op (a block mask's sizes) keeps them."""
    assert canon._BRANCH_OPERANDS == {"cond": 3, "map_impl": 2}
    c = canon.Canonicalizer(lambda s: s)
    c._folded = {}
    t = torch.ones(2)
    assert c._without_sizes([1, 2.5, t]) == [t]
    assert c._without_sizes(t) is t
