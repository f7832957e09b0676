"""`verishape verify-guards`: replays run the audited artifact, and each counterexample
breaks only the guard it is for (issue 10, items 1 and 2).  Real scripts, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"


def audit(script: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "verishape", "verify-guards", str(SCRIPTS / script), "--json", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.exists(), proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def _guard_findings(report: dict) -> list[dict]:
    return [x for x in report["findings"] if x["kind"] == "guard_not_implied"]


def _size(cex: dict, name: str) -> int:
    return cex[f"L['{name}'].size()[0]"]


# ---------------------------------------------------------------- item 1: the replayed artifact


def test_every_replay_runs_the_audited_graph(tmp_path):
    """Nine findings in one frame: more than Dynamo's recompile limit.  Each replay must run
    the compiled graph (not eager after the limit), and each differs from eager."""
    proc, report = audit("nine_branches.py", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    findings = _guard_findings(report)
    assert len(findings) == 9
    assert [f["replay"]["outcome"] for f in findings] == ["differ"] * 9, [f["replay"] for f in findings]
    for f in findings:
        r = f["replay"]
        assert r["graph_calls"] == 1 and r["compile_id"] == report["frames"][0]["compile_id"], r
    # The text report ends with one replay row per finding.
    table = proc.stdout[proc.stdout.index("replays"):]
    assert sum(" differ" in line for line in table.splitlines()) == 9, proc.stdout


def test_replay_outcomes_do_not_depend_on_order():
    """Replays leave no state behind: forward and reverse order give the same outcomes."""
    from verishape import solvers
    from verishape.audit.analyze import audit_frame
    from verishape.audit.declared import for_frame
    from verishape.audit.capture import run_script
    from verishape.audit.replay import replay

    run = run_script(SCRIPTS / "nine_branches.py", [], lambda _m: None)
    (frame,) = run.frames
    findings = [f for f in audit_frame(for_frame(frame, [], solvers.Prover())).findings if f.kind == "guard_not_implied"]
    forward = [replay(frame, f.counterexample) for f in findings]
    backward = [replay(frame, f.counterexample) for f in reversed(findings)][::-1]
    assert [r["outcome"] for r in forward] == [r["outcome"] for r in backward] == ["differ"] * 9
    assert forward == backward


def test_replay_that_cannot_run_the_artifact_is_not_agree(tmp_path):
    """The script empties Dynamo's cache: the audited graph is gone, so nothing is replayed
    (recompiling would replay a different artifact)."""
    proc, report = audit("reset_cache.py", tmp_path)
    (f,) = _guard_findings(report)
    assert f["replay"]["outcome"] == "not_replayed", f["replay"]
    assert "cache" in f["replay"]["reason"]
    assert "replay without guards: not_replayed" in proc.stdout


def test_frame_after_a_graph_break_is_replayed_and_the_break_noted(tmp_path):
    proc, report = audit("graph_break_first.py", tmp_path)
    names = [fr["name"] for fr in report["frames"]]
    assert names == ["f", "torch_dynamo_resume_in_f_at_6"], names  # one frame per compile, no aborted attempt
    assert any("graph break" in n and "graph_break_first.py:6" in n for n in report["frames"][0]["notes"])
    (f,) = _guard_findings(report)
    assert f["frame"] == 1 and f["replay"]["outcome"] == "differ", f["replay"]
    assert "note: graph break" in proc.stdout


def test_frame_dynamo_ran_eagerly_is_not_reported_as_compiled(tmp_path):
    proc, report = audit("graph_break_in_loop.py", tmp_path)
    (frame,) = report["frames"]
    assert frame["compiled"] is False and "ran it eagerly" in frame["error"], frame["error"]
    (f,) = _guard_findings(report)
    assert f["replay"] == {"outcome": "not_replayed", "reason": "the frame has no compiled artifact"}


def test_recompile_limit_in_the_script_is_a_finding(tmp_path):
    proc, report = audit("recompile_limit.py", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (f,) = [x for x in report["findings"] if x["kind"] == "recompile_limit"]
    assert "recompile_limit (8)" in f["guard"] and "not audited" in f["detail"]
    assert len(report["frames"]) == 8


# ---------------------------------------------------------------- item 2: one guard per counterexample


def _holds(guard: str, x: int, y: int, z: int) -> bool | None:
    """The guards of isolated_guards.py, evaluated the way the guard function does
    (None: it raises)."""
    if "x" in guard.split("size")[0]:
        return x > 16
    if "//" in guard:
        return None if y == 2 else z // (y - 2) >= 1
    return y > 16


def test_counterexample_breaks_only_its_guard(tmp_path):
    proc, report = audit("isolated_guards.py", tmp_path)
    findings = _guard_findings(report)
    assert len(findings) == 3
    for f in findings:
        cex = f["counterexample"]
        x, y, z = (_size(cex, n) for n in "xyz")
        assert _holds(f["guard"], x, y, z) is not True  # breaks its own guard
        for other in findings:
            if other is not f:
                assert _holds(other["guard"], x, y, z) is True, (f["guard"], other["guard"], cex)
        assert f["isolation"] == "only_this_guard", f
    by_guard = {f["guard"]: f for f in findings}
    # Breaking x > 16 alone is harmless (both branches compute the same values)...
    assert by_guard["L['x'].size()[0] > 16"]["replay"]["outcome"] == "agree"
    # ... breaking y > 16 alone is not.
    assert by_guard["L['y'].size()[0] > 16"]["replay"]["outcome"] == "differ"


def test_no_input_breaks_an_implied_by_others_guard_alone(tmp_path):
    proc, report = audit("nested_branches.py", tmp_path)
    by_guard = {f["guard"]: f for f in _guard_findings(report)}
    outer, inner = by_guard["L['x'].size()[0] > 10"], by_guard["L['x'].size()[0] > 20"]
    # Still "not implied" by the declared space...
    assert {g["status"] for g in report["frames"][0]["guards"]} == {"not_implied"}
    # ... but every input that breaks x > 10 also breaks x > 20: said, not replayed.
    assert outer["replay"]["outcome"] == "not_replayed" and "alone" in outer["replay"]["reason"]
    assert outer["isolation"] == "also_breaks_others" and outer["also_breaks"] == ["L['x'].size()[0] > 20"]
    assert "no input in the declared space breaks this guard alone" in proc.stdout
    assert inner["isolation"] == "only_this_guard" and inner["replay"]["outcome"] == "differ"
