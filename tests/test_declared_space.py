"""The declared input space of ``verishape verify-guards`` must exist (issue 10, item 3).

An empty or undefined space makes every guard "implied" vacuously, so it is a usage error;
an ``--assume`` about an input the script never compiles with is an error too; equivalent
facts give the same space; and a proof that holds only because its premises contradict each
other is reported, never counted as "implied".
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import sympy
import torch

from verishape import solvers
from verishape.audit.space import bounds_from_assumption, parse_assumption
from verishape.core.errors import UsageError

from audit_helpers import X0, audit_in_process


audit = audit_in_process


def one_error_line(err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("verishape: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


# ------------------------------------------------------------------ empty / undefined space


@pytest.mark.parametrize("facts, named", [
    (["x.size(0) >= 8", "x.size(0) <= 4"], ["x.size(0) >= 8", "x.size(0) <= 4"]),
    (["x.size(0) < 4 and x.size(0) > 4"], ["x.size(0) < 4 and x.size(0) > 4"]),
    (["x.size(0) // 0 == 1"], ["x.size(0) // 0 == 1"]),
    (["x.size(0) % 0 == 1"], ["x.size(0) % 0 == 1"]),
    (["x.size(0) % (3 - 3) == 1"], ["x.size(0) % (3 - 3) == 1"]),
])
def test_contradictory_or_undefined_facts_are_refused_before_running(facts, named, capsys, tmp_path):
    status, report, out, err = audit(capsys, tmp_path, "clean.py", *facts)
    assert status == 2 and report is None
    line = one_error_line(err)
    assert all(n in line for n in named), line
    assert "running" not in err  # refused before the script ran


def test_space_empty_with_the_scripts_own_declaration(capsys, tmp_path):
    # clean.py declares mark_dynamic(min=2, max=64): the fact alone is fine, together they are empty.
    status, report, out, err = audit(capsys, tmp_path, "clean.py", "x.size(0) >= 100")
    assert status == 2
    line = one_error_line(err)
    assert "empty" in line and "x.size(0) >= 100" in line and "mark_dynamic(min=2, max=64)" in line, line


def test_divisor_that_may_be_zero_in_the_space_is_refused(capsys, tmp_path):
    # x.size(0) - 8 is 0 at x.size(0) = 8, inside the declared [2, 64]: the fact is undefined there.
    status, report, out, err = audit(capsys, tmp_path, "clean.py", "x.size(0) % (x.size(0) - 8) == 1")
    assert status == 2
    line = one_error_line(err)
    assert "zero" in line and "x.size(0) % (x.size(0) - 8) == 1" in line, line


@pytest.mark.parametrize("fact, missing", [
    ("y.size(0) >= 3", "L['y'].size()[0]"),   # no input y
    ("x.size(1) >= 3", "L['x'].size()[1]"),   # x has a dimension 1, but it is static
])
def test_assume_about_an_input_no_frame_compiles_with_is_an_error(fact, missing, capsys, tmp_path):
    status, report, out, err = audit(capsys, tmp_path, "clean.py", fact)
    assert status == 2
    line = one_error_line(err)
    assert missing in line and fact in line, line


# ------------------------------------------------------------------ equivalent facts


def _space_and_verdicts(report: dict) -> tuple:
    frame = report["frames"][0]
    # The origin in parentheses names the --assume text, which differs by construction.
    declared = [re.sub(r"\s+\(.*\)$", "", d) for d in frame["declared_space"]]
    guards = [(g["guard"], g["status"]) for g in frame["guards"]]
    findings = [(f["kind"], f["guard"]) for f in report["findings"]]
    return declared, guards, findings, report["summary"]["exit_status"]


def test_equivalent_facts_give_the_same_space_and_report(capsys, tmp_path):
    forms = ["x.size(0) >= 17", "17 <= x.size(0)", "x.size(0) > 16", "not x.size(0) < 17",
             "x.size(0) >= 17 and x.size(0) >= 2", "2 * x.size(0) >= 34"]
    seen = []
    for form in forms:
        status, report, out, err = audit(capsys, tmp_path, "deploy_skip_guards.py", form)
        assert status == 0, (form, out, err)
        seen.append(_space_and_verdicts(report))
    assert all(s == seen[0] for s in seen), seen
    assert seen[0][0] == [f"17 <= {X0}"]
    assert seen[0][1] == [(f"{X0} > 16", "implied")]


def test_bounds_of_equivalent_facts_are_equal():
    forms = ["x.size(0) >= 4", "4 <= x.size(0)", "x.size(0) > 3", "not x.size(0) < 4",
             "x.size(0) >= 4 and x.size(0) >= 2", "x.size(0) >= 2 and x.size(0) >= 4", "3 * x.size(0) + 1 > 12"]
    assert {f: bounds_from_assumption(parse_assumption(f)) for f in forms} == {f: {X0: (4, None)} for f in forms}
    assert bounds_from_assumption(parse_assumption("x.size(0) == 8")) == {X0: (8, 8)}
    assert bounds_from_assumption(parse_assumption("-x.size(0) >= -64")) == {X0: (None, 64)}


def test_an_upper_bound_alone_keeps_the_default_lower_bound(capsys, tmp_path):
    # plain_dynamic_even.py compiles with dynamic=True and declares nothing: stock torch's [2, oo).
    status, report, out, err = audit(capsys, tmp_path, "plain_dynamic_even.py", "x.size(0) <= 64")
    assert status == 1, out + err
    assert report["frames"][0]["declared_space"][0].startswith(f"2 <= {X0} <= 64")
    f = next(x for x in report["findings"] if x["kind"] == "guard_not_implied")
    assert 2 <= f["counterexample"][X0] <= 64 and f["counterexample"][X0] % 2 == 1


def test_a_lower_bound_widens_the_default_whatever_the_order(capsys, tmp_path):
    spaces = []
    for facts in (["x.size(0) <= 64", "x.size(0) >= 0"], ["x.size(0) >= 0", "x.size(0) <= 64"]):
        status, report, out, err = audit(capsys, tmp_path, "plain_dynamic_even.py", *facts)
        spaces.append(_space_and_verdicts(report)[0])
    assert spaces[0] == spaces[1] == [f"0 <= {X0} <= 64"]


# ------------------------------------------------------------------ malformed facts (item 9)


def test_deeply_nested_fact_is_one_line(capsys, tmp_path):
    status, report, out, err = audit(capsys, tmp_path, "clean.py", "-" * 5000 + "x.size(0) < 0")
    assert status == 2
    assert "--assume" in one_error_line(err)


def test_parse_refuses_undefined_and_constant_facts():
    for bad in ("x.size(0) // 0 == 1", "x.size(0) % 0 == 0", "x.size(0) < x.size(0)", "x.size(0) >= x.size(0)"):
        with pytest.raises(UsageError, match="--assume"):
            parse_assumption(bad)


# ------------------------------------------------------------------ vacuous proofs


def _vacuous_prove(real):
    """A prover whose every proof comes back vacuous: what a premise bug would look like."""
    def prove(self, goal, assumptions=(), **kw):
        r = real(self, goal, assumptions, **kw)
        if r.status == solvers.PROVED and goal is not sympy.false:
            return dataclasses.replace(r, vacuous=True)
        return r
    return prove


def test_a_vacuous_audit_proof_is_reported_not_implied(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(solvers.Prover, "prove", _vacuous_prove(solvers.Prover.prove))
    status, report, out, err = audit(capsys, tmp_path, "deploy_skip_guards.py", "x.size(0) >= 17")
    assert status == 1, out + err
    guard = report["frames"][0]["guards"][0]
    assert guard["status"] == "vacuous" and report["summary"]["guards_implied"] == 0
    assert any(f["kind"] == "vacuous_proof" for f in report["findings"]), report["findings"]
    assert "vacuous" in out


def test_a_vacuous_decision_while_compiling_is_refused_and_logged(monkeypatch):
    import verishape

    monkeypatch.setattr(solvers.Prover, "prove", _vacuous_prove(solvers.Prover.prove))

    def f(x):
        if (x.shape[0] // 2) * 2 <= x.shape[0]:  # true for every size: the solver would decide it
            return x + 1
        return x - 1

    cf = verishape.compile(f, backend="eager", dynamic=True)
    cf(torch.randn(8))
    (env,) = _envs(cf)
    assert env.verishape_log.records == []  # nothing decided on a vacuous proof
    assert env.verishape_log.vacuous, "the refusal is in the decision log"
    assert "vacuous" in verishape.explain(cf)


def _envs(cf):
    from verishape.compiler.frames import envs_for

    return envs_for(cf._torchdynamo_orig_callable.__code__)


def test_mark_dynamic_without_a_range_entry_is_labelled_mark_dynamic(capsys, tmp_path):
    """torch 2.15 stores ``mark_dynamic(x, 0)`` without min/max only in
    ``_dynamo_dynamic_indices``: the space is still the user's declaration, not "undeclared"."""
    status, report, out, err = audit(capsys, tmp_path, "mark_dynamic_no_range.py")
    assert status in (0, 1) and report is not None, out + err
    space = report["frames"][0]["declared_space"][0]
    assert space.startswith(f"2 <= {X0}") and "mark_dynamic(" in space and "undeclared" not in space, space
