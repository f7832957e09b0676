"""Proof records: printable, JSON round trip, SMT-LIB, independent re-check."""

from __future__ import annotations

import json

import sympy
from torch.utils._sympy import functions as tf

from verishape import solvers
from verishape.proofs import Obligation, ProofRecord, dump_expr, load_expr

u0 = sympy.Symbol("u0", integer=True, nonnegative=True)
s0 = sympy.Symbol("s0", integer=True, positive=True)
zf = sympy.Symbol("zf0", real=True)


def test_expressions_round_trip_with_assumptions():
    for e in [
        sympy.Eq(tf.Mod(32 * s0, 4096), 0),
        sympy.Le(tf.FloorDiv(u0 + s0, 2), tf.Max(u0, s0)),
        sympy.Lt(tf.TruncToInt(tf.FloatTrueDiv(zf, tf.ToFloat(s0))), 3),
        tf.Where(sympy.Gt(u0, 0), u0, s0) > 1,
    ]:
        back = load_expr(dump_expr(e))
        assert back == e
        assert back.free_symbols == e.free_symbols


def test_record_prints_json_and_rechecks():
    ob = Obligation(sympy.Eq(tf.Mod(32 * s0, 4096), 0), (sympy.Eq(tf.Mod(s0, 64), 0),), kind="divisibility",
                    source="model.py:12")
    rec = solvers.decide(ob)
    assert rec.result.status == "refuted"
    text = str(rec)
    assert "refuted" in text and "s0=" in text and "model.py:12" in text and "divisibility" in text
    data = json.loads(rec.dumps())
    assert data["obligation"]["kind"] == "divisibility"
    back = ProofRecord.loads(rec.dumps())
    assert back == rec
    again = solvers.recheck(back)
    assert again.status == "refuted" and not again.cached
    s0v = again.counterexample["s0"]
    assert s0v % 64 == 0 and (32 * s0v) % 4096 != 0
    assert "(check-sat)" in solvers.smtlib(rec.obligation.goal, rec.obligation.premises)


def test_proved_record_text():
    rec = solvers.decide(Obligation(sympy.Ge(u0 * s0, u0), kind="guard"))
    assert rec.result.status == "proved"
    assert str(rec).startswith("[guard]") and "proved" in str(rec)


# ---------------------------------------------------------------- loading is parsing, never eval

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_translation_differential import bool_tree, environments, float_tree
from torch.utils._sympy.numbers import int_oo

from verishape.solvers import concrete


def _value(expr, env):
    try:
        return concrete.evaluate(expr, env)
    except concrete.Undefined:
        return "undefined"


@settings(max_examples=200)
@given(data=st.data())
def test_every_expression_kind_of_the_differential_tests_round_trips(data):
    """The differential tests build unevaluated trees: they come back with the same
    structure, up to the order of the terms of a sum or product (``srepr`` prints
    them in display order), and so with the same value."""
    env = data.draw(environments())
    expr, _ = data.draw(st.one_of(bool_tree(env, 3), float_tree(env, 2)))
    back = load_expr(dump_expr(expr))
    assert back.free_symbols == expr.free_symbols and back.count_ops() == expr.count_ops()
    got, want = _value(back, env), _value(expr, env)
    both_nan = isinstance(got, float) and isinstance(want, float) and math.isnan(got) and math.isnan(want)
    assert got == want or both_nan, (expr, back)


def test_atoms_and_evaluated_expressions_round_trip():
    dm = sympy.Dummy("d", integer=True)
    for e in [sympy.oo, -sympy.oo, int_oo, -int_oo, sympy.true, sympy.false, sympy.nan, sympy.zoo,
              sympy.Rational(-1, 2), sympy.Float(2.5), sympy.Integer(-5), s0**-1, 2 * u0 + 3 * s0 - 1,
              sympy.Piecewise((u0, u0 > 0), (s0, True)), tf.OpaqueUnaryFn_sqrt(tf.ToFloat(s0)),
              tf.BitwiseFn_bitwise_and(u0, s0), sympy.Eq(tf.PythonMod(u0, s0), 0) | sympy.Ne(dm, 3),
              sympy.Tuple(u0, s0), tf.Max(u0, s0, 3), sympy.Max(u0, s0),
              sympy.Mod(u0 - 7, -3), tf.Mod(u0, s0)]:  # sympy's Mod is Python's %, torch's is not
        back = load_expr(dump_expr(e))
        assert back == e and type(back) is type(e), (e, back)


@pytest.mark.parametrize("text", [
    "__import__('os').system('touch {marker}')",
    "Symbol('x').__class__.__init__.__globals__['os'].system('touch {marker}')",
    "Integer(1).__class__",
    "Symbol('x')(1) if open('{marker}', 'w') else 0",
    "[c for c in ().__class__.__bases__]",
    "lambda: open('{marker}', 'w')",
    "Add(Symbol('x'), '__import__(\"os\").system(\"touch {marker}\")')",
    "sympify('open(\"{marker}\", \"w\")')",
    "Symbol('x', integer=open('{marker}', 'w'))",
    "Function('f')(Symbol('x'))",
    "Symbol('x') + Symbol('y')",
    "x",
])
def test_hostile_srepr_is_refused_without_running(tmp_path, text):
    marker = tmp_path / "ran"
    with pytest.raises(ValueError, match="expression"):
        load_expr(text.format(marker=marker))
    assert not marker.exists()


def test_hostile_record_is_refused(tmp_path):
    ob = Obligation(sympy.Ge(u0 * s0, u0), (sympy.Ge(s0, 1),), kind="guard")
    data = json.loads(solvers.decide(ob).dumps())
    marker = tmp_path / "ran"
    data["obligation"]["goal_srepr"] = f"__import__('os').system('touch {marker}')"
    with pytest.raises(ValueError):
        ProofRecord.loads(json.dumps(data))
    assert not marker.exists()
