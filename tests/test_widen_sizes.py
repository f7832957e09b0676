"""The decisions Inductor makes without asking the ShapeEnv (``compiler/widen/lowered_sizes.py``
and the range reads of ``compiler/widen/recompute.py``): every size the generic artifact computes
with must stay at least 1 at 1, and the lowering's direct range reads see a kept size's
range from 1.  Unit tests first, then the programs that made widening wrong (slow)."""

from __future__ import annotations

import types

import pytest
import sympy
import torch
from torch.utils._sympy.functions import FloorDiv, ModularIndexing
from torch.utils._sympy.value_ranges import ValueRanges

import verishape
from verishape.compiler.widen import lowered_sizes, over_ranges, questions, recompute, sizes
from verishape.core import torch_names
from verishape.fuzz.widen_check import run_sweep

s = sympy.Symbol("s", integer=True, positive=True)
t = sympy.Symbol("t", integer=True, positive=True)
i = sympy.Symbol("i", integer=True, nonnegative=True)


def test_the_symbols_a_size_merged_follow_the_replacements_as_they_change():
    """``sizes.merged_into`` caches the inverse of the replacements it reads: it must build it again
    whenever they change, an entry overwritten in place (their number unchanged) included."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    a, b, c, d = sympy.symbols("s0 s1 s2 s3", integer=True, positive=True)

    def scanned(symbol: sympy.Symbol) -> list[sympy.Symbol]:  # the definition, one scan per call
        return [symbol, *sorted((x for x, r in env.replacements.items() if r == symbol and x != symbol), key=str)]

    env.replacements.update({c: a, b: a, d: 2 * a})
    assert sizes.merged_into(env, a) == scanned(a) == [a, b, c]
    assert sizes.merged_into(env, d) == scanned(d) == [d]
    env.replacements[c] = sympy.Integer(3)  # overwritten: as many replacements as before
    assert sizes.merged_into(env, a) == scanned(a) == [a, b]
    env.replacements[d] = a
    del env.replacements[b]
    assert sizes.merged_into(env, a) == scanned(a) == [a, d]
    assert sizes.merged_into(ShapeEnv(), a) == [a]  # another env: its own replacements


def test_a_size_that_becomes_zero_at_one_is_a_false_goal():
    uses = lowered_sizes.SizeUses()
    uses.add_all([s - 1], "size", "slice")
    uses.add_all([4 * s, t * s], "size", "buffer")
    uses.add_all([sympy.Integer(0)], "size", "a constant, not about s")
    uses.add_all([t], "size", "another size")
    goals = dict((str(w).split(" of ")[1].split(" is ")[0], g) for g, w in
                 lowered_sizes.goals(uses.entries, {s}, {s: sympy.Integer(1)}))
    assert goals["slice"] is sympy.false  # s - 1 is 0 at 1
    assert "buffer" not in goals or goals["buffer"] == sympy.Ge(t, 1)  # 4 at 1 is dropped; t*s -> t >= 1
    assert "another size" not in goals  # holds no kept size


def test_divisors_and_moduli_of_index_expressions_are_uses():
    uses = lowered_sizes.SizeUses()
    uses.add_indexes([ModularIndexing(i, s - 1, 4) + FloorDiv(i, t * s)], "an index")
    kinds = {(str(e), k) for e, k, _ in uses.entries}
    assert kinds == {("s - 1", "divisor"), ("4", "divisor"), ("s*t", "divisor")} - {("4", "divisor")}
    (goal, why), = [g for g in lowered_sizes.goals(uses.entries, {s}, {s: sympy.Integer(1)})
                    if g[0] is sympy.false]
    assert "divisor s - 1" in why


def test_the_aot_graph_gives_its_tensor_sizes_and_size_divisors():
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x: (x[1:].amax(), x / (x.shape[0] - 1)), tracing_mode="symbolic")(torch.randn(5, 4))
    uses = lowered_sizes.SizeUses()
    lowered_sizes.from_graph(gm, uses)
    sym = next(iter(gm.graph.find_nodes(op="placeholder"))).meta["val"].shape[0].node.expr
    assert (sym - 1, "size") in {(e, k) for e, k, _ in uses.entries}
    assert (sym - 1, "divisor") in {(e, k) for e, k, _ in uses.entries}


def test_a_scheduled_node_of_an_unknown_kind_makes_the_log_incomplete():
    from torch._inductor.virtualized import V

    class Strange:
        def get_nodes(self):
            return [self]

        def get_name(self):
            return "op7"

        def get_outputs(self):
            return []

    uses = lowered_sizes.SizeUses()
    with V.set_graph_handler(types.SimpleNamespace(buffers=[], graph_outputs=[])):
        lowered_sizes.from_scheduler(types.SimpleNamespace(nodes=[Strange()]), uses)
    assert uses.incomplete is not None and "op7" in uses.incomplete


def _env_with_batch():
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    env = verishape.VeriShapeEnv()
    sym = env.create_symbol(4, ConstantSource("b"), dynamic_dim=DimDynamic.DYNAMIC)
    assert env.var_to_range[sym].lower == 2
    return env, sym


def test_inductor_range_reads_see_a_kept_size_from_one_while_recording():
    """``bound_sympy`` as Inductor's modules call it: ``s - 1`` is at least 1 for the
    generic range [2, oo); while a generic compile is recorded it is bounded from 0."""
    import torch._inductor.bounds as inductor_bounds
    from torch._guards import TracingContext
    from torch._subclasses.fake_tensor import FakeTensorMode

    env, b = _env_with_batch()
    with torch._guards.tracing(TracingContext(FakeTensorMode(shape_env=env))):
        assert inductor_bounds.bound_sympy(b - 1).lower == 1
        with questions.recording(env, frozenset({b})) as log:
            assert log.widened == {b: ValueRanges(1, env.var_to_range[b].upper)}
            assert inductor_bounds.bound_sympy(b - 1).lower == 0
            assert inductor_bounds.bound_sympy(b - 1, {i: ValueRanges(0, 3)}).lower == 0
        assert inductor_bounds.bound_sympy(b - 1).lower == 1  # restored
    assert getattr(inductor_bounds.bound_sympy, "_verishape_original", None) is None


def test_a_torch_without_the_range_reader_is_said_and_left_alone(monkeypatch, caplog):
    monkeypatch.setattr(torch_names, "RANGE_READER", ("torch.utils._sympy.value_ranges", "no_such_reader"))
    recompute._said.discard("torch.utils._sympy.value_ranges.no_such_reader")
    undo: list = []
    recompute._widening_range_reads(lambda: {}, types.SimpleNamespace(callback=lambda *a: undo.append(a)))
    assert undo == []  # nothing wrapped, nothing to restore
    assert "no_such_reader" in caplog.text


# ---------------------------------------------------------------------------- end to end


def _rows(n):
    return [torch.randn(n, 4, generator=torch.Generator().manual_seed(n))]


def _seq(n):
    return [torch.randn(2, n, 4, generator=torch.Generator().manual_seed(n))]


#: the programs that returned a wrong answer at 1 under Inductor (a size ``s - 1`` that
#: becomes 0 at 1 under a reduction with no identity); eager raises there
WRONG_BEFORE = {
    "slice_max": (lambda x: x[1:].max(), _rows),
    "torch_max_dim": (lambda x: torch.max(x[1:], 0), _rows),
    "diff_abs_max": (lambda x: torch.diff(x, dim=0).abs().max(), _rows),
    "seq_slice_max_dim": (lambda h: h[:, 1:].max(dim=1), _seq),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_BEFORE))
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_derived_size_that_becomes_zero_refuses_under_inductor(name, backend):
    fn, make = WRONG_BEFORE[name]
    sweep = run_sweep(fn, make, [2, 3, 1, 4, 1], backend=backend)
    assert sweep.wrong == [] and sweep.other_differences == []
    assert sweep.calls[2].eager_raised is not None  # eager raises at 1, and so does the compiled call
    if backend == "inductor":
        assert sweep.reuses == 0
        assert any("is 0 at 1" in why for why in sweep.refusals), sweep.refusals
    else:  # aot_eager runs the graph op by op, with eager's own checks at 1
        assert sweep.reuses >= 1  # the second call at 1 runs the first one's cache entry


def test_a_size_that_divides_by_zero_at_1_is_a_named_refusal_not_an_internal_error():
    """Seen on an H200 (torch 2.11, Triton): ``h[:, :-1] - h[:, 1:]`` left an index
    ``FloorDiv(i, s - 1)`` whose substitution at s = 1 raised ZeroDivisionError inside
    SymPy, and the reuse was refused as "the proof failed".  It is a reason of its own."""
    from verishape.compiler.widen.canon import NotWidened
    from verishape.compiler.widen.sizes import at_one

    s = sympy.Symbol("s0", integer=True, positive=True)
    i = sympy.Symbol("i0", integer=True, nonnegative=True)
    one = {s: sympy.Integer(1)}
    with pytest.raises(NotWidened, match=r"the index \(\(i0//\(s0 - 1\)\)\) \+ 1 of buf0 divides by a size that is 0 at 1"):
        lowered_sizes.goals([(FloorDiv(i, s - 1) + 1, "index", "buf0")], {s}, one)
    assert at_one(FloorDiv(i, s + 1), one, "x") == FloorDiv(i, 2)
    with pytest.raises(over_ranges.NotANumber):
        over_ranges.number(ModularIndexing(i, 1, s - 1), one)
