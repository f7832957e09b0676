"""`verishape verify-guards`: findings, counterexamples, replay, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

from verishape.audit.space import bounds_from_assumption, parse_assumption
from verishape.core.errors import UsageError

SCRIPTS = Path(__file__).parent / "scripts"


def audit(script: str, *extra: str, tmp_path: Path | None = None):
    cmd = [sys.executable, "-m", "verishape", "verify-guards", str(SCRIPTS / script), *extra]
    report = None
    if tmp_path is not None:
        out = tmp_path / "report.json"
        cmd += ["--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if tmp_path is not None and out.exists():
        report = json.loads(out.read_text())
    return proc, report


def _size(cex):
    return cex["L['x'].size()[0]"]


def test_clean_program_exits_0(tmp_path):
    proc, report = audit("clean.py", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["findings"] == [] and report["summary"]["exit_status"] == 0
    assert "no findings" in proc.stdout


def test_even_view_under_range_admitting_odd_sizes(tmp_path):
    proc, report = audit("even_view.py", tmp_path=tmp_path)
    assert proc.returncode == 1
    f = next(x for x in report["findings"] if x["kind"] == "guard_not_implied")
    n = _size(f["counterexample"])
    assert n % 2 == 1 and 2 <= n <= 64  # odd, inside the declared range
    assert "even_view.py" in (f["source_line"] or "")
    assert any(x["kind"] == "constraint_violation" for x in report["findings"])  # a finding, not a crash


def test_branch_inside_declared_range(tmp_path):
    proc, report = audit("branch.py", tmp_path=tmp_path)
    assert proc.returncode == 1
    f = next(x for x in report["findings"] if x["kind"] == "guard_not_implied")
    assert "L['x'].size()[0] > 16" in f["guard"]
    assert 2 <= _size(f["counterexample"]) <= 16  # the other side of the branch


def test_assume_makes_the_branch_guard_implied(tmp_path):
    proc, report = audit("deploy_skip_guards.py", "--assume", "17 <= x.size(0) <= 1000", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout
    guard = report["frames"][0]["guards"][0]
    assert guard["status"] == "implied" and guard["proof"]["status"] == "proved"


def test_skipped_guards_replay_shows_wrong_result(tmp_path):
    proc, report = audit("deploy_skip_guards.py", tmp_path=tmp_path)
    assert proc.returncode == 1
    f = next(x for x in report["findings"] if x["kind"] == "guard_not_implied")
    assert f["replay"]["outcome"] == "differ", f["replay"]
    assert f["replay"]["inputs"] == {"x": [_size(f["counterexample"])]}
    assert "replay without guards: differ" in proc.stdout


@pytest.mark.parametrize("script", ["contradictory.py", "contradictory_nonlinear.py"])
def test_contradictory_checks(script, tmp_path):
    proc, report = audit(script, tmp_path=tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert any(x["kind"] == "contradictory_facts" for x in report["findings"]), report["findings"]


@pytest.mark.parametrize("script,needle", [
    ("missing.py", "script not found"),
    ("syntax_error.py", "syntax error in syntax_error.py line 1"),
    ("raises.py", "raised ValueError: the script itself is broken (not a compilation error)"),
    ("no_compile.py", "no frame was compiled"),
])
def test_bad_inputs_exit_2_with_one_line(script, needle):
    proc, _ = audit(script)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("verishape: error:")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_malformed_assume_exits_2():
    proc, _ = audit("branch.py", "--assume", "x.size(0) >>> 3")
    assert proc.returncode == 2 and "--assume" in proc.stderr and "Traceback" not in proc.stderr


def test_assumption_parsing():
    a = parse_assumption("2 <= x.size(0) <= 64")
    assert set(a.sources.values()) == {"L['x'].size()[0]"}
    assert bounds_from_assumption(a) == {"L['x'].size()[0]": (2, 64)}
    b = parse_assumption("L['x'].size()[0] % 8 == 0 and y.shape[1] < 10")
    assert set(b.sources.values()) == {"L['x'].size()[0]", "L['y'].size()[1]"}
    assert bounds_from_assumption(b) == {"L['y'].size()[1]": (None, 9)}
    s = sympy.Symbol("s0", integer=True, positive=True)
    assert a.for_frame({"L['x'].size()[0]": s}) == sympy.And(sympy.Le(2, s), sympy.Le(s, 64))
    assert a.for_frame({}) is None
    for bad in ("x.size(0)", "3 < 4", "x.foo(0) > 1", "import os"):
        with pytest.raises(UsageError):
            parse_assumption(bad)


def test_duck_sizing_reported_when_space_admits_unequal_sizes(tmp_path):
    proc, report = audit("duck.py", tmp_path=tmp_path)
    assert proc.returncode == 1
    f = next(x for x in report["findings"] if x["kind"] == "duck_sizing")
    cex = f["counterexample"]
    assert cex["L['x'].size()[0]"] != cex["L['y'].size()[0]"] and min(cex.values()) >= 2


def test_zero_one_specialization_reported_only_when_declared(tmp_path):
    proc, report = audit("duck_and_01.py", tmp_path=tmp_path)
    assert proc.returncode == 1
    kinds = [x["kind"] for x in report["findings"]]
    assert kinds == ["specialization_01"]  # y (declared min=2) is not reported
    assert report["findings"][0]["counterexample"] == {"L['x'].size()[0]": 0}


def test_unproved_fallbacks_are_flagged_with_values(tmp_path):
    proc, report = audit("unbacked_fallback.py", tmp_path=tmp_path)
    assert proc.returncode == 1
    flagged = [x for x in report["findings"] if x["kind"] == "fallback_unproved"]
    assert flagged and all(x["counterexample"] for x in flagged)
    eq0 = next(x for x in flagged if x["guard"].startswith("Eq(u0, 0)"))
    assert eq0["counterexample"] == {"u0": 0}  # the general path was taken; u0 = 0 is where it matters
    assert eq0["replay"]["outcome"] == "not_replayed" and "tensor data" in eq0["replay"]["reason"]
