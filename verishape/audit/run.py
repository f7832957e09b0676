"""Drive one audit: run the script, audit each frame, replay counterexamples, report."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import solvers

from .analyze import FrameAuditor
from .capture import run_script
from .replay import replay
from .report import build, render
from .space import parse_assumption


def _progress(message: str) -> None:
    print(f"verishape: {message}", file=sys.stderr, flush=True)


def verify_guards(script: str | Path, script_args: Sequence[str] = (), *, assume: Sequence[str] = (),
                  json_path: str | Path | None = None, progress: bool = True) -> tuple[int, dict[str, Any]]:
    """Audit ``script``; returns (exit status, report).  Raises UsageError on bad input."""
    say = _progress if progress else (lambda _m: None)
    assumptions = [parse_assumption(a) for a in assume]  # malformed: UsageError before running anything
    path = Path(script)
    say(f"running {path} in audit mode")
    run = run_script(path, list(script_args), say)
    prover = solvers.Prover()
    audits = []
    for frame in run.frames:
        say(f"auditing frame {frame.index}: {frame.name} ({frame.location}), {len(frame.env.guards)} guard(s)")
        audit = FrameAuditor(frame, assumptions, prover).run()
        for finding in audit.findings:
            if finding.counterexample and finding.kind in ("guard_not_implied", "specialization_01", "duck_sizing",
                                                           "fallback_unproved"):
                if frame.error:
                    finding.replay = {"outcome": "not_replayed", "reason": "the frame has no compiled artifact"}
                    continue
                say(f"replaying {finding.kind} at {finding.counterexample}")
                finding.replay = replay(run, frame, finding.counterexample)
        audits.append(audit)
    report = build(str(path), list(script_args), list(assume), audits)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report["summary"]["exit_status"], report


def main(args: Any) -> int:
    status, report = verify_guards(args.script, args.script_args, assume=args.assume or (), json_path=args.json)
    print(render(report))
    return status
