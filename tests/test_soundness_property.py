"""Wherever VeriShapeEnv answers a query, brute force over the domain agrees.

Hypothesis draws unbacked symbols with small ranges, facts registered as runtime asserts
(as ``torch._check`` does) and a query; we ask the env through its static-evaluation
choke point and, whenever it answers, enumerate every assignment in the domain that
satisfies the facts and check the query has that value at each one.
"""

from __future__ import annotations

import itertools

import sympy
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy import functions as tf
from torch.utils._sympy.value_ranges import ValueRanges

from verishape.core.shape_env import VeriShapeEnv

DOMAIN = 6  # each symbol ranges over 0..DOMAIN


@st.composite
def terms(draw, syms, depth=2):
    leaf = st.one_of(st.sampled_from(syms), st.integers(0, 4).map(sympy.Integer))
    if depth == 0:
        return draw(leaf)
    kind = draw(st.sampled_from(["leaf", "add", "mul", "floordiv", "mod", "max", "min", "sub"]))
    if kind == "leaf":
        return draw(leaf)
    a = draw(terms(syms, depth - 1))
    if kind in ("floordiv", "mod"):
        k = draw(st.integers(1, 4))
        return tf.FloorDiv(a, k) if kind == "floordiv" else tf.Mod(a, k) if a.is_nonnegative else tf.PythonMod(a, k)
    b = draw(terms(syms, depth - 1))
    return {"add": a + b, "mul": a * b, "sub": a - b, "max": tf.Max(a, b), "min": tf.Min(a, b)}[kind]


@st.composite
def relations(draw, syms):
    op = draw(st.sampled_from([sympy.Eq, sympy.Ne, sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge]))
    return op(draw(terms(syms)), draw(terms(syms)))


def _value(expr, env):
    v = expr.xreplace({s: sympy.Integer(x) for s, x in env.items()})
    assert v in (sympy.true, sympy.false), (expr, env, v)
    return v is sympy.true


@settings(max_examples=150)
@given(data=st.data())
def test_every_answer_agrees_with_brute_force(data):
    env = VeriShapeEnv()
    n = data.draw(st.integers(1, 3))
    syms = [env.create_unbacked_symint().node.expr for _ in range(n)]
    for s in syms:
        env.var_to_range[s] = ValueRanges(0, DOMAIN)
    for fact in data.draw(st.lists(relations(syms), max_size=3)):
        if fact in (sympy.true, sympy.false):
            continue
        try:
            env.guard_or_defer_runtime_assert(fact, "test fact")
        except Exception:  # noqa: BLE001 - a fact torch rejects outright is no fact
            pass
    query = data.draw(relations(syms))
    assume(query not in (sympy.true, sympy.false))
    answer = env._maybe_evaluate_static(query)
    if answer is None or answer not in (sympy.true, sympy.false):
        return
    facts = [ra.expr for ras in env.deferred_runtime_asserts.values() for ra in ras]
    for values in itertools.product(range(DOMAIN + 1), repeat=n):
        point = dict(zip(syms, values))
        point = {s: v for s, v in point.items()}
        try:
            if not all(_value(f, point) for f in facts):
                continue
            # replacements torch derived from the facts must hold at real points too
            if not all(int(env.replacements[s].xreplace({k: sympy.Integer(v) for k, v in point.items()})) == point[s]
                       for s in syms if s in env.replacements and env.replacements[s].free_symbols <= set(point)):
                continue
            got = _value(query, point)
        except (ZeroDivisionError, AssertionError, TypeError):
            continue
        assert got == (answer is sympy.true), (query, facts, point, answer)


def test_property_exercises_the_solver():
    """Guard against a vacuous property: the env must actually answer some queries that
    stock leaves open."""
    env = VeriShapeEnv()
    u0, u1 = (env.create_unbacked_symint().node.expr for _ in range(2))
    for s in (u0, u1):
        env.var_to_range[s] = ValueRanges(0, DOMAIN)
    env.guard_or_defer_runtime_assert(sympy.Ge(u1, 1), "fact")
    q = sympy.Ge(u0 * u1, u0)
    assert ShapeEnv._maybe_evaluate_static(env, q) is None
    assert env._maybe_evaluate_static(q) is sympy.true


def test_asserts_emitted_later_never_discharge_an_earlier_assert():
    """Note [Asserts see only the past]: ``u0 * u1 <= 5`` runs where u1 is bound, after u0's asserts, so it may not
    discharge ``u0 <= 5`` even though (with u1 >= 1) it implies it."""
    env = VeriShapeEnv()
    u0, u1 = (env.create_unbacked_symint().node.expr for _ in range(2))
    env.var_to_range[u0] = ValueRanges(0, 1000)
    env.var_to_range[u1] = ValueRanges(1, 1000)
    env.guard_or_defer_runtime_assert(sympy.Le(u0 * u1, 5), "later fact")
    assert env.var_to_range[u0].upper > 5  # stock range analysis did not narrow u0
    env.guard_or_defer_runtime_assert(sympy.Le(u0, 5), "earlier assert")
    kept = [str(ra.expr) for ras in env.deferred_runtime_asserts.values() for ra in ras]
    assert "u0 <= 5" in kept, kept
    # The same question asked as a guard after tracing may use every fact.
    assert env._maybe_evaluate_static(sympy.Le(u0, 5)) is sympy.true
