"""Theorems and non-theorems of Python's integer semantics, decided by ``verishape.solvers.prove``.

Each refutation's counterexample is checked here again with plain Python arithmetic.
"""

from __future__ import annotations

import math

import pytest
import sympy
from torch.utils._sympy import functions as tf

from verishape import solvers

x = sympy.Symbol("x", integer=True)
y = sympy.Symbol("y", integer=True)
s0 = sympy.Symbol("s0", integer=True, positive=True)
u0 = sympy.Symbol("u0", integer=True, nonnegative=True)
u1 = sympy.Symbol("u1", integer=True, nonnegative=True)
u2 = sympy.Symbol("u2", integer=True, nonnegative=True)
zf = sympy.Symbol("zf0", real=True)
Eq, Ne, Lt, Le, Gt, Ge = sympy.Eq, sympy.Ne, sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge


def _proved(goal, *assumptions):
    r = solvers.prove(goal, assumptions)
    assert r.status == "proved", (goal, assumptions, r)
    assert not r.vacuous
    return r


def _refuted(goal, *assumptions, check=None):
    r = solvers.prove(goal, assumptions)
    assert r.status == "refuted", (goal, assumptions, r)
    if check is not None:
        assert check(r.counterexample), r.counterexample
    return r


# ---------------------------------------------------------------- floor division


def test_floordiv_rounds_toward_negative_infinity():
    _proved(Eq(tf.FloorDiv(x, 2), -4), Eq(x, -7))
    _proved(Eq(tf.FloorDiv(x, -2), 3), Eq(x, -7))
    _proved(Eq(tf.FloorDiv(x, -2), -4), Eq(x, 7))


def test_floordiv_reconstruction_identity_needs_nonzero_divisor():
    goal = Eq(tf.FloorDiv(x, y) * y + tf.PythonMod(x, y), x)
    _proved(goal, Ne(y, 0))
    r = _refuted(goal, check=lambda c: c["y"] == 0)
    assert r.undefined_goal


def test_floordiv_bounds():
    _proved(Le(tf.FloorDiv(x, y) * y, x), Gt(y, 0))
    _proved(Ge(tf.FloorDiv(x, y) * y, x), Lt(y, 0))
    _refuted(Le(tf.FloorDiv(x, y) * y, x), Lt(y, 0), check=lambda c: (c["x"] // c["y"]) * c["y"] > c["x"])


def test_floordiv_is_not_truncation():
    # C-style truncation differs from floor for negative quotients.
    goal = Eq(tf.FloorDiv(x, y), tf.TruncToInt(tf.IntTrueDiv(x, y)))
    _proved(Eq(tf.FloorDiv(x, 4), tf.TruncToInt(x / 4)), Ge(x, 0))
    _refuted(Eq(tf.FloorDiv(x, 4), tf.TruncToInt(x / 4)), check=lambda c: c["x"] // 4 != math.trunc(c["x"] / 4))
    _refuted(goal, Eq(x, -7), Eq(y, 2), check=lambda c: c["x"] // c["y"] != math.trunc(c["x"] / c["y"]))


def test_ceil_division():
    ceil = -tf.FloorDiv(-x, y)
    _proved(Eq(ceil, tf.FloorDiv(x + y - 1, y)), Gt(y, 0))
    _proved(Ge(ceil * y, x), Gt(y, 0))
    _refuted(Eq(ceil, tf.FloorDiv(x + y - 1, y)), Lt(y, 0),
             check=lambda c: -((-c["x"]) // c["y"]) != (c["x"] + c["y"] - 1) // c["y"])


# ---------------------------------------------------------------- modulo


def test_python_mod_takes_sign_of_divisor():
    _proved(Eq(tf.PythonMod(x, 3), 2), Eq(x, -7))
    _proved(Eq(tf.PythonMod(x, -3), -2), Eq(x, 7))
    assert 7 % -3 == -2 and -7 % 3 == 2
    _proved(And_(Le(tf.PythonMod(x, y), 0), Gt(tf.PythonMod(x, y), y)), Lt(y, 0))
    _proved(And_(Ge(tf.PythonMod(x, y), 0), Lt(tf.PythonMod(x, y), y)), Gt(y, 0))


def And_(*args):
    return sympy.And(*args)


def test_python_mod_negative_divisor_non_theorem():
    _refuted(Ge(tf.PythonMod(x, y), 0), Ne(y, 0), check=lambda c: c["x"] % c["y"] < 0)


def test_modulo_by_zero_is_never_proved():
    r = solvers.prove(Eq(tf.PythonMod(x, y), tf.PythonMod(x, y), evaluate=False), [Ge(y, 0)])
    assert r.status == "refuted" and r.undefined_goal and r.counterexample["y"] == 0


def test_torch_mod_domain_is_a_side_condition():
    # torch's Mod wants a non-negative dividend: x = -1 makes the goal undefined.
    r = _refuted(Ge(tf.Mod(x, 4), 0, evaluate=False))
    assert r.undefined_goal and r.counterexample["x"] < 0
    _proved(Ge(tf.Mod(u0, 4), 0))


def test_mod_implication_through_multiples():
    _proved(Eq(tf.Mod(u0, 3), 0), Eq(tf.Mod(u0, 6), 0))
    _refuted(Eq(tf.Mod(u0, 6), 0), Eq(tf.Mod(u0, 3), 0), check=lambda c: c["u0"] % 6 != 0 and c["u0"] % 3 == 0)


def test_modular_indexing():
    _proved(Lt(tf.ModularIndexing(u0, 4, 8), 8))
    _proved(Eq(tf.ModularIndexing(u0, 1, s0), tf.Mod(u0, s0)))
    r = _refuted(Lt(tf.ModularIndexing(x, 4, 8), 8))
    assert r.undefined_goal


def test_clean_div_requires_exact_division():
    _proved(Eq(tf.CleanDiv(4 * u0, 4), u0))
    r = _refuted(Eq(tf.CleanDiv(u0, 4) * 4, u0))
    assert r.undefined_goal and r.counterexample["u0"] % 4 != 0


# ---------------------------------------------------------------- divisibility


def test_divisibility_of_scaled_symbol():
    premise = Eq(tf.PythonMod(x, 64), 0)
    _proved(Eq(tf.PythonMod(32 * x, 1024), 0), premise)
    _refuted(Eq(tf.PythonMod(32 * x, 4096), 0), premise, check=lambda c: (32 * c["x"]) % 4096 != 0 and c["x"] % 64 == 0)


@pytest.mark.parametrize("k,m,expected", [(128, 4096, "proved"), (64, 4096, "refuted"), (16, 512, "proved"), (3, 6, "proved"), (3, 9, "refuted")])
def test_divisibility_table(k, m, expected):
    r = solvers.prove(Eq(tf.Mod(32 * s0, m), 0), [Eq(tf.Mod(s0, k), 0)])
    assert r.status == expected


# ---------------------------------------------------------------- truncation and rounding


def test_trunc_of_negative_float_rounds_toward_zero():
    _proved(Eq(tf.TruncToInt(zf), -2), Eq(zf, -2.5))
    _proved(Eq(tf.FloorToInt(zf), -3), Eq(zf, -2.5))
    _proved(Eq(tf.CeilToInt(zf), -2), Eq(zf, -2.5))
    # torch's own validator encodes TruncToInt as floor; that is false here.
    _refuted(Eq(tf.TruncToInt(zf), tf.FloorToInt(zf)), Lt(zf, 0.0), Gt(zf, -3.0),
             check=lambda c: math.trunc(c["zf0"]) != math.floor(c["zf0"]))


def test_round_half_to_even():
    for value, rounded in [(0.5, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (-2.5, -2), (2.6, 3)]:
        _proved(Eq(tf.RoundToInt(zf), rounded), Eq(zf, value))
        assert round(value) == rounded


def test_round_of_int_true_div():
    _proved(Eq(tf.RoundToInt(tf.IntTrueDiv(x, 2)), -2), Eq(x, -5))
    _proved(Eq(tf.RoundToInt(tf.IntTrueDiv(x, 2)), 2), Eq(x, 5))


def test_int_true_div_is_correctly_rounded_and_exact_compare():
    big = 2**53 + 1
    # float(2**53 + 1) rounds to 2**53, and Python compares int with float exactly.
    _proved(Ne(tf.ToFloat(x), x), Eq(x, big))
    _proved(Eq(tf.IntTrueDiv(x, 1), 2.0**53), Eq(x, big))


#: IEEE terms bit-blast; give these semantic checks more than the compile-path default.
#: The resource limit decides; the wall-clock backstop is far away so that a loaded CI
#: machine (the division query takes about 4 s) gets the same answer as an idle one.
FLOAT_PROVER = solvers.Prover(solvers.Limits(rlimit=20_000_000, timeout_ms=600_000))


def test_int_to_float_overflow_is_undefined():
    r = FLOAT_PROVER.prove(Gt(tf.ToFloat(x), 0.0), [Gt(x, 2**1100)])
    assert r.status == "refuted" and r.undefined_goal


def test_float_division_by_zero_is_undefined():
    r = FLOAT_PROVER.prove(Ge(tf.FloatTrueDiv(2.0, zf), 0.0), [Eq(zf, 0.0)])
    assert r.status == "refuted" and r.undefined_goal


def test_float_equality_with_constants_is_ieee():
    # A pinned non-zero value is substituted (fast); signed zeros still compare equal.
    assert FLOAT_PROVER.prove(Eq(tf.FloatTrueDiv(zf, 2.0), 1.25), [Eq(zf, 2.5)]).status == "proved"
    assert FLOAT_PROVER.prove(Eq(zf, 0.0), [Eq(zf, -0.0)]).status == "proved"
    r = FLOAT_PROVER.prove(sympy.Not(Eq(zf, 2.5)), [Ge(zf, 2.0), Le(zf, 3.0)])
    assert r.status == "refuted" and r.counterexample["zf0"] == 2.5


def test_nan_is_not_ordered():
    # zf0 has no sign assumption: it may be NaN, so trichotomy is not a theorem.
    # (sympy itself would fold "zf < 1 or zf >= 1" to True, so use overlapping halves.)
    r = _refuted(sympy.Or(Lt(zf, 1.0), Ge(zf, 0.5)), check=lambda c: math.isnan(c["zf0"]))
    assert not r.undefined_goal


# ---------------------------------------------------------------- the DDE examples


def test_data_dependent_examples():
    _proved(Ge(u0 * u1, u0), Ge(u1, 1))
    _proved(Le(tf.FloorDiv(u0 + u1, 2), sympy.Max(u0, u1)))
    _proved(Le(u0 * u1, 64), Le(u0, 8), Le(u1, 8))
    _proved(Le(u0, u2), Le(u0, u1), Le(u1, u2))
    _refuted(Le(u0 * u1, 63), Le(u0, 8), Le(u1, 8), check=lambda c: c["u0"] * c["u1"] == 64)


def test_min_max_where_piecewise_abs():
    _proved(Le(tf.Min(x, y), tf.Max(x, y)))
    _proved(Eq(tf.Where(Gt(x, 0), x, -x), sympy.Abs(x)))
    _proved(Ge(sympy.Piecewise((x, Gt(x, 0)), (-x, True)), 0))


def test_where_branch_guards_side_condition():
    # The division only happens on the branch where y != 0.
    _proved(Ge(tf.Where(Ne(y, 0), tf.PythonMod(u0, sympy.Abs(y)) , 0), 0))


def test_pow_by_natural_and_shifts():
    _proved(Eq(tf.PowByNatural(2, u0), 8), Eq(u0, 3))
    _proved(Eq(tf.LShift(x, u0), 4 * x), Eq(u0, 2))
    _proved(Eq(tf.RShift(x, u0), tf.FloorDiv(x, 4)), Eq(u0, 2))
    r = solvers.prove(Eq(tf.PowByNatural(2, x), 1), [Eq(x, -1)])
    assert r.status == "refuted" and r.undefined_goal


def test_vacuous_proof_is_marked():
    r = solvers.prove(Gt(x, 100), [Gt(x, 5), Lt(x, 3)])
    assert r.status == "proved" and r.vacuous


def test_opaque_terms_never_prove_by_accident():
    f = tf.OpaqueUnaryFn_sqrt(zf)
    r = solvers.prove(Ge(f, 0.0), [Ge(zf, 0.0)])
    assert r.status == "unknown"  # we do not model sqrt; a model cannot be confirmed
    r = solvers.prove(Eq(f, f, evaluate=False), [])
    assert r.status != "proved"  # even reflexivity: sqrt may raise


# ---------------------------------------------------------------- bitwise operators


AND, OR, XOR = tf.BitwiseFn_bitwise_and, tf.BitwiseFn_bitwise_or, tf.BitwiseFn_bitwise_xor


def test_bitwise_is_python_on_negative_and_wide_operands():
    _proved(Eq(AND(x, y), -3 & 10), Eq(x, -3), Eq(y, 10))
    _proved(Eq(OR(x, y), -3 | -10), Eq(x, -3), Eq(y, -10))
    _proved(Eq(XOR(x, y), (2**90 + 5) ^ 6), Eq(x, 2**90 + 5), Eq(y, 6))  # one operand is small
    _refuted(Eq(AND(x, y), 8), Ge(x, 2), Ge(y, 2), check=lambda c: c["x"] & c["y"] != 8)


def test_bitwise_with_a_literal_mask_holds_for_every_integer():
    # The mask's high part is 0 or -1, so the encoding is exact for unbounded x.
    _proved(Le(AND(x, 255), 255))
    _proved(Ge(AND(x, 255), 0))
    _proved(Eq(AND(x + 7, -8), x + 7 - tf.PythonMod(x + 7, 8)))
    _proved(Eq(XOR(x, -1), -x - 1))


def test_bitwise_bounds_without_searching_bits():
    _proved(Le(AND(u0, u1), u0))
    _proved(Ge(OR(u0, u1), sympy.Max(u0, u1)))
    _proved(Lt(AND(x, y), 0), Lt(x, 0), Lt(y, 0))


def test_bitwise_bound_facts_hold_for_python_ints():
    """The facts stated beside every bitwise term, checked against Python itself."""
    import operator

    import z3

    from verishape.solvers import pyarith

    for op, fn in (("and", operator.and_), ("or", operator.or_), ("xor", operator.xor)):
        for a in range(-40, 41, 3):
            for b in range(-40, 41, 7):
                facts = pyarith.bitwise_bounds(op, z3.IntVal(a), z3.IntVal(b), z3.IntVal(fn(a, b)))
                assert z3.is_true(z3.simplify(z3.And(*facts))), (op, a, b)


def test_bitwise_query_is_decided_by_the_rlimit_not_the_clock():
    """Note [Same program, same answer] (docs/architecture.md): torch's ``a & b == 8`` guard
    query on two sizes used to run 2-6 s until a limit stopped it, so load could change the
    answer.  It must finish far inside the wall-clock backstop, with the same answer when
    the backstop is out of reach."""
    from verishape.proofs.result import Limits

    a = sympy.Symbol("s0", integer=True, positive=True)
    b = sympy.Symbol("s1", integer=True, positive=True)
    queries = [
        (Eq(AND(a, b), 8), [Ge(a, 2), Ge(b, 2)]),  # stock's guard, asked as a proof
        (Ne(AND(x, y), 8), []),  # a search over unbounded operands
    ]
    for goal, premises in queries:
        normal = solvers.Prover(Limits())
        patient = solvers.Prover(Limits(timeout_ms=10**8))
        first = normal.prove(goal, premises)
        second = patient.prove(goal, premises)
        assert first.time_s < Limits().timeout_ms / 1000 / 5, (goal, first)
        assert (first.status, first.counterexample, first.reason) == \
            (second.status, second.counterexample, second.reason)
        assert "timeout" not in first.reason and normal.stats.wall_clock_stops == 0


def test_symint_bitwise_guard_is_cheap_in_verishape_env():
    """In the spirit of PyTorch's ``test_symint_bitwise_and``: the guard stock installs
    for ``a & b`` on two sizes is installed the same way, and deciding costs far less
    than the wall-clock backstop."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    from verishape.core.shape_env import VeriShapeEnv

    def run(cls):
        env = cls()
        a, b = (env.create_symintnode(env.create_symbol(v, source=ConstantSource(f"v{v}"),
                                                        dynamic_dim=DimDynamic.DUCK), hint=v)
                for v in (0b1100, 0b1010))
        assert (a & b) == 0b1000
        return env

    stock, ours = run(ShapeEnv), run(VeriShapeEnv)
    assert [str(g.expr) for g in ours.guards] == [str(g.expr) for g in stock.guards]
    assert ours.verishape_log.solver_time_s < 1.0
