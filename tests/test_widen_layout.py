"""An input's layout, widened (issue 38): a call whose tensors have the generic trace's sizes
and other strides runs the generic artifact on copies in the layout it was compiled for,
when proved (:mod:`verishape.compiler.widen.layout`); and a cache entry that runs a kept
artifact is not counted against Dynamo's recompile limit (:mod:`verishape.compiler.widen.limit`).

The programs are a served decoder's step in small: the KV cache arrives transposed (the
prefill's projection, viewed per head) on the first step and contiguous (``torch.cat``'s
result) on the next ones.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import counters

import verishape
from verishape.compiler import frames
from verishape.compiler.widen import layout
from verishape.compiler.widen.canon import Canonicalizer, NotWidened


pytestmark = pytest.mark.usefixtures("fresh_frames")


def transposed(b: int, length: int, heads: int = 2, dim: int = 4) -> torch.Tensor:
    """(b, heads, length, dim), laid out as (b, length, heads, dim): a projection viewed per
    head, as a compiled prefill returns it (its own storage, not a view of another input)."""
    return torch.empty_permuted((b, heads, length, dim), (0, 2, 1, 3)).normal_()


def contiguous(b: int, length: int, heads: int = 2, dim: int = 4) -> torch.Tensor:
    return torch.randn(b, heads, length, dim)


def step(cache, new, q):
    keys = torch.cat([cache, new], dim=-2)
    scores = (q @ keys.transpose(-1, -2)).softmax(-1)
    return scores @ keys, keys


def _run(fn, calls, backend="aot_eager", **kw):
    compiled = verishape.compile(fn, backend=backend, dynamic=None, widen_specializations=True, **kw)
    for args in calls:
        got, want = compiled(*args), fn(*args)
        torch.testing.assert_close(got, want)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.stride() == w.stride(), "the output's layout is eager's"
    return compiled


def _log(fn):
    envs = frames.envs_for(fn.__code__)
    return ([ev for e in envs for ev in e.verishape_log.widened],
            [r for e in envs for r in e.verishape_log.not_widened])


def _decode_calls(b=3, length=6):
    """Automatic dynamic shapes, as users run: a static compile, a generic one (the sizes
    changed), then the generic sizes in the other layout."""
    def new(n):
        return torch.randn(n, 2, 1, 4)
    return [(transposed(2, 5), new(2), new(2)), (transposed(b, length), new(b), new(b)),
            (contiguous(b, length), new(b), new(b))]


def test_a_cache_in_another_layout_runs_the_generic_artifact(monkeypatch):
    from verishape.compiler.widen import reuse

    traced = []
    monkeypatch.setattr(reuse, "_aot_inference_graph", lambda *a, **k: traced.append(a))
    _run(step, _decode_calls())
    widened, refused = _log(step)
    assert refused == []
    (ev,) = widened
    assert ev.value is None and ev.restrided == ("L['cache']",)
    assert "widened to admit its layout" in ev.describe()
    assert counters["verishape"]["reused_relaid"] == 1 and counters["verishape"]["reused_at_size_1"] == 0
    assert len(_debug_get_cache_entry_list(step.__code__)) == 3
    # Note [A copy into the generic layout needs no AOT trace]: the artifact runs on a copy in
    # its own layout, so the call's AOT graph is neither traced nor compared
    assert traced == [] and ev.aot is None and counters["verishape"]["aot_trace_not_needed"] == 1
    assert "AOT graph not traced: the artifact runs on copies in its own layout" in ev.describe()


def test_the_reuse_serves_other_sizes_in_that_layout():
    compiled = _run(step, _decode_calls())
    for b, length in ((4, 7), (2, 9)):
        args = (contiguous(b, length), torch.randn(b, 2, 1, 4), torch.randn(b, 2, 1, 4))
        torch.testing.assert_close(compiled(*args), step(*args))
    assert counters["verishape"]["reused_relaid"] == 1  # the entry's own guards admit them
    assert counters["stats"]["unique_graphs"] == 3


def test_a_cache_that_outgrows_the_pay_back_line_misses_the_reuse_and_compiles():
    """The reuse entry checks the copy's pay-back line (a bound on the bytes copied, in the
    cache's sizes): a decoder's cache grows step by step, and past the line the call compiles
    as stock instead of copying on every step."""
    compiled = _run(step, _decode_calls())
    assert counters["verishape"]["reused_relaid"] == 1
    b, length = 3, 200_000  # 19 MiB a call: past any line a compile of this step sets
    args = (contiguous(b, length), torch.randn(b, 2, 1, 4), torch.randn(b, 2, 1, 4))
    torch.testing.assert_close(compiled(*args), step(*args))
    assert counters["verishape"]["reused_relaid"] == 1
    assert counters["stats"]["unique_graphs"] == 4
    _, refused = _log(step)
    assert any("would cost more over 1000 calls" in reason for _, reason in refused), refused


def writes_cache(cache, new):
    cache.mul_(2)
    return cache.sum(-1) + new.sum(-1)


def returns_a_view(cache, new):
    return cache[:, :, 1:], new * 2


def returns_the_input(cache, new):
    return cache, new + 1


@pytest.mark.parametrize("fn, why", [(writes_cache, "writes to input"),
                                     (returns_a_view, "sharing input"),
                                     (returns_the_input, "not an argument of the graph")])
def test_an_input_the_caller_could_observe_through_is_not_copied(fn, why):
    compiled = verishape.compile(fn, backend="aot_eager", dynamic=None, widen_specializations=True)
    for cache in (transposed(2, 5), transposed(3, 6), contiguous(3, 6)):
        new = torch.randn(cache.shape[0], 2, 1, 4)
        mine, theirs = cache.clone(), cache.clone()
        torch.testing.assert_close(compiled(mine, new), fn(theirs, new))
        torch.testing.assert_close(mine, theirs)
    widened, refused = _log(fn)
    assert widened == [] and counters["verishape"]["reused"] == 0
    assert any(why in reason for _, reason in refused), refused


def reads_storage(x):
    return x.as_strided((x.shape[0], 4), (1, 1)) * 2  # storage positions: another layout, other values


def test_a_graph_that_reads_its_inputs_layout_is_not_run_on_a_copy():
    compiled = verishape.compile(reads_storage, backend="aot_eager", dynamic=None, widen_specializations=True)
    for x in (transposed(2, 5), transposed(3, 6), contiguous(3, 6)):
        torch.testing.assert_close(compiled(x), reads_storage(x))
    widened, refused = _log(reads_storage)
    assert widened == [] and counters["verishape"]["reused"] == 0
    assert any("reads its input's layout" in reason or "differs" in reason for _, reason in refused), refused


def contiguous_first(x):
    return x.contiguous().view(x.shape[0], -1) * 2


def test_a_program_that_relayouts_its_input_differs_by_its_graph():
    compiled = verishape.compile(contiguous_first, backend="aot_eager", dynamic=None, widen_specializations=True)
    for x in (transposed(2, 5), transposed(3, 6), contiguous(3, 6)):
        torch.testing.assert_close(compiled(x), contiguous_first(x))
    widened, refused = _log(contiguous_first)
    # a view of a contiguous input where the transposed one needs a copy: told apart, or
    # (when the graphs say the same values) run on a copy, equal to eager either way
    assert len(widened) + len(refused) == 1


def _limit_calls():
    """Three compiles and a layout reuse, the reuse third."""
    calls = _decode_calls()
    return calls + [tuple(t.double() for t in calls[1])]


def test_a_reuse_entry_does_not_count_against_the_recompile_limit():
    compiled = verishape.compile(step, backend="aot_eager", dynamic=None, widen_specializations=True)
    with torch._dynamo.config.patch(recompile_limit=3):
        for args in _limit_calls():
            torch.testing.assert_close(compiled(*args), step(*args))
    assert counters["verishape"]["reused_relaid"] == 1
    assert counters["stats"]["unique_graphs"] == 4  # stock stops at 3 and runs the last call eagerly
    assert len(_debug_get_cache_entry_list(step.__code__)) == 4


def test_stock_counts_every_entry_against_the_limit():
    compiled = torch.compile(step, backend="aot_eager", dynamic=None)
    with torch._dynamo.config.patch(recompile_limit=3):
        for args in _limit_calls():
            torch.testing.assert_close(compiled(*args), step(*args))
    assert counters["stats"]["unique_graphs"] == 3


# ---------------------------------------------------------------------------- the pieces


def _plain(t: torch.Tensor) -> tuple[int, ...]:
    return layout.dense_order(t, Canonicalizer(lambda s: s), {})


def test_dense_order_reads_the_order_of_a_permuted_layout():
    assert _plain(torch.randn(2, 3, 4)) == (0, 1, 2)
    assert _plain(torch.randn(2, 4, 3).transpose(1, 2)) == (0, 2, 1)
    assert _plain(torch.randn(4, 3, 2).permute(2, 0, 1)) == (1, 2, 0)
    x = torch.randn(2, 4, 3).transpose(1, 2)
    again = layout.to_layout(x.contiguous(), _plain(x))
    assert again.stride() == x.stride() and torch.equal(again, x)


@pytest.mark.parametrize("t", [torch.randn(2, 6)[:, 1:], torch.randn(2, 1).expand(2, 5), torch.randn(4, 6)[::2]],
                         ids=["offset", "broadcast", "step"])
def test_dense_order_refuses_what_is_not_dense(t):
    with pytest.raises(NotWidened):
        _plain(t)


def test_differing_names_only_layout_differences():
    a = {"x": ("tensor", (2, 3), (3, 1), 0), "n": "int", "t": (2, 3, 4, 5)}
    assert layout.differing(a, {**a, "x": ("tensor", (2, 3), (1, 2), 0)}) == ["x"]
    assert layout.differing(a, dict(a)) == []
    with pytest.raises(NotWidened):
        layout.differing(a, {**a, "x": ("tensor", (2, 4), (4, 1), 0)})
    with pytest.raises(NotWidened):
        layout.differing(a, {"x": ("tensor", (2, 3), (3, 1), 0), "n": "int"})
    with pytest.raises(NotWidened):  # a tuple of sizes is not a tensor, whatever its length
        layout.differing(a, {**a, "t": (2, 3, 9, 9)})


def test_a_copy_that_outgrows_the_compile_it_saves_is_refused():
    small = torch.empty(2, 8, 16, 4, device="meta")  # 4 KiB per call
    big = torch.empty(64, 8, 4096, 64, device="meta")  # 512 MiB per call (costed at the CPU rate)
    layout.pays_back([small], compile_s=0.5)  # a thousand copies cost about 2 ms: reuse
    with pytest.raises(NotWidened, match="would cost more over 1000 calls"):
        layout.pays_back([big], compile_s=30.0)


@pytest.mark.slow
def test_inductor_kernels_run_on_the_copy_equal_to_eager():
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):  # compiled here, not read from disk
        compiled = _run(step, _decode_calls() + _decode_calls(4, 9)[2:], backend="inductor")
        # past any bound Inductor guarded the generic compile with (carried into the
        # reuse entry's guards): that entry misses, and the call still equals eager
        _run(step, _decode_calls(2, 4100)[2:], backend="inductor")
    assert compiled is not None
    assert counters["verishape"]["reused_relaid"] == 1
    assert counters["stats"]["unique_graphs"] == 4  # the last call compiled (or it ran within the bound)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_reuse_through_a_layout_copy_gives_eager_strides_on_size_one_dimensions_too(backend):
    """Issue 48: an input expanded along the batch (stride 0) is copied into the generic
    layout at batch 1; with the copy's size-1 stride from its dense order, ``aten.mul`` on it
    returned strides (1, 1) for shape (1, 4) under ``aot_eager`` where eager (and stock) give
    (4, 1).  The copy keeps the caller's stride on its size-1 dimensions."""
    def scale(x):
        return x * 2

    base = torch.randn(1, 4)
    compiled = verishape.compile(scale, backend=backend, dynamic=None)
    for n in (3, 4, 1):
        x = base.expand(n, 4)
        got, want = compiled(x), scale(x)
        torch.testing.assert_close(got, want)
        assert got.stride() == want.stride(), (n, got.stride(), want.stride())
    assert counters["verishape"]["reused"] == 1, "batch 1 ran the generic artifact"


def test_a_layout_copy_is_dense_in_the_generic_order_and_keeps_size_one_strides():
    t = torch.randn(1, 4)
    copy = layout.to_layout(t, (1, 0))
    assert copy.stride() == (4, 1) and torch.equal(copy, t)  # the size-1 dimension keeps the caller's stride
    wide = torch.randn(3, 4)
    assert layout.to_layout(wide, (1, 0)).stride() == (1, 3)  # dense, dimension 1 outermost
    mixed = torch.randn(2, 1, 5).transpose(0, 2)  # (5, 1, 2), strides (1, 5, 5)
    copy = layout.to_layout(mixed, (0, 1, 2))
    assert copy.stride() == (2, 5, 1) and torch.equal(copy, mixed)
