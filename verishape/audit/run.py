"""Drive one audit: run the script, audit each frame, replay counterexamples, report."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import verishape.solvers as solvers

from verishape.core.errors import UsageError, check_script, check_writable
from verishape.core.premises import Premises
from verishape.proofs.kinds import Asker

from . import declared
from .analyze import audit_frame
from .capture import run_script
from .export_audit import audit_export
from .export_replay import replay_export
from .replay import replay
from .report import build, render
from .frame import Frame
from .records import FrameAudit
from .space import Assumption, check_assumptions_consistent, parse_assumption, short


def space_for(frame: Frame, assumptions: Sequence[Assumption], prover: solvers.Prover) -> declared.DeclaredSpace:
    """The declared space of a frame of either kind: a compiled frame, or an export."""
    if getattr(frame, "kind", "compile") == "export":
        return declared.for_export(frame, assumptions, prover)
    return declared.for_frame(frame, assumptions, prover)


def audited(space: declared.DeclaredSpace) -> FrameAudit:
    """The audit of the frame ``space`` belongs to (``export_audit.py`` for an export)."""
    return audit_export(space) if getattr(space.frame, "kind", "compile") == "export" else audit_frame(space)


def require_declared_space(frames: Sequence[Frame], assumptions: Sequence[Assumption], prover: solvers.Prover) -> None:
    """Before auditing anything: every ``--assume`` must name sizes some compiled frame has
    as symbols (an input the script never compiles with, or a dimension that is static in
    every frame, would be silently ignored), and each frame's declared space must hold an
    input on which every fact has a value (``DeclaredSpace.require_space``)."""
    spaces = [space_for(frame, assumptions, prover) for frame in frames]
    known = set().union(*(space.symbol_of_source for space in spaces))
    for a in assumptions:
        missing = sorted(set(a.sources.values()) - known)
        if missing:
            have = ", ".join(sorted(known)) or "none"
            raise UsageError(f"--assume {short(a.text)!r} names {', '.join(missing)}, which is not a dynamic size of "
                             f"any compiled frame (not an input, or static everywhere; dynamic sizes: {have})")
    for space in spaces:
        space.require_space()


#: Findings whose counterexample is an input worth running: eager against the artifact.
REPLAYED = ("guard_not_implied", "specialization_01", "duck_sizing", "fallback_unproved",
            "range_not_implied", "runtime_assert_not_implied")


def _progress(message: str) -> None:
    print(f"verishape: {message}", file=sys.stderr, flush=True)


@solvers.asked_by(Asker.AUDIT)  # the proof store records who asked (compiles inside say "compile")
def verify_guards(script: str | Path, script_args: Sequence[str] = (), *, assume: Sequence[str] = (),
                  json_path: str | Path | None = None, progress: bool = True) -> tuple[int, dict[str, Any]]:
    """Audit ``script``; returns (exit status, report).  Raises UsageError on bad input:
    the script, the report path and the ``--assume`` facts (malformed, undefined or
    contradictory) are checked before the script runs; facts about inputs no frame
    compiles with, or a declared space that is empty for a frame, once it has run."""
    say = _progress if progress else (lambda _m: None)
    path = Path(script)
    check_script(path)
    if json_path is not None:
        check_writable(json_path, "--json")
    assumptions = [parse_assumption(a) for a in assume]
    prover = solvers.Prover()
    check_assumptions_consistent(assumptions, lambda facts: Premises(facts).empty(prover=prover))
    say(f"running {path} in audit mode")
    run = run_script(path, list(script_args), say)
    require_declared_space(run.frames, assumptions, prover)
    link_reuses(run.frames)
    audits = []
    for frame in run.frames:
        say(f"auditing frame {frame.index}: {frame.name} ({frame.location}), {len(frame.env.guards)} guard(s)")
        audit = audited(space_for(frame, assumptions, prover))
        for finding in audit.findings:
            if finding.counterexample and finding.kind in REPLAYED:
                if finding.isolation is not None and finding.isolation != "only_this_guard":
                    # Its counterexample also breaks other guards of the frame: replaying it
                    # would blame this guard for what those guards protect.
                    alone = ("no input in the declared space breaks this guard alone"
                             if finding.isolation == "also_breaks_others"
                             else "the solver found no input that breaks this guard alone")
                    finding.replay = {"outcome": "not_replayed", "reason": alone}
                    continue
                say(f"replaying {finding.kind} at {finding.counterexample}")
                finding.replay = (replay_export(frame, finding.counterexample) if frame.kind == "export"
                                  else replay(frame, finding.counterexample))
        audits.append(audit)
    report = build(str(path), list(script_args), list(assume), audits)
    if json_path is not None:
        write_report(report, json_path)
    return report["summary"]["exit_status"], report


def link_reuses(frames: Sequence[Frame]) -> None:
    """Give each generic frame the proofs of the later frames that ran its artifact at a
    size its guards exclude (``widen_specializations``): its ``2 <= size`` then turns no
    call away from its compiled code at that size."""
    by_compile = {str(f.compile_id): f for f in frames if f.compile_id is not None}
    for frame in frames:
        for ev in getattr(frame.env, "verishape_log", None) and frame.env.verishape_log.widened or ():
            generic = by_compile.get(str(getattr(ev, "reused", None)))
            if generic is not None and generic is not frame:
                generic.reused_by.append((frame.index, ev))


def write_report(report: dict[str, Any], json_path: str | Path) -> None:
    try:
        Path(json_path).write_text(json.dumps(report, indent=2, default=str) + "\n")
    except OSError as exc:  # checked writable before the run; it can still fail (disk full)
        raise UsageError(f"--json {json_path}: cannot write the report: {exc.strerror}") from None


def main(args: Any) -> int:
    if args.json is not None:
        check_writable(args.json, "--json")
    status, report = verify_guards(args.script, args.script_args, assume=args.assume or ())
    print(render(report))  # shown before the JSON is written: a late write error loses nothing
    if args.json is not None:
        write_report(report, args.json)
    return status
