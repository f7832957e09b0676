"""What deciding costs (issue 12, item 5): the same answers with less work.

* A question the real inputs answer one way and nearby inputs the other way is refuted
  by trying those inputs (the prover's first tier, ``verishape.solvers.refute``), with no solver call; the answer stays
  stock's and the guard stock installs is installed.
* A question only the solver can prove is still proved by the solver.
* ``evaluate_expr`` adds no sympy traversal to a question stock answers from its cache.
"""

from __future__ import annotations

import pytest
import sympy
from torch._dynamo.source import ConstantSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
from torch.utils._sympy.functions import FloorDiv

from hypothesis import given, settings
from hypothesis import strategies as st

from verishape import solvers
from verishape.solvers import concrete, refute
from verishape.core.premises import use_prover
from verishape.core.shape_env import VeriShapeEnv


def _env(cls: type[ShapeEnv], **hints: int) -> tuple[ShapeEnv, list[sympy.Symbol]]:
    env = cls()
    syms = [env.create_symbol(v, source=ConstantSource(k), dynamic_dim=DimDynamic.DYNAMIC)
            for k, v in hints.items()]
    return env, syms


def test_a_question_nearby_inputs_break_costs_no_solver_call():
    """GPT-2's ``view`` asks whether ``8*b`` divides evenly by a flattened size (true for
    b = 3, n = 24; false for n = 25).  Z3 took 0.34 s to refute it; a neighbour does."""
    prover = solvers.Prover(store=None)
    env, (n, b) = _env(VeriShapeEnv, n=24, b=3)
    question = sympy.Eq(8 * b, n * FloorDiv(8 * b, n))
    with use_prover(prover):
        answer = env.evaluate_expr(question)
    assert answer == sympy.true  # the hint's answer, guarded: stock behaviour
    assert prover.stats.solver_calls == 0
    assert env.verishape_log.records == [] and env.verishape_log.undecided == 1
    assert prover.stats.refuted_concretely == 1
    stock_env, _ = _env(ShapeEnv, n=24, b=3)
    stock_env.evaluate_expr(question)
    assert [str(g.expr) for g in env.guards] == [str(g.expr) for g in stock_env.guards]


def test_a_question_only_the_solver_proves_is_still_proved():
    """``s0 >= 2*s1`` recorded, then ``s0 > s1``: true at every point, so no neighbour
    refutes it and the solver proves it (no new guard)."""
    prover = solvers.Prover(store=None)
    env, (a, b) = _env(VeriShapeEnv, a=9, b=4)
    with use_prover(prover):
        env.evaluate_expr(sympy.Ge(a, 2 * b))  # a neighbour breaks it: guarded, as stock
        guards, refuted, calls = len(env.guards), prover.stats.refuted_concretely, prover.stats.solver_calls
        assert env.evaluate_expr(sympy.Gt(a, b)) == sympy.true
    assert len(env.guards) == guards
    assert [r.obligation.kind for r in env.verishape_log.records] == ["guard_avoided"]
    assert prover.stats.solver_calls == calls + 1 and prover.stats.refuted_concretely == refuted


def test_refutation_respects_premises_signs_and_domains():
    x = sympy.Symbol("x", integer=True)
    y = sympy.Symbol("y", integer=True, positive=True)
    # x < 10 breaks at x = 64*3 + 65, unless a premise bounds x
    assert refute.counterexample(sympy.Lt(x, 10), [], {x: 3}) is not None
    assert refute.counterexample(sympy.Lt(x, 10), [sympy.Le(x, 9)], {x: 3}) is None
    # y's declared sign is an axiom of the solver's query: y = 0 (a division by zero
    # here) is a counterexample only for a symbol that may be 0
    assert refute.counterexample(sympy.Ge(FloorDiv(y + 1, y), 1), [], {y: 5}) is None
    assert refute.counterexample(sympy.Ge(FloorDiv(x + 1, x), 1), [], {x: 5}) == {x: 0}
    # a premise undefined at the point (division by zero) does not hold there
    point = refute.counterexample(sympy.Ne(x, 0), [sympy.Eq(sympy.Mod(6, x), 0)], {x: 3})
    assert point is None or point[x] != 0
    # the solver's goal is strict: a target undefined at a point that satisfies the
    # premises is not provable (Mod by zero at x = 0)
    assert refute.counterexample(sympy.Ge(sympy.Mod(7, x), 0), [sympy.Ge(x, 0)], {x: 3}) == {x: 0}


def test_refutations_agree_with_the_solver():
    """Every counterexample found is one the solver's reference semantics confirm: the
    solver refutes the same question."""
    x = sympy.Symbol("x", integer=True)
    z = sympy.Symbol("z", integer=True)
    cases = [
        (sympy.Eq(sympy.Mod(8 * z, x), 0), [sympy.Ge(x, 2), sympy.Ge(z, 2)], {x: 24, z: 3}),
        (sympy.Lt(x * z, 100), [sympy.Ge(x, 1), sympy.Ge(z, 1)], {x: 4, z: 5}),
        (sympy.Ne(x, z), [sympy.Ge(x, 2), sympy.Ge(z, 2)], {x: 4, z: 5}),
    ]
    for target, premises, witness in cases:
        point = refute.counterexample(target, premises, witness)
        assert point is not None, target
        assert solvers.Prover(store=None).prove(target, premises).refuted, target
        # the prover's first tier finds it too, with no solver call
        prover = solvers.Prover(store=None)
        result = prover.prove(target, premises, witness=witness)
        assert result.refuted and prover.stats.solver_calls == 0 and prover.stats.refuted_concretely == 1, target


def test_evaluate_expr_adds_no_traversal_to_a_cached_answer(monkeypatch):
    """Stock answers a repeated question from its cache; verishape must not walk the
    expression (``free_symbols``) around it just to label a solver question that is
    never asked."""
    calls = {"n": 0}
    original = sympy.Basic.free_symbols

    def counted(self):
        calls["n"] += 1
        return original.fget(self)

    counts = {}
    for cls in (ShapeEnv, VeriShapeEnv):
        env, (a, b) = _env(cls, a=5, b=7)
        question = sympy.Gt(a * b + 3 * a, 2)
        env.evaluate_expr(question)
        monkeypatch.setattr(sympy.Basic, "free_symbols", property(counted))
        calls["n"] = 0
        env.evaluate_expr(question)
        counts[cls.__name__] = calls["n"]
        monkeypatch.undo()
    assert counts["VeriShapeEnv"] == counts["ShapeEnv"]


def test_a_huge_power_or_shift_at_a_tried_point_is_unevaluable_not_a_hang():
    """The first tier tries sizes past int64 (2**64): ``2**s`` or ``x << s`` there would take
    the process's memory.  Such a result is Unevaluable (decides nothing) and refutation
    moves on to a point it can evaluate."""
    import time

    from torch.utils._sympy.functions import LShift, PowByNatural

    from verishape.solvers import concrete

    # (a shift's amount non-negative, as torch's sizes are: torch 2.11's LShift refuses to be
    # built over one whose sign is unknown)
    s = sympy.Symbol("s", integer=True, nonnegative=True)
    start = time.perf_counter()
    for expr in (PowByNatural(2, s), LShift(3, s), sympy.Pow(sympy.Rational(1, 2), s)):
        with pytest.raises(concrete.Unevaluable):
            concrete.evaluate(expr, {s: 2**64})
    assert concrete.evaluate(PowByNatural(2, s), {s: 100}) == 2**100
    point = refute.counterexample(sympy.Lt(PowByNatural(2, s), 10**9), [sympy.Ge(s, 0)], {s: 3})
    assert point is not None and 2 ** point[s] >= 10**9
    assert time.perf_counter() - start < 5


def test_a_float_question_a_sign_breaks_costs_no_solver_call():
    """``TruncToInt(zf * s) >= 0`` over an unspecialized float scale ``zf`` (PyTorch's
    ``test_unspec_float_precision``): Z3 bit-blasts IEEE doubles and gave up after 0.1 s; the
    scale at -1 breaks it.  The witness keeps the real scale (1.87, not the point 1)."""
    from torch.utils._sympy.functions import ToFloat, TruncToInt

    from verishape.core.premises import witness_value

    zf, s = sympy.Symbol("zf0", real=True), sympy.Symbol("s0", integer=True, positive=True)
    target, premises = sympy.Ge(TruncToInt(zf * ToFloat(s)), 0), [sympy.Ge(s, 2)]
    assert witness_value(sympy.Float(1.873536229133606)) == 1.873536229133606 and witness_value(sympy.Integer(3)) == 3
    point = refute.counterexample(target, premises, {zf: 1.873536229133606, s: 427})
    assert point is not None and point[zf] < 0
    prover = solvers.Prover(store=None)
    result = prover.prove(target, premises, witness={zf: 1.873536229133606, s: 427})
    assert result.refuted and prover.stats.solver_calls == 0 and prover.stats.refuted_concretely == 1
    # a premise that bounds the scale from below leaves no such point: the solver is asked
    assert refute.counterexample(target, [*premises, sympy.Ge(zf, 0)], {zf: 1.873536229133606, s: 427}) is None


def test_a_loop_index_question_is_refuted_at_its_bounds_without_the_solver():
    """Inductor simplifies index formulas with ``statically_known`` questions over a
    kernel's loop indices (``x3 < 4`` with ``0 <= x3 <= 7``), which have no real values,
    so no witness: 20 solver calls of 3 to 20 ms in a tiny LLaMA's first compile.  The
    premises' own bounds are the starting point; a bound they imply is still proved."""
    x = sympy.Symbol("x3", integer=True, nonnegative=True)
    premises = [sympy.Lt(x, 8), sympy.Le(0, x), sympy.Le(x, 7)]
    for target in (sympy.Lt(x, 4), sympy.Ge(x, 4), sympy.Ge(x, 1), sympy.Eq(sympy.Mod(x, 4), x)):
        prover = solvers.Prover(store=None)
        result = prover.prove(target, premises)
        assert result.refuted and prover.stats.solver_calls == 0 and prover.stats.refuted_concretely == 1, target
        assert 0 <= result.counterexample["x3"] <= 7
    prover = solvers.Prover(store=None)
    result = prover.prove(sympy.Lt(x, 9), premises)  # a bound they imply: the proving tier, no solver either
    assert result.proved and prover.stats.solver_calls == 0 and prover.stats.proved_by_bounds == 1
    # a symbol's sign is part of its domain: a premise y >= 0 that SymPy left unevaluated
    # must not start a positive y at 0 (FloorDiv(x, 0) would "refute" what Z3 proves)
    y = sympy.Symbol("y", integer=True, positive=True)
    signed = [*premises, sympy.Ge(y, 0, evaluate=False), sympy.Le(y, 5)]
    prover = solvers.Prover(store=None)
    assert prover.prove(sympy.Le(FloorDiv(x, y), x), signed).proved and prover.stats.refuted_concretely == 0
    start, _ = refute.from_bounds(sympy.Le(FloorDiv(x, y), x), signed)
    assert start[y] == 1
    # a symbol no premise bounds gives no starting point (the solver decides)
    y = sympy.Symbol("y", integer=True)
    assert refute.from_bounds(sympy.Lt(x + y, 4), premises) is None
    assert refute.from_bounds(sympy.Lt(x, 4), [sympy.Lt(x, y)]) is None


def test_an_inductor_loop_index_question_costs_no_solver_call():
    """The same question as Inductor asks it: ``SizeVarAllocator.simplify_with_ranges`` of a
    ``ModularIndexing`` over a loop index; nothing reaches Z3, and the answer is stock's."""
    from torch._inductor.sizevars import SizeVarAllocator
    from torch.utils._sympy.functions import ModularIndexing

    x3 = sympy.Symbol("x3", integer=True, nonnegative=True)
    answers = {}
    for cls in (ShapeEnv, VeriShapeEnv):
        prover = solvers.Prover(store=None)
        sizes = SizeVarAllocator(cls())
        with use_prover(prover):
            answers[cls.__name__] = [sizes.simplify_with_ranges(ModularIndexing(x3, 1, n), {x3: 8}) for n in (4, 16)]
        if cls is VeriShapeEnv:
            assert prover.stats.solver_calls == 0, prover.stats
    assert answers["VeriShapeEnv"] == answers["ShapeEnv"]
    assert answers["ShapeEnv"][1] == x3  # x3 < 16 folds the modulus away


_BOUNDED = st.integers(-6, 12)


@settings(max_examples=150, deadline=None)
@given(lo=_BOUNDED, width=st.integers(0, 9), k=st.integers(-8, 16), m=st.integers(1, 5),
       op=st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
       form=st.sampled_from(["x", "mod", "floordiv", "x+y", "x//y"]))
def test_refutation_at_bounds_agrees_with_the_solver(lo, width, k, m, op, form):
    """Differential: a question over bounded symbols without a witness.  Whatever the first
    tier refutes, the solver (asked without the tier) does not prove, and the point
    satisfies every premise; whatever the solver proves, the tier never refutes."""
    x = sympy.Symbol("x", integer=True)
    y = sympy.Symbol("y", integer=True, positive=True)  # its sign an axiom; its premise 0 <= y left unevaluated
    expr = {"x": x, "mod": sympy.Mod(x, m), "floordiv": FloorDiv(x, m), "x+y": x + y, "x//y": FloorDiv(x, y)}[form]
    target = sympy.Rel(expr, k, op) if op != "!=" else sympy.Ne(expr, k)
    premises = [sympy.Le(lo, x), sympy.Le(x, lo + width), sympy.Le(0, y, evaluate=False), sympy.Lt(y, 3)]
    if target in (sympy.true, sympy.false):
        return
    tier = solvers.Prover(store=None)
    fast = tier.prove(target, premises)
    solver = solvers.Prover(store=None)
    reference = solver._solve(target, tuple(premises), solver.limits)
    if tier.stats.refuted_concretely:
        assert not reference.proved, (target, fast.counterexample)
        point = {x: fast.counterexample["x"], y: fast.counterexample.get("y", 1)}
        assert point[y] >= 1 and concrete.holds(premises, point)
        try:
            assert concrete.evaluate(target, point) is not True
        except concrete.Undefined:
            pass  # undefined at a point of the domain is a refutation too
    if reference.proved:
        assert fast.proved, target
