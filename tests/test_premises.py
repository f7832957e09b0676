"""Premises come from ranges and recorded facts, never from a SymPy assumption a range
contradicts (issue 10, item 7).

Under ``backed_size_oblivious`` a backed size ranges over ``[0, oo)`` while its SymPy
symbol is still declared ``positive``; the solver must not read that declaration as
``s >= 1``.
"""

from __future__ import annotations

import pytest
import sympy
import torch
import torch.fx.experimental._config as fx_config
from torch._dynamo.source import ConstantSource
from torch.fx.experimental.symbolic_shapes import DimDynamic
from torch.utils._sympy import functions as tf

from verishape import solvers
from verishape.core import premises as premises_mod
from verishape.core.shape_env import VeriShapeEnv

from compile_helpers import stock, vs
from test_verify_guards import audit

s = sympy.Symbol("s0", integer=True, positive=True)
t = sympy.Symbol("s1", integer=True, positive=True)


# ---------------------------------------------------------------- the shared renaming


def test_plain_symbols_only_where_a_range_is_known():
    mapping = premises_mod.plain_symbols([sympy.Gt(s, 1), sympy.Gt(t, 1)], ranged={s})
    assert set(mapping) == {s}
    plain = mapping[s]
    assert plain.name == "s0" and plain.is_integer and plain.is_positive is None
    # The plain symbol carries no sign: only a premise can bound it.
    assert solvers.prove(sympy.Gt(s, 1), [sympy.Ne(s, 1)]).proved  # what SymPy's assumption gives
    goal, premise = (e.xreplace(mapping) for e in (sympy.Gt(s, 1), sympy.Ne(s, 1)))
    r = solvers.prove(goal, [premise, sympy.Le(0, plain)])
    assert r.refuted and r.counterexample == {"s0": 0}


def test_plain_symbols_refuse_to_merge_two_symbols():
    twin = sympy.Symbol("s0", integer=True)  # the plain name is taken by another symbol
    assert premises_mod.plain_symbols([sympy.Gt(s, twin)], ranged={s, twin}) is None


# ---------------------------------------------------------------- VeriShapeEnv's queries


def _env_with_size(hint: int) -> tuple[VeriShapeEnv, sympy.Symbol]:
    """A backed size created the way torch creates one under backed_size_oblivious."""
    env = VeriShapeEnv()
    sym = env.create_symbol(hint, source=ConstantSource("n"), dynamic_dim=DimDynamic.DYNAMIC,
                            do_not_specialize_zero_one=True)
    env.size_like.add(sym)
    return env, sym


def test_decide_takes_the_sign_from_the_range_not_the_assumption():
    with fx_config.patch(backed_size_oblivious=True):
        env, n = _env_with_size(3)
        assert n.is_positive and env.var_to_range[n].lower == 0  # the premise: the range
        env.evaluate_expr(sympy.Ne(n, 1))  # installs Ne(n, 1)
        assert env._maybe_evaluate_static(sympy.Gt(n, 1)) is None  # n = 0 is possible
        # With a fact that excludes 0, the same question is provable from the range.
        env.evaluate_expr(sympy.Ne(tf.FloorDiv(n, 3) + tf.PythonMod(n, 3), 0))
        assert env._maybe_evaluate_static(sympy.Gt(n, 1)) is sympy.true
        rec = env.verishape_log.records[-1]
        assert sympy.Le(0, sympy.Symbol(n.name, integer=True)) in rec.obligation.premises


def test_premises_keep_the_range_lower_bound():
    with fx_config.patch(backed_size_oblivious=True):
        env, n = _env_with_size(5)
        premises = env._premises(sympy.Gt(n, 1), "guard_avoided", None, None, False)
        plain = premises.to_plain[n]
        assert plain.name == n.name and plain.is_positive is None
        # SymPy folds 0 <= n to True for a positive n: the fact must be stated on the plain symbol.
        assert sympy.Le(0, n) is sympy.true and sympy.Le(0, plain) in premises.facts
        assert premises.witness == {plain: 5}  # the size hint, keyed by the plain symbol


# ---------------------------------------------------------------- the one ask


x = sympy.Symbol("x", integer=True)
y = sympy.Symbol("y", integer=True)


def test_ask_returns_a_record_only_for_a_proof():
    prover = solvers.Prover(store=None)
    premises = premises_mod.Premises([sympy.Ge(x, 3)], witness={x: 4})
    record = premises.ask(sympy.Gt(x, 2), "audit", where="here", prover=prover)
    assert record is not None and record.result.proved and record.decided is True
    assert record.obligation.premises == (sympy.Ge(x, 3),) and record.obligation.source == "here"
    # refuted by the first tier at a point near the witness: no record, no solver call
    calls = prover.stats.solver_calls
    assert premises.ask(sympy.Gt(x, 3), "audit", prover=prover) is None
    assert prover.stats.solver_calls == calls and prover.stats.refuted_concretely == 1
    # decide keeps the refutation, with a counterexample that satisfies the premises
    refuted = premises.decide(sympy.Gt(x, 3), "audit", prover=prover).result
    assert refuted.refuted and refuted.counterexample["x"] >= 3 and not refuted.counterexample["x"] > 3


def test_a_vacuous_proof_is_no_proof_and_says_the_premises_are_contradictory():
    premises = premises_mod.Premises([sympy.Ge(x, 3), sympy.Le(x, 2)])
    prover = solvers.Prover(store=None)
    assert premises.ask(sympy.Eq(x, 7), "audit", prover=prover) is None
    answer = premises.answer(sympy.Eq(x, 7), "audit", prover=prover)
    assert answer.verdict is premises_mod.Verdict.CONTRADICTORY and answer.record is None
    # consistent premises: proved with its record, or open
    ok = premises_mod.Premises([sympy.Ge(x, 3)], witness={x: 4})
    proved = ok.answer(sympy.Gt(x, 2), "audit", prover=prover)
    assert proved.verdict is premises_mod.Verdict.PROVED and proved.record is not None
    assert ok.answer(sympy.Gt(x, 5), "audit", prover=prover).verdict is premises_mod.Verdict.OPEN


def test_assuming_binds_facts_for_one_block():
    premises = premises_mod.Premises.stated([sympy.Ge(x, 0)])
    prover = solvers.Prover(store=None)
    with premises.assuming(sympy.Ge(y, x), sympy.Ge(x, 5)):
        assert premises.ask(sympy.Ge(y, 5), "audit", prover=prover) is not None
    assert premises.facts == [sympy.Ge(x, 0)]
    assert premises.ask(sympy.Ge(y, 5), "audit", prover=prover) is None


def test_gather_keeps_connected_facts_and_states_ranges_on_plain_symbols():
    from torch.utils._sympy.value_ranges import ValueRanges

    goal, linked, apart = sympy.Gt(s, 1), sympy.Ge(s, t), sympy.Eq(sympy.Symbol("u0", integer=True), 3)
    premises = premises_mod.Premises.gather(goal, [linked, apart], {s: ValueRanges(0, 10), t: ValueRanges(2, 10)},
                                            hints={s: 4, t: 3})
    ps, pt = premises.to_plain[s], premises.to_plain[t]
    assert premises.facts == [sympy.Ge(ps, pt), sympy.Le(0, ps), sympy.Le(ps, 10), sympy.Le(2, pt), sympy.Le(pt, 10)]
    assert premises.witness == {ps: 4, pt: 3}
    assert premises.ask(goal, "audit", prover=solvers.Prover(store=None)) is not None


def test_a_bare_size_is_not_a_question_for_the_solver():
    # sympy.Symbol subclasses Boolean; Inductor passes bare sizes through static evaluation.
    env, n = _env_with_size(5)
    before = env.verishape_log.undecided, len(env.verishape_log.records)
    assert env._maybe_evaluate_static(n) is None
    assert (env.verishape_log.undecided, len(env.verishape_log.records)) == before  # never asked


# ---------------------------------------------------------------- end to end


def branchy(x):
    if x.shape[0] == 1:
        return torch.cat([x, torch.full((1,), 10.0)])
    if x.shape[0] > 1:
        return torch.cat([x, torch.full((1,), 20.0)])
    return torch.cat([x, torch.full((1,), 30.0)])


def test_backed_size_oblivious_keeps_the_size_guard():
    # Traced at 3: stock installs Ne(s, 1) and s > 1, so sizes 0 and 1 recompile.
    inputs = [(torch.ones(3),), (torch.ones(0),), (torch.ones(1),)]
    with fx_config.patch(backed_size_oblivious=True):
        ref = stock(branchy, inputs)
        got = vs(branchy, inputs)
    assert ref.results == ["ok", "ok", "ok"]
    assert got.results == ref.results
    assert len(got.envs) == len(ref.envs) == 3
    first = got.envs[0]
    n = next(iter(first.var_to_range))
    installed = [first.replace(g.expr) for g in first.guards]
    assert any(g.xreplace({n: 0}) is sympy.false for g in installed), installed


# ---------------------------------------------------------------- the audit


def test_audit_finds_a_counterexample_at_size_zero(tmp_path):
    proc, report = audit("zero_blocks.py", "--assume", "0 <= x.size(0) <= 64", tmp_path=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    f = next(x for x in report["findings"] if x["kind"] == "guard_not_implied")
    assert "//4" in f["guard"].replace(" ", "")
    assert f["counterexample"] == {"L['x'].size()[0]": 0}


def test_decision_and_asker_kinds_are_one_vocabulary_each():
    """Every decision kind the code passes is a :class:`Decision` (an unknown one is a bug,
    raised where it is passed), every asker an :class:`Asker`; both store as plain strings
    and print as their value."""
    import json

    from verishape.core.decisions import KINDS
    from verishape.proofs.kinds import Asker, Decision

    x = sympy.Symbol("x", integer=True)
    premises = premises_mod.Premises([sympy.Ge(x, 3)])
    with pytest.raises(ValueError, match="this is a verishape bug"):
        premises.ask(sympy.Gt(x, 2), "guard_avoidde", prover=solvers.Prover(store=None))
    record = premises.ask(sympy.Gt(x, 2), Decision.GUARD_DROPPED, prover=solvers.Prover(store=None))
    assert type(record.obligation.kind) is str and record.obligation.kind == "guard_dropped"
    assert json.loads(record.dumps())["obligation"]["kind"] == "guard_dropped"
    assert set(KINDS) == {str(k) for k in Decision} and all(KINDS.values())
    assert f"{Decision.AUDIT}|{Asker.FUZZ}" == "audit|fuzz"
    with pytest.raises(ValueError, match="this is a verishape bug"):
        with solvers.asked_by("someone"):
            pass


def test_a_traces_entry_as_premises_in_another_traces_symbols():
    """``Premises.of_trace``: the guards (as replacements leave them) and ranges a trace's
    entry checks, renamed into another trace's symbols, its hints as the witness, over plain
    symbols that cover the goals asked later too."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic
    from torch._dynamo.source import LocalSource, TensorProperty, TensorPropertySource

    from verishape.core.shape_env import VeriShapeEnv

    env = VeriShapeEnv()
    src = TensorPropertySource(LocalSource("x"), TensorProperty.SIZE, 0)
    a = env.create_symbol(6, src, DimDynamic.DYNAMIC)
    n = env.create_symintnode(a, hint=6, source=src)
    assert bool(n % 3 == 0)  # a guard the entry checks
    generic = sympy.Symbol("g0", integer=True, positive=True)
    premises = premises_mod.Premises.of_trace(env, {a: generic}, [sympy.Gt(generic, 4)])
    plain = premises.to_plain[generic]
    assert plain.name == "g0" and plain.is_positive is None  # the sign comes from the range, not SymPy
    assert premises.witness == {plain: 6}
    assert any(f.has(plain) and "Mod" in str(f) for f in premises.facts)
    prover = solvers.Prover(store=None)
    assert premises.ask(sympy.Eq(sympy.Mod(generic, 3), 0), "audit", prover=prover) is not None
    assert premises.ask(sympy.Gt(generic, 4), "audit", prover=prover) is None  # 3 satisfies the facts
