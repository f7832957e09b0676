"""Proof records: printable, JSON round trip, SMT-LIB, independent re-check."""

from __future__ import annotations

import json

import sympy
from torch.utils._sympy import functions as tf

from proofs import Obligation, ProofRecord, dump_expr, load_expr

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
    rec = ProofRecord.decide(ob)
    assert rec.result.status == "refuted"
    text = str(rec)
    assert "refuted" in text and "s0=" in text and "model.py:12" in text and "divisibility" in text
    data = json.loads(rec.dumps())
    assert data["obligation"]["kind"] == "divisibility"
    back = ProofRecord.loads(rec.dumps())
    assert back == rec
    again = back.recheck()
    assert again.status == "refuted" and not again.cached
    s0v = again.counterexample["s0"]
    assert s0v % 64 == 0 and (32 * s0v) % 4096 != 0
    assert "(check-sat)" in rec.to_smtlib()


def test_proved_record_text():
    rec = ProofRecord.decide(Obligation(sympy.Ge(u0 * s0, u0), kind="guard"))
    assert rec.result.status == "proved"
    assert str(rec).startswith("[guard]") and "proved" in str(rec)
