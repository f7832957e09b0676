"""Declared sizes (issue 50): ``verishape.compile(model, shapes_spec=...)`` compiles generic
in the declared dimensions from the first call, read by the callable's parameter names
through the wrappers Dynamo enters it by, over the declared ranges; a call outside the
declared space compiles as stock would (:mod:`verishape.compiler.declared`)."""

from __future__ import annotations

import functools

import pytest
import torch
from torch._dynamo.utils import counters

pytest.importorskip("torch.fx.experimental.dynamic_spec", reason="shapes_spec is torch 2.13's")
from torch.fx.experimental.dynamic_spec import (DictSpec, IntVar, ObjectSpec, SeqSpec, ShapesSpec,  # noqa: E402
                                                ShapeVar, TensorSpec)

import verishape
from verishape.compiler import declared as declared_sizes
from verishape.compiler import frames
from verishape.core.errors import UsageError

pytestmark = pytest.mark.usefixtures("fresh_frames")


def scale(x, mask):
    return (x * 2 + 1) * mask[..., None]


def _wrapped(fn):
    """A wrapper as Hugging Face's ``forward`` decorators write it (``wrapper(self, *args,
    **kwargs)`` in small): Dynamo compiles the wrapper's frame, whose locals are ``args`` and
    ``kwargs``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def _spec(low=1, high=8):
    b, n = ShapeVar("batch", min=low, max=high), ShapeVar("length", min=1, max=64)
    return {"x": TensorSpec([b, n, None]), "mask": TensorSpec([b, n])}


def _run(compiled, calls, fn=scale, by_keyword=False):
    """Call ``compiled`` at each (batch, length); returns the compiles each call added."""
    def compiles():  # a candidate's compile is not Dynamo's graph (it ends in a restart): counted apart
        return counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] + counters["verishape"]["candidates"]

    added = []
    for b, n in calls:
        x, mask = torch.randn(b, n, 4), torch.ones(b, n)
        before = compiles()
        got = compiled(x=x, mask=mask) if by_keyword else compiled(x, mask)
        torch.testing.assert_close(got, fn(x, mask))
        added.append(compiles() - before)
    return added


def _ranges(fn):
    return [{str(s): (int(vr.lower), vr.upper) for s, vr in e.var_to_range.items()} for e in frames.envs_for(fn.__code__)]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_first_compile_is_generic_over_the_declared_ranges(backend):
    """Stock's automatic dynamic compiles (4, 8) static and (6, 3) again; declared, one
    compile serves every call inside the space, its symbols ranging over the declared
    bounds (their guards check them)."""
    compiled = verishape.compile(scale, backend=backend, shapes_spec=_spec())
    assert _run(compiled, [(4, 8), (6, 3), (8, 64), (2, 2)]) == [1, 0, 0, 0]
    (ranges,) = _ranges(scale)
    assert sorted(ranges.values()) == [(2, 8), (2, 8), (2, 64), (2, 64)]


def test_a_call_outside_the_declared_space_compiles_as_stock():
    compiled = verishape.compile(scale, backend="aot_eager", shapes_spec=_spec(high=8))
    assert _run(compiled, [(4, 8), (9, 8), (4, 65), (5, 9)]) == [1, 1, 1, 0]
    # the calls outside were compiled as stock's automatic dynamic would: no declared range
    assert all(hi != 8 for r in _ranges(scale)[1:2] for (lo, hi) in r.values())


def test_size_one_inside_the_space_is_served_by_widening():
    """A declared size at 1 is specialized as stock specializes it, and the widening proof
    runs the generic artifact there: no second compile."""
    compiled = verishape.compile(scale, backend="aot_eager", shapes_spec=_spec())
    assert _run(compiled, [(3, 5), (1, 5), (1, 1), (4, 1)]) == [1, 0, 0, 0]
    assert counters["verishape"]["reused_at_size_1"] == 3


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_first_call_at_batch_1_compiles_once_at_2(backend):
    """Note [A declared size at 1 is compiled at 2]: the first call is at batch 1, with
    nothing generic kept; the frame is compiled as a call at 2 would compile it (a candidate,
    never run), and every call inside the space, batch 1 included, is served from that one
    compile by proofs (stock: a static compile at 1, then a generic one)."""
    compiled = verishape.compile(scale, backend=backend, shapes_spec=_spec())
    x = torch.randn(1, 5, 4)
    assert _run(compiled, [(1, 5), (3, 5), (1, 7), (5, 9), (2, 2), (1, 5)]) == [1, 0, 0, 0, 0, 0]
    assert counters["verishape"]["candidates"] == 1 and counters["verishape"]["reused_at_size_1"] >= 1
    # the hint Dynamo was given for the attempt at 2 is the user's tensor's no more
    compiled(x, torch.ones(1, 5))
    assert not hasattr(x, "_dynamo_hint_overrides")
    text = verishape.explain(scale)
    assert "a candidate traced at 2 for declared sizes at 1" in text


def test_a_first_call_at_1_traces_twice_not_three_times():
    """Nothing is kept yet, so no stock trace at 1 is made only to be refused: the first
    attempt is the one at 2 (the leading variable read off the call's locals), then stock's
    trace at 1, proved.  Dynamo captures the program's ops once per trace."""
    def traced(b):
        torch._dynamo.reset()
        counters.clear()
        compiled = verishape.compile(scale, backend="aot_eager", shapes_spec=_spec())
        compiled(torch.randn(b, 5, 4), torch.ones(b, 5))
        return counters["stats"]["calls_captured"], counters["verishape"]["candidates"]

    once, none = traced(3)
    twice, one = traced(1)
    assert (none, one) == (0, 1) and twice == 2 * once


def stepped(x, mask, cache=None):
    """A prefill without a cache, then steps with one (another program: other inputs)."""
    out = (x * 2 + 1) * mask[..., None]
    return out if cache is None else out + cache.sum(1, keepdim=True)


def test_a_first_call_at_1_with_other_inputs_traces_twice_not_three_times():
    """Something is kept (the prefill's compile, at batch 2), but it took other tensors
    than this step at batch 1, which brings a cache: nothing kept can serve it, so its
    first attempt is the one at 2, not a stock trace at 1 refused first.  Outputs equal
    eager's.  Dynamo captures the step's ops once per trace (the step at 3: one trace)."""
    spec = {**_spec(), "cache": TensorSpec([ShapeVar("batch", min=1, max=8), None, None])}
    compiled = verishape.compile(stepped, backend="aot_eager", shapes_spec=spec)
    captured = []
    for b, cache in ((2, False), (1, True), (3, True)):
        args = (torch.randn(b, 5, 4), torch.ones(b, 5), torch.randn(b, 3, 4) if cache else None)
        before = counters["stats"]["calls_captured"]
        torch.testing.assert_close(compiled(*args), stepped(*args))
        captured.append(counters["stats"]["calls_captured"] - before)
    _, step_at_one, step_at_three = captured
    assert counters["verishape"]["candidates"] == 1 and counters["verishape"]["reused_at_size_1"] == 1
    assert step_at_one == 2 * step_at_three  # the step traced twice (at 2, then stock's at 1), not three times


def masked_steps(x, mask, cache=None):
    """A prefill with the declared 2-d mask; steps with a cache and a dict of 4-d masks
    instead (Qwen2's static cache in ``generate()``)."""
    if cache is None:
        return (x * 2 + 1) * mask[..., None]
    return (x * 2 + 1) * mask["full"][:, 0, -1, :].sum(-1)[:, None, None] + cache.sum(1, keepdim=True)


@pytest.mark.parametrize("broadcast", [False, True])
def test_a_dict_of_masks_where_one_is_declared_carries_the_batch_at_2(broadcast):
    """A step's first call at batch 1 is traced at 2; the masks it passes as a dict where the
    spec declares one tensor carry the batch in their outer dimension too, so the steps at 3,
    2 and 4 are served by that compile (before: the masks' batch stayed 1 in it, and the step
    at 3 compiled again).  Where the guess is wrong (masks of batch 1 broadcast over every
    batch) it costs the compile it was meant to save, never an answer: outputs equal eager's."""
    b = ShapeVar("batch", min=1, max=8)
    spec = {"x": TensorSpec([b, ShapeVar("length", min=1, max=64), None]),
            "mask": TensorSpec([b, ShapeVar("cache", min=1, max=64)]), "cache": TensorSpec([b, None, None])}
    compiled = verishape.compile(masked_steps, backend="aot_eager", shapes_spec=spec)

    def compiles():
        return counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] + counters["verishape"]["candidates"]

    added = []
    for batch, step in ((1, False), (1, True), (3, True), (2, True), (1, True), (4, True)):
        n = 1 if step else 6
        mask = {"full": torch.rand(1 if broadcast else batch, 1, n, 7)} if step else torch.ones(batch, n)
        args = (torch.randn(batch, n, 4), mask, torch.randn(batch, 6, 4) if step else None)
        before = compiles()
        torch.testing.assert_close(compiled(*args), masked_steps(*args))
        added.append(compiles() - before)
    assert added == ([1, 1, 1, 0, 0, 0] if broadcast else [1, 1, 0, 0, 0, 0])


class _Window:
    def __init__(self, width):
        self.width = width


def windowed(x, cache, window):
    keep = x[:, -window.width:] if x.shape[1] > window.width else x
    return keep * 2 + cache.sum(1, keepdim=True)


def test_an_int_the_new_trace_specializes_binds_the_kept_symbol():
    """The attempt at 2 gives an int attribute of an argument a symbol (a sliding window:
    generic recompiles' int policy); stock's trace at 1 specializes it, guarded equal to its
    value.  That value binds the kept symbol as a size the new trace has as a constant (its
    equality guard checks the exact type, so it covers the generic trace's type check): the
    first call compiles once, the batch-3 call reuses (before: 2 and 1 compiles).  Other
    widths at 1 are proved against the same compile; a width that takes the other branch
    compiles; every output equals eager's."""
    b = ShapeVar("batch", min=1, max=8)
    spec = {"x": TensorSpec([b, None, None]), "cache": TensorSpec([b, None, None])}
    compiled = verishape.compile(windowed, backend="aot_eager", shapes_spec=spec)

    def compiles():
        return counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] + counters["verishape"]["candidates"]

    added = []
    for batch, width in ((1, 4), (3, 4), (1, 4), (1, 2), (2, 2), (1, 6), (1, 7), (3, 5), (1, 4)):
        args = (torch.randn(batch, 6, 3), torch.randn(batch, 5, 3), _Window(width))
        before = compiles()
        torch.testing.assert_close(compiled(*args), windowed(*args))
        added.append(compiles() - before)
    assert added == [1, 0, 0, 0, 0, 1, 0, 0, 0]


def test_only_a_leading_variable_at_1_is_compiled_at_2():
    """A length at 1 is left to stock's specialization (a decode step is another program
    than a prefill: a candidate at 2 would be thrown away); the batch, the outer dimension of
    every tensor declared with it, is the leading variable."""
    assert declared_sizes.parse(_spec(), scale).leading() == frozenset({"batch"})
    b = ShapeVar("batch", min=1, max=8)
    assert declared_sizes.parse({"x": TensorSpec([None, b, None]), "mask": TensorSpec([b, None])},
                                scale).leading() == frozenset()
    compiled = verishape.compile(scale, backend="aot_eager", shapes_spec=_spec())
    assert _run(compiled, [(3, 1), (3, 4)]) == [1, 1]
    assert counters["verishape"]["candidates"] == 0


@pytest.mark.parametrize("by_keyword", [False, True])
def test_a_wrapped_forward_reads_the_spec_by_parameter_name(by_keyword):
    """Dynamo compiles ``wrapper(*args, **kwargs)``: the spec by parameter name reaches
    ``args[i]`` and ``kwargs[name]`` (torch's own reading matches neither: one compile per
    call under ``torch.compile(shapes_spec=...)``)."""
    wrapper = _wrapped(scale)
    compiled = verishape.compile(wrapper, backend="aot_eager", shapes_spec=_spec())
    assert _run(compiled, [(2, 12), (3, 17), (5, 9)], by_keyword=by_keyword) == [1, 0, 0]


def test_one_variable_is_one_size_and_assumptions_are_guards():
    """Two dimensions declared with one variable are guarded equal; an assumption over the
    variables is a guard of the compile, so a call that breaks it compiles again."""
    b, n = ShapeVar("batch", min=1, max=8), ShapeVar("length", min=1, max=64)
    spec = ShapesSpec({"x": TensorSpec([b, n, None]), "mask": TensorSpec([b, n])}, assumptions=[b * n <= 32])

    def loose(x, mask):  # nothing in the program equates the two batches
        return x.sum() + mask.sum()

    compiled = verishape.compile(loose, backend="aot_eager", shapes_spec=spec)
    assert _run(compiled, [(4, 8), (2, 16), (8, 4)], fn=loose) == [1, 0, 0]
    assert _run(compiled, [(8, 8)], fn=loose) == [1]  # b * n = 64 > 32: outside the declared space
    (env, *_) = frames.envs_for(loose.__code__)
    guards = [str(g.expr) for g in env.guards]
    assert any("<= 32" in g for g in guards), guards
    x, mask = torch.randn(3, 4, 4), torch.ones(2, 4)  # batches that differ: not the declared space
    before = counters["stats"]["unique_graphs"]
    compiled(x, mask)
    assert counters["stats"]["unique_graphs"] == before + 1


def test_nested_specs_reach_a_cache_object():
    class Cache:
        def __init__(self, b, n):
            self.layers = [{"k": torch.randn(b, n)} for _ in range(2)]

    def attend(q, cache):
        return sum(layer["k"].sum(-1) for layer in cache.layers) * q[:, 0]

    b, t = ShapeVar("batch", min=1, max=8), ShapeVar("cached", min=1, max=64)
    layer = DictSpec({"k": TensorSpec([b, t])})
    spec = {"q": TensorSpec([b, None]), "cache": ObjectSpec({"layers": SeqSpec([layer, layer])})}
    compiled = verishape.compile(attend, backend="aot_eager", shapes_spec=spec)
    for i, (bb, tt) in enumerate([(2, 5), (3, 9), (4, 2)]):
        q, cache = torch.randn(bb, 3), Cache(bb, tt)
        torch.testing.assert_close(compiled(q, cache), attend(q, cache))
        assert counters["stats"]["unique_graphs"] == 1, f"call {i} compiled again"


@pytest.mark.parametrize("spec, match", [
    ({"x": TensorSpec([ShapeVar("b", max=8) * 2, None])}, r"derived from other variables"),
    ({"x": TensorSpec([ShapeVar(max=8), None])}, r"unnamed ShapeVar"),
    ({"y": TensorSpec([ShapeVar("b", max=8)])}, r"names \['y'\], which the callable does not take"),
    ({"x": TensorSpec([ShapeVar("b", max=8), None]), "mask": TensorSpec([ShapeVar("b", max=4)])},
     r"declares 'b' twice with other bounds"),
    ({"*args": [None, None, TensorSpec([ShapeVar("b")])]}, r"'\*args'\[2\] has no positional parameter"),
    ("batch", r"shapes_spec=str is not a ShapesSpec"),
])
def test_a_spec_that_cannot_be_read_is_one_line(spec, match):
    with pytest.raises(UsageError, match=match):
        verishape.compile(scale, shapes_spec=spec)


def test_a_torch_without_dynamic_spec_is_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch.fx.experimental.dynamic_spec", None)  # what torch 2.11 has
    with pytest.raises(UsageError, match=r"shapes_spec needs torch.fx.experimental.dynamic_spec \(torch 2.13"):
        verishape.compile(scale, shapes_spec={"x": None})


def test_dynamic_with_a_spec_is_refused():
    with pytest.raises(UsageError, match=r"dynamic=True with shapes_spec"):
        verishape.compile(scale, dynamic=True, shapes_spec=_spec())


def test_the_spec_under_torch_2_14s_name_declares_the_same():
    """torch 2.14 renamed ``torch.compile``'s ``shapes_spec`` to ``dynamic_shapes``; a drop-in
    takes the spec under either name (whatever the torch), serves the space as with the
    other, names the argument given in its refusals, and refuses both at once."""
    compiled = verishape.compile(scale, backend="aot_eager", dynamic_shapes=_spec())
    assert _run(compiled, [(3, 5), (1, 5), (6, 9), (2, 2)]) == [1, 0, 0, 0]
    assert counters["verishape"]["reused_at_size_1"] == 1
    with pytest.raises(UsageError, match=r"^verishape.compile: dynamic_shapes 'x' dim 0 is an unnamed ShapeVar"):
        verishape.compile(scale, dynamic_shapes={"x": TensorSpec([ShapeVar(max=8), None])})
    with pytest.raises(UsageError, match=r"dynamic=True with dynamic_shapes"):
        verishape.compile(scale, dynamic=True, dynamic_shapes=_spec())
    with pytest.raises(UsageError, match=r"shapes_spec and dynamic_shapes both given"):
        verishape.compile(scale, shapes_spec=_spec(), dynamic_shapes=_spec())


def test_an_int_leaf_gets_a_symbol_over_its_range():
    """An int declared with an ``IntVar`` (a static cache's ``max_cache_len``, on an object
    the forward takes) is a symbol from the first compile, its range guarded: a value outside
    it compiles again."""
    class Cache:
        def __init__(self, n):
            self.max_cache_len = n

    def allocate(x, cache):
        return x.new_zeros(x.shape[0], cache.max_cache_len) + x.sum()

    spec = {"x": TensorSpec([ShapeVar("batch", min=1, max=8)]),
            "cache": ObjectSpec({"max_cache_len": IntVar("cached", min=1, max=64)})}
    compiled = verishape.compile(allocate, backend="aot_eager", shapes_spec=spec)
    compiles = []
    for b, n in [(2, 5), (3, 9), (4, 70), (5, 11)]:
        x = torch.randn(b)
        torch.testing.assert_close(compiled(x, Cache(n)), allocate(x, Cache(n)))
        compiles.append(counters["stats"]["unique_graphs"])
    assert compiles == [1, 1, 2, 2]
    first = frames.envs_for(allocate.__code__)[0]
    assert sorted((int(vr.lower), vr.upper) for vr in first.var_to_range.values()) == [(2, 8), (2, 64)]


def test_a_static_int_dimension_is_read():
    b = ShapeVar("batch", min=1, max=8)
    declared = declared_sizes.parse({"x": TensorSpec([b, 4]), "n": IntVar("n", min=0, max=9)}, lambda x, n: x)
    assert declared.named["x"] == (declared_sizes.Dim("batch", 1, 8), 4)
    assert declared.named["n"] == declared_sizes.Dim("n", 0, 9)


def _branch(x):
    return x * 2 if x.shape[0] > 4 else x - 1


def _broadcast(x, y):
    return x + y


def _wraps(x):
    return x[x.shape[0] - 2]


def _divides(x):
    return x.reshape(-1)[: 12 // (x.shape[0] - 1)]


def _aliases(x):
    x[: max(x.shape[0] - 1, 0)].add_(1)  # an in-place write through a view of the input
    return x.sum(0)


def _empty_reduction(x):
    return x.amax(1) if x.shape[0] > 0 else x.sum(1)


ADVERSARIAL = [  # (program, its spec, argument shapes per call)
    (_branch, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None])}, [[(2, 3)], [(5, 3)], [(3, 3)], [(8, 3)], [(1, 3)]]),
    (_broadcast, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None]), "y": TensorSpec([ShapeVar("c", min=1, max=8), None])},
     [[(3, 4), (3, 4)], [(3, 4), (1, 4)], [(1, 4), (3, 4)], [(2, 4), (2, 4)], [(1, 4), (1, 4)]]),
    (_wraps, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None])}, [[(4, 2)], [(6, 2)], [(1, 2)], [(2, 2)]]),
    (_divides, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None])}, [[(3, 5)], [(5, 5)], [(2, 5)], [(1, 5)]]),
    (_aliases, {"x": TensorSpec([ShapeVar("b", min=0, max=8), None])}, [[(4, 3)], [(6, 3)], [(1, 3)], [(0, 3)], [(2, 3)]]),
    (_empty_reduction, {"x": TensorSpec([ShapeVar("b", min=0, max=8), None])},
     [[(4, 3)], [(0, 3)], [(1, 3)], [(7, 3)], [(9, 3)]]),
]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("program, spec, calls", ADVERSARIAL, ids=[p.__name__ for p, _, _ in ADVERSARIAL])
def test_programs_written_to_break_a_declared_space_agree_with_eager(backend, program, spec, calls):
    """A branch on a size, a broadcast of a size that is 1, an index that wraps at 1, a
    division by ``size - 1``, a write through a view of the input, a reduction over an empty
    dimension (sizes 0 and 1 declared, 9 outside): every decision about a declared size is
    stock's guard, so each call gives eager's result and eager's writes to its inputs, or
    eager's error (``ZeroDivisionError`` at 1)."""
    compiled = verishape.compile(program, backend=backend, shapes_spec=spec)
    for shapes in calls:
        agrees_with_eager(compiled, program, shapes)


def agrees_with_eager(compiled, program, shapes):
    """One call at ``shapes``: eager's result and eager's writes to the inputs, or eager's
    ``ZeroDivisionError``."""
    args = [torch.randn(*s) for s in shapes]
    mine = [a.clone() for a in args]  # (a program may write to its input)
    try:
        want = program(*args)
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            compiled(*mine)
        return
    torch.testing.assert_close(compiled(*mine), want)
    torch.testing.assert_close(mine, args)  # the same writes to the inputs


def _picks(x):
    # a branch the size-1 call takes alone, an index that wraps at 1, a broadcast at 1
    y = x[x.shape[0] - 2] if x.shape[0] > 1 else x[0] * 3
    return y + x.sum(0) / x.shape[0]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("program, spec, calls", [
    (_picks, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None])}, [[(1, 3)], [(4, 3)], [(1, 3)], [(2, 3)]]),
    (_branch, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None])}, [[(1, 3)], [(5, 3)], [(1, 3)], [(2, 3)]]),
    (_divides, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None])}, [[(1, 5)], [(3, 5)], [(1, 5)], [(2, 5)]]),
    (_wraps, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None])}, [[(1, 2)], [(4, 2)], [(1, 2)], [(2, 2)]]),
    (_broadcast, {"x": TensorSpec([ShapeVar("b", min=1, max=8), None]), "y": TensorSpec([ShapeVar("c", min=1, max=8), None])},
     [[(1, 4), (1, 4)], [(3, 4), (1, 4)], [(1, 4), (3, 4)], [(3, 4), (3, 4)], [(1, 4), (1, 4)]]),
    (_aliases, {"x": TensorSpec([ShapeVar("b", min=0, max=8), None])}, [[(1, 3)], [(4, 3)], [(0, 3)], [(1, 3)], [(2, 3)]]),
    (_empty_reduction, {"x": TensorSpec([ShapeVar("b", min=0, max=8), None])},
     [[(1, 3)], [(0, 3)], [(5, 3)], [(1, 3)], [(9, 3)]]),
], ids=["picks", "branch", "divides", "wraps", "broadcast", "aliases", "empty_reduction"])
def test_programs_written_to_break_a_size_compiled_at_2_agree_with_eager(backend, program, spec, calls):
    """The first call at 1, compiled at 2: a program whose size-1 call takes another branch,
    wraps an index, divides by ``size - 1`` or broadcasts there gets eager's result (or
    eager's ``ZeroDivisionError``) at every call; where the artifact at 2 is not right at 1
    the proof refuses it and the call at 1 compiles as stock."""
    compiled = verishape.compile(program, backend=backend, shapes_spec=spec)
    for shapes in calls:
        agrees_with_eager(compiled, program, shapes)


def _mixes(x, y):
    return x * 2 + y.flip(0)


def test_one_tensor_passed_twice_at_1_is_raised_once_and_restored():
    """Both arguments are one tensor (or a view of it) at batch 1: its size is raised for
    the attempt at 2 through either argument, every call gives eager's result, and the
    tensor keeps no hint of it afterwards."""
    b = ShapeVar("batch", min=1, max=8)
    compiled = verishape.compile(_mixes, backend="aot_eager", shapes_spec={"x": TensorSpec([b, None]),
                                                                           "y": TensorSpec([b, None])})
    for n in (1, 3, 1, 2):
        t = torch.randn(n, 4)
        torch.testing.assert_close(compiled(t, t), _mixes(t, t))
        torch.testing.assert_close(compiled(t, t[:, :1].expand(n, 4)), _mixes(t, t[:, :1].expand(n, 4)))
        assert not hasattr(t, "_dynamo_hint_overrides")


def test_the_audit_holds_a_guard_dropping_compile_against_the_declared_space(capsys, tmp_path):
    """``verify-guards`` reads the spec as the frame's declared space (1..64, size 1
    included): the branch's guard and the 0/1 specialization are each named with a size in
    the space, and replayed against the artifact with its guards skipped (both differ from
    eager)."""
    from audit_helpers import audit_in_process

    status, report, out, err = audit_in_process(capsys, tmp_path, "declared_skip_guards.py")
    assert status == 1, err
    assert "1 <= L['x'].size()[0] <= 64  (shapes_spec batch (1..64))" in out
    found = {f["kind"]: f for f in report["findings"]}
    assert set(found) == {"guard_not_implied", "specialization_01"}, found
    sizes = {kind: f["counterexample"]["L['x'].size()[0]"] for kind, f in found.items()}
    assert sizes["specialization_01"] == 1 and 1 <= sizes["guard_not_implied"] <= 16, sizes
    assert all(f["replay"]["outcome"] == "differ" for f in found.values()), found


def test_a_tensor_of_another_rank_than_declared_is_said_once(caplog):
    compiled = verishape.compile(scale, backend="aot_eager", shapes_spec={"mask": TensorSpec([ShapeVar("b", max=8)])})
    with caplog.at_level("WARNING", logger="verishape"):
        _run(compiled, [(3, 4), (5, 4)])
    said = [r.getMessage() for r in caplog.records if "shapes_spec declares" in r.getMessage()]
    assert said == ["verishape: shapes_spec declares L['mask'] with 1 dimension(s), the call passes 2: its sizes are "
                    "left to stock's choice"]


def test_a_callable_without_parameters_of_its_own_is_one_line():
    """Dynamo enters a partial or a callable object through a wrapper of its own: the spec's
    names would match nothing there, so it is refused instead of silently not applied."""
    import functools

    class Opaque:
        def __call__(self, x, mask):
            return scale(x, mask)

    for model, name in ((functools.partial(scale), "partial"), (Opaque(), "Opaque")):
        with pytest.raises(UsageError, match=rf"{name} has none \(compile the function itself\)"):
            verishape.compile(model, shapes_spec=_spec())


@pytest.mark.parametrize("backend, options", [("aot_eager", None), ("verishape", {"backend": "aot_eager"})])
def test_under_enable_a_torch_compile_with_a_spec_declares_as_verishape_compile(backend, options):
    """A framework's own ``torch.compile(model, shapes_spec=...)`` while ``verishape.enable()``
    holds: the spec is read by parameter name through the wrapper (stock's matches nothing
    there and compiles per call), one compile serves the space, size 1 by proved reuse; on
    exit ``torch.compile`` is torch's again."""
    original = torch.compile
    with verishape.enable():
        compiled = torch.compile(_wrapped(scale), backend=backend, options=options, shapes_spec=_spec())
        # torch 2.14's name for the argument is routed the same (it is the one a 2.14 user writes)
        renamed = torch.compile(_wrapped(scale), backend=backend, options=options, dynamic_shapes=_spec())
        assert _run(compiled, [(2, 12), (3, 17), (5, 9), (1, 4)]) == [1, 0, 0, 0]
        assert _run(renamed, [(2, 12), (3, 17), (5, 9), (1, 4)]) == [1, 0, 0, 0]
        with pytest.raises(UsageError, match="unnamed ShapeVar"):
            torch.compile(scale, shapes_spec={"x": TensorSpec([ShapeVar(None, min=1), None, None])})
    assert torch.compile is original
    assert counters["verishape"]["reused_at_size_1"] == 2


def test_the_audit_reads_torchs_own_spec_and_replays_its_unbacked_sizes(capsys, tmp_path):
    """Stock ``torch.compile(shapes_spec=...)`` gives the declared sizes unbacked symbols,
    for which torch records no input source: the audit takes the sources from the traced
    inputs, holds the spec's range asserts against the declared range (implied), and replays
    each size-1 fallback at ``x.size(0) = 1`` (before: "u0 comes from tensor data", not
    replayed, and the range asserts reported against ``[0, oo)``)."""
    from audit_helpers import audit_in_process

    status, report, out, err = audit_in_process(capsys, tmp_path, "torch_spec_skip_guards.py")
    assert "1 <= L['x'].size()[0] <= 64  (shapes_spec batch (1..64))" in out, out
    assert "runtime assert: 1 <= u0: implied" in out and "runtime assert: u0 <= 64: implied" in out, out
    findings = report["findings"]
    assert findings and all(f["kind"] == "fallback_unproved" for f in findings), findings
    assert all(f["counterexample"] == {"L['x'].size()[0]": 1} for f in findings), findings
    assert all(f["replay"]["outcome"] == "agree" for f in findings), findings
    assert status == 1, err
