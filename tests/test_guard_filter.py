"""``verishape.proved_guard_filter`` (issue 50, item 2): the shape guard of a ``shapes_spec``
compile is dropped only where everything it checks is proved on the declared space; guards
on declared inputs are always kept; every other guard is kept or left to ``unsafe``
(:mod:`verishape.compiler.guard_filter`)."""

from __future__ import annotations

import logging

import pytest
import torch

pytest.importorskip("torch.fx.experimental.dynamic_spec", reason="shapes_spec is torch 2.13's")
from torch.fx.experimental.dynamic_spec import ShapesSpec, ShapeVar, TensorSpec  # noqa: E402

import verishape
from verishape.compiler import frames
from verishape.compiler.guard_filter import proved_guard_filter
from verishape.core.errors import UsageError

from test_declared import ADVERSARIAL, agrees_with_eager

pytestmark = pytest.mark.usefixtures("fresh_frames")

SKIP_ALL = torch.compiler.skip_all_guards_unsafe


def _compile(fn, spec, guard_filter, backend="aot_eager"):
    return verishape.compile(fn, backend=backend, shapes_spec=spec, options={"guard_filter_fn": guard_filter})


def _filtered(fn):
    return [line for env in frames.envs_for(fn.__code__) for line in env.verishape_log.filtered]


def _double(x, y):
    return x * 2 + y


def _batch(low, high=64):
    b = ShapeVar("batch", min=low, max=high)
    return {"x": TensorSpec([b, None]), "y": TensorSpec([b, None])}


def _agree(compiled, fn, shapes):
    args = [torch.randn(*s) for s in shapes]
    torch.testing.assert_close(compiled(*args), fn(*args))


def test_a_shape_guard_proved_on_the_declared_space_is_dropped():
    """Batch declared 2..64, compiled at 4: the range and the two inputs' equal batch are all
    the shape guard checks, each implied by the declaration: dropped, with its proof record."""
    compiled = _compile(_double, _batch(2), proved_guard_filter())
    for b in (4, 7, 2, 64):
        _agree(compiled, _double, [(b, 3), (b, 3)])
    assert len(frames.envs_for(_double.__code__)) == 1
    assert _filtered(_double) == ["the shape guard dropped: its 2 fact(s) proved over the declared space"]
    (record,) = [r for r in frames.envs_for(_double.__code__)[0].verishape_log.records if r.obligation.kind == "guard_filtered"]
    assert record.result.proved


def test_size_one_in_the_space_keeps_the_shape_guard_and_names_the_size():
    """Batch declared 1..64: the compile at 4 holds for sizes from 2 (0/1 specialization), so
    the guard stays, named with the size that breaks it; the call at 1 compiles (or reuses,
    proved) instead of running a graph nobody checked at 1."""
    compiled = _compile(_double, _batch(1), proved_guard_filter())
    for b in (4, 1, 3):
        _agree(compiled, _double, [(b, 3), (b, 3)])
    first = _filtered(_double)[0]
    assert first.startswith("the shape guard kept: the range 2 <= L['x'].size()[0] is not implied"), first
    assert first.endswith("false at batch=1"), first


def test_a_guard_the_declaration_does_not_imply_is_kept():
    """A branch on the batch (``b > 4``) within a space 2..8: not implied (false at 2..4)."""
    def branch(x):
        return x * 2 if x.shape[0] > 4 else x - 1

    spec = {"x": TensorSpec([ShapeVar("b", min=2, max=8), None])}
    compiled = _compile(branch, spec, proved_guard_filter(unsafe=SKIP_ALL))
    for b in (6, 3, 8, 2):
        _agree(compiled, branch, [(b, 2)])
    first = _filtered(branch)[0]
    head = "the shape guard kept: the guard L['x'].size()[0] > 4 is not implied by the declared space, false at b="
    assert first.startswith(head) and 2 <= int(first[len(head):]) <= 4, first


def test_an_assumption_of_the_spec_proves_a_guard():
    """The same branch with the spec's assumption ``b >= 5``: the guard follows, dropped."""
    def branch(x):
        return x * 2 if x.shape[0] > 4 else x - 1

    b = ShapeVar("b", min=2, max=8)
    spec = ShapesSpec({"x": TensorSpec([b, None])}, assumptions=[b >= 5])
    compiled = _compile(branch, spec, proved_guard_filter())
    for n in (6, 5, 8):
        _agree(compiled, branch, [(n, 2)])
    assert _filtered(branch)[0].startswith("the shape guard dropped"), _filtered(branch)


def test_two_variables_the_program_equates_keep_the_guard():
    """``x`` and ``y`` declared with two variables, added: the trace equates their batches (a
    replacement the shape guard checks), which the declaration does not imply."""
    spec = {"x": TensorSpec([ShapeVar("b", min=2, max=8), None]), "y": TensorSpec([ShapeVar("c", min=2, max=8), None])}

    def add(x, y):
        return x + y

    compiled = _compile(add, spec, proved_guard_filter())
    _agree(compiled, add, [(4, 2), (4, 2)])
    _agree(compiled, add, [(5, 2), (5, 2)])
    first = _filtered(add)[0]
    assert first.startswith("the shape guard kept: L['x'].size()[0] == ") and "is not implied" in first, first
    assert "L['y'].size()[0]" in first and "false at b=" in first, first


def test_an_undeclared_size_and_a_compile_without_a_spec_keep_the_shape_guard():
    spec = {"x": TensorSpec([ShapeVar("batch", min=2, max=8), None])}  # y not declared
    compiled = _compile(_double, spec, proved_guard_filter())
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    torch._dynamo.mark_dynamic(y, 0)
    torch.testing.assert_close(compiled(x, y), _double(x, y))
    assert _filtered(_double)[0] == ("the shape guard kept: it checks L['y'].size()[0], which no declared size "
                                     "states"), _filtered(_double)

    def triple(x):
        return x * 3

    plain = verishape.compile(triple, backend="aot_eager", dynamic=True,
                              options={"guard_filter_fn": proved_guard_filter()})
    _agree(plain, triple, [(5, 2)])
    assert _filtered(triple) == ["the shape guard kept: this compile declares no sizes (verishape.compile(..., "
                                 "shapes_spec=...))"]


def test_a_symbolic_stride_keeps_the_shape_guard():
    """Both dimensions declared, compiled contiguous: the shape guard also checks
    ``x.stride()[0] == x.size()[1]`` (the layout, which no declaration states), so it stays,
    and a row slice of a wider tensor (same sizes, another stride) compiles again; dropping it
    would run the contiguous kernel over the wider rows."""
    def scale(x):
        return x * 2 + 1

    spec = {"x": TensorSpec([ShapeVar("b", min=2, max=8), ShapeVar("n", min=2, max=8)])}
    compiled = _compile(scale, spec, proved_guard_filter(unsafe=SKIP_ALL), backend="inductor")
    compiled(torch.randn(4, 5))
    sliced = torch.randn(4, 8)[:, :5]
    torch.testing.assert_close(compiled(sliced), scale(sliced))
    assert _filtered(scale)[0] == ("the shape guard kept: it checks L['x'].stride()[0], which no declared size "
                                   "states"), _filtered(scale)


def test_under_stock_torch_compile_the_shape_guard_stays():
    """``torch.compile`` (a stock ShapeEnv, no verishape backend) declares nothing: the shape
    guard stays (a branch's ``b > 4`` keeps a call at 3 from the graph traced at 5), and
    ``unsafe`` still decides the rest."""
    def branch(x):
        return x * 2 if x.shape[0] > 4 else x - 1

    compiled = torch.compile(branch, backend="aot_eager", dynamic=True,
                             options={"guard_filter_fn": proved_guard_filter(unsafe=SKIP_ALL)})
    for b in (5, 3, 6):
        _agree(compiled, branch, [(b, 2)])


def test_guards_on_declared_inputs_stay_whatever_unsafe_says():
    """``unsafe=skip_all_guards_unsafe`` drops every guard the declaration says nothing of;
    a declared input's own guard (its strides) stays: a transposed input compiles again and
    gives eager's result, where ``skip_all_guards_unsafe`` alone runs the contiguous kernel."""
    def scale(x):
        return x * 2 + 1

    spec = {"x": TensorSpec([ShapeVar("b", min=2, max=8), ShapeVar("n", min=2, max=8)])}
    transposed = torch.randn(5, 4).t()
    for guard_filter, agrees in ((proved_guard_filter(unsafe=SKIP_ALL), True), (SKIP_ALL, False)):
        torch._dynamo.reset()
        compiled = _compile(scale, spec, guard_filter, backend="inductor")
        compiled(torch.randn(4, 5))
        try:
            same = torch.allclose(compiled(transposed), scale(transposed))
        except AssertionError:  # Inductor's check of an input's strides
            same = False
        assert same is agrees, guard_filter


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("program, spec, calls", ADVERSARIAL, ids=[p.__name__ for p, _, _ in ADVERSARIAL])
def test_programs_written_to_break_a_dropped_guard_agree_with_eager_in_the_space(backend, program, spec, calls):
    """The programs of ``test_declared`` (a branch on a size, a size-1 broadcast, an index
    that wraps at 1, a division by ``size - 1``, a write through a view, an empty reduction)
    with vLLM's ``skip_all_guards_unsafe`` for every guard the declaration says nothing of:
    every call inside the declared space gives eager's result, writes and errors."""
    compiled = _compile(program, spec, proved_guard_filter(unsafe=SKIP_ALL), backend=backend)
    for shapes in calls:
        if any(not d.holds(n) for d, n in _declared_sizes(spec, shapes)):
            continue  # outside the space: the caller's promise, as with any dropped guard
        agrees_with_eager(compiled, program, shapes)


def _declared_sizes(spec, shapes):
    from verishape.compiler import declared as declared_sizes

    named = declared_sizes.parse(spec, lambda x, y=None: x).named
    return [(d, shape[i]) for tree, shape in zip(named.values(), shapes) for i, d in enumerate(tree)
            if isinstance(d, declared_sizes.Dim)]


def test_skip_all_guards_breaks_the_branch_program():
    """What the filter is measured against: the same branch program under vLLM's filter alone
    runs the graph traced at 2 for a batch of 5."""
    program, spec, _ = ADVERSARIAL[0]
    compiled = _compile(program, spec, SKIP_ALL)
    compiled(torch.randn(2, 3))
    x = torch.randn(5, 3)
    assert not torch.allclose(compiled(x), program(x))


def test_a_failure_inside_the_filter_keeps_the_guard_and_says_it_is_a_bug(monkeypatch, caplog):
    from verishape.compiler import guard_filter

    def broken(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(guard_filter.Frame, "_checked", broken)
    compiled = _compile(_double, _batch(2), proved_guard_filter())
    with caplog.at_level(logging.WARNING, logger="verishape"):
        for b in (4, 7):
            _agree(compiled, _double, [(b, 3), (b, 3)])
    assert "proved_guard_filter failed on the shape guard of _double, kept (this is a verishape bug)" in caplog.text
    assert _filtered(_double) == []


def test_a_bad_unsafe_filter_is_one_line():
    with pytest.raises(UsageError, match="unsafe=3 is not a guard filter"):
        proved_guard_filter(unsafe=3)
    compiled = _compile(_double, _batch(2), proved_guard_filter(unsafe=lambda entries: [True]))
    with pytest.raises(UsageError, match=r"returned 1 value\(s\) for \d+ guard\(s\), not one bool each"):
        compiled(torch.randn(3, 2), torch.randn(3, 2))


def test_outside_the_guard_builder_every_size_guard_is_kept(caplog):
    class Entry:
        def __init__(self, guard_type):
            self.name, self.guard_type, self.orig_guard = "", guard_type, None

    with caplog.at_level(logging.WARNING, logger="verishape"):
        kept = proved_guard_filter(unsafe=SKIP_ALL)([Entry("SHAPE_ENV"), Entry("ID_MATCH")])
    assert kept == [True, False]
    assert "outside Dynamo's guard builder" in caplog.text


DROPPABLE = {  # programs over a declared batch (2..16) whose shape guard the space may imply
    "view": lambda x: x.view(x.shape[0] * 2, -1).sum(1),
    "cat": lambda x: torch.cat([x, x[:1]], 0).mean(0),
    "branch": lambda x: x * 2 if x.shape[0] >= 2 else x,
    "floordiv": lambda x: x[: x.shape[0] // 2 + 1].sum(0),
    "mod": lambda x: x.roll(x.shape[0] % 3, 0),
    "reshape": lambda x: x.reshape(2, -1, x.shape[1]).sum(0),
    "expand": lambda x: (x[:, :1].expand(x.shape[0], 4) + x).relu(),
    "arange": lambda x: x + torch.arange(x.shape[0], dtype=x.dtype)[:, None],
}


def test_where_the_shape_guard_is_dropped_every_call_in_the_space_agrees_with_eager():
    """The drop path under pressure: eight programs over a batch declared 2..16 (outer
    dimension, contiguous inputs), seven calls each across the space, every other guard
    dropped by ``skip_all_guards_unsafe``: eager's result or eager's error at every call.
    Seven shape guards are dropped; ``reshape(2, -1, n)`` keeps its ``4*b % 8 == 0`` (false
    at b = 3), and its odd batches compile again and raise as eager does."""
    wrong, dropped = [], 0
    for name, program in DROPPABLE.items():
        torch._dynamo.reset()
        spec = {"x": TensorSpec([ShapeVar("b", min=2, max=16), None])}
        compiled = _compile(program, spec, proved_guard_filter(unsafe=SKIP_ALL))
        for n in (4, 5, 2, 16, 3, 9, 12):
            x = torch.randn(n, 4)
            try:
                want = program(x)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    compiled(x.clone())
                continue
            got = compiled(x.clone())
            if got.shape != want.shape or not torch.allclose(got, want, atol=1e-5):
                wrong.append((name, n))
        lines = _filtered(program)
        dropped += any(line.startswith("the shape guard dropped") for line in lines)
        if name == "reshape":
            assert "Eq(Mod(4*L['x'].size()[0], 8), 0) is not implied" in lines[0], lines
    assert not wrong and dropped == 7, (wrong, dropped)
