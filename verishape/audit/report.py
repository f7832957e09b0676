"""The audit report: a readable terminal text and a JSON document.

JSON schema (``verishape verify-guards --json``)::

    {
      "script": str, "argv": [str], "assumptions": [str],
      "frames": [{
        "id": int, "name": str, "location": "file.py:line",
        "kind": "compile"|"export",               # an export: torch.export.export / verishape.export
        "range_constraints": [same fields as guards],   # export only: ep.range_constraints bounds
        "compiled": bool, "error": str|null,     # false also when Dynamo gave up and ran the frame eagerly
        "compile_id": str|null,                   # Dynamo's compile id ("0/1"), whose cache entry is replayed
        "notes": [str],                           # what the run could not audit here (a graph break)
        "symbols": {symbol: [source, ...]},
        "declared_space": [str],
        "guards": [{"guard", "source_line", "status": "implied"|"not_implied"|"undecided"|"vacuous",
                    "proof": SolveResult,         # implied or not by the declared space alone
                    "counterexample": {source: value}|null,
                    "isolation": "only_this_guard"|"also_breaks_others"|"unknown"|null,
                    "also_breaks": [str], "isolation_note": str,
                    "isolation_proof": SolveResult|null}],   # "breaks this guard but no other"
        "runtime_asserts": [same fields],
        "decisions": [ProofRecord JSON],          # what VeriShapeEnv decided while compiling
        "fallbacks": [{"expr", "assumed", "source_line", "status", "kind": "fallback"|"size_oblivious",
                       "counterexample"}],
        "minimizations": [{"stock_guards", "installed_guards", "dropped": [{"guard", "implied_by"}],
                          "rewritten": [{"guard", "as"}], "tightened_ranges": [{"range", "folded", "proof"}],
                          "equivalence": ProofRecord JSON|null, "applied": bool}],
        "divisibility_facts": [{"fact", "value", "status", "kind"}],  # proved facts codegen relied on
        "call": int|null,                         # the call of compiled code that compiled this frame
        "value_guards": [{"guard", "source_line", "sources"}],   # guards on Python floats (eps, p):
                                                  # installed, listed apart, not shape guards, not audited
        "widened_specializations": [{"kind", "role": "reuses"|"reused_by", "frame": int|null, "evidence",
                                     "status", "source", "sources", "value",
                                     "record": ProofRecord JSON|null}]  # a size-v call ran a generic
                                                  # artifact on a proof (role: which side this frame is)
      }],
      "calls": [{"id", "name", "location", "frames": [int]}],   # one per call; its frames grouped
      "findings": [{"kind", "frame", "guard", "source_line", "counterexample": {source: value}|null,
                    "detail", "isolation", "also_breaks", "isolation_note",
                    "replay": {"outcome", "reason", "mode": "cache_entry", "compile_id", "graph_calls": int,
                               "inputs": {arg: shape}, "eager_error", "compiled_error"}|null}],
      "summary": {"calls", "frames", "guards", "value_guards", "guards_implied", "runtime_asserts", "findings",
                  "findings_by_kind": {kind: n}, "exit_status": 0|1,
                  "answers": int, "answers_from_store": int}   # solver answers; those read from the proof store
    }

Finding kinds: ``guard_not_implied``, ``guard_undecided``, ``specialization_01``,
``duck_sizing``, ``contradictory_facts``, ``vacuous_proof``, ``fallback_unproved``, ``size_oblivious_unproved``,
``constraint_violation``, ``range_not_implied`` and ``runtime_assert_not_implied`` (an exported
program's range constraint or input-size assert rejects declared inputs),
``data_dependent_error``, ``compile_failed``, ``recompile_limit`` (the script hit Dynamo's
recompile limit: later calls ran eagerly, never compiled, so never audited).

A guard's counterexample breaks that guard alone (``isolation``: ``only_this_guard``, every
other guard of the frame defined and true there) when such an input exists; otherwise the
declared-space counterexample is shown with ``also_breaks`` and it is not replayed.

Replays run the cache entry Dynamo made for the audited compile (its transformed bytecode,
called directly: no guard check, no recompile, no cache change) against the frame's own
bytecode run eagerly; ``graph_calls`` counts calls of the audited graph.  Outcomes:
``agree``, ``differ``, ``compiled_fails``, ``compiled_accepts_what_eager_rejects``,
``both_fail``, ``compiled_rejects`` (an export: ``ep.module()`` refused the input with its own
range/guard/assert check; mode ``exported_program``), ``not_replayed`` (with ``reason``: no isolated counterexample, the sizes
cannot be rebuilt, the cache entry is gone, the graph was not reached).
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any

from verishape.proofs.result import WITHOUT_SOLVER

from .records import Check, FrameAudit


def _check_json(c: Check) -> dict[str, Any]:
    return {"guard": c.expr, "source_line": c.source_line, "status": c.status, "proof": c.result.to_json(),
            "counterexample": c.counterexample, "isolation": c.isolation, "also_breaks": c.also_breaks,
            "isolation_note": c.isolation_note,
            "isolation_proof": c.isolation_result.to_json() if c.isolation_result else None}


def build(script: str, argv: list[str], assumptions: list[str], audits: list[FrameAudit]) -> dict[str, Any]:
    frames, findings = [], []
    for a in audits:
        f = a.frame
        frames.append({
            "id": f.index, "name": f.name, "location": f.location, "kind": f.kind,
            "compiled": f.error is None, "error": f.error,
            "compile_id": None if f.compile_id is None else str(f.compile_id), "notes": list(f.notes),
            "symbols": a.symbols, "declared_space": a.declared,
            "guards": [_check_json(c) for c in a.checks if c.kind == "guard"],
            "range_constraints": [_check_json(c) for c in a.checks if c.kind == "range_constraint"],
            "runtime_asserts": [_check_json(c) for c in a.checks if c.kind == "runtime_assert"],
            "decisions": [r.to_json() for r in a.decisions],
            "fallbacks": a.fallbacks,
            "minimizations": a.minimizations,
            "divisibility_facts": a.divisibility,
            "call": f.call,
            "value_guards": a.value_guards,
            "widened_specializations": a.widenings,
        })
        findings += [dataclasses.asdict(x) for x in a.findings]
    guards = [g for fr in frames for g in fr["guards"]]
    by_kind = collections.Counter(x["kind"] for x in findings)
    answers = [r for fr in frames for r in _answers(fr)]
    calls = _calls(frames)
    return {
        "script": script, "argv": argv, "assumptions": assumptions, "frames": frames, "findings": findings,
        "calls": calls,
        "summary": {
            "calls": len(calls), "frames": len(frames), "guards": len(guards),
            "value_guards": sum(len(fr["value_guards"]) for fr in frames),
            "guards_implied": sum(g["status"] == "implied" for g in guards),
            "runtime_asserts": sum(len(fr["runtime_asserts"]) for fr in frames),
            "findings": len(findings), "findings_by_kind": dict(by_kind),
            "exit_status": 1 if findings else 0,
            "answers": len(answers), "answers_from_store": sum(bool(r.get("from_store")) for r in answers),
        },
    }


def _calls(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Frames grouped by the call of the script's compiled code that compiled them (an
    export is a call of its own): a model call whose trace broke shows as one call with
    its frames (the entry frame, then resume functions), every guard kept per frame."""
    calls: dict[Any, dict[str, Any]] = {}
    for fr in frames:
        key = ("call", fr["call"]) if fr.get("call") is not None else ("frame", fr["id"])
        entry = calls.setdefault(key, {"id": len(calls), "name": fr["name"], "location": fr["location"],
                                       "frames": []})
        entry["frames"].append(fr["id"])
    return list(calls.values())


def _answers(frame: dict[str, Any]) -> list[dict[str, Any]]:
    """Every solver answer of a frame, as SolveResult JSON: the audit's own proofs, the
    decisions made while compiling and the minimization's equivalence proofs (each says
    whether it came from the proof store).  An answer the prover's cheap tiers gave
    (``WITHOUT_SOLVER``: a refutation at a point, a proof by bounds) is no solver answer: the
    store never holds one."""
    out = [c[key] for c in (*frame["guards"], *frame["runtime_asserts"])
           for key in ("proof", "isolation_proof") if c.get(key)]
    out += [d["result"] for d in frame["decisions"]]
    out += [m["equivalence"]["result"] for m in frame["minimizations"] if m.get("equivalence")]
    out += [w["record"]["result"] for w in frame.get("widened_specializations", []) if w.get("record")]
    return [r for r in out if r.get("reason") not in WITHOUT_SOLVER]


def _cex(c: dict[str, Any] | None) -> str:
    return ", ".join(f"{k} = {v}" for k, v in sorted(c.items())) if c else "-"


_SIZE = re.compile(r"L\['([A-Za-z_]\w*)'\]((?:\[(?:'[^'\\]*'|\d+)\])*)\.size\(\)\[(\d+)\]")


def _short(text: str) -> str:
    """``L['x'].size()[0]`` as ``x.size(0)`` (``L['kwargs']['ids'].size()[0]`` as
    ``kwargs['ids'].size(0)``), for the table."""
    return _SIZE.sub(r"\1\2.size(\3)", text)


def _short_cex(guard: str, cex: dict[str, Any]) -> str:
    """The values of the sizes the guard names; the rest counted (full values are above)."""
    own = {k: v for k, v in sorted(cex.items()) if k in guard} or dict(sorted(cex.items()))
    text = ", ".join(f"{_short(k)}={v}" for k, v in own.items())
    rest = {v for k, v in cex.items() if k not in own}
    count = len(cex) - len(own)
    if not count:
        return text
    return text + (f" ({count} other{'s' if count > 1 else ''} = {rest.pop()})" if len(rest) == 1
                   else f" (+{count} other sizes)")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _replay_table(findings: list[dict[str, Any]]) -> list[str]:
    """One row per replayed (or not replayable) finding: what broke, where, what ran."""
    rows = []
    for i, x in enumerate(findings, 1):
        r = x.get("replay")
        if not r:
            continue
        outcome = r["outcome"] + (f" ({r['reason']})" if r.get("reason") else "")
        rows.append((str(i), f"frame {x['frame']}: {_short(x['guard'])}",
                     _short_cex(x["guard"], x["counterexample"] or {}), outcome))
    if not rows:
        return []
    head = ("#", "finding", "counterexample", "replay without guards")
    widths = [min(max(len(r[c]) for r in [head, *rows]), cap) for c, cap in enumerate((3, 44, 40, 0))]
    exports = any((x.get("replay") or {}).get("mode") == "exported_program" for x in findings)
    out = ["", "replays (eager against the audited graph, guards skipped" +
           ("; an export: against ep.module()):" if exports else "):")]
    for r in [head, *rows]:
        cells = [_clip(r[c], widths[c]).ljust(widths[c]) for c in range(3)]
        out.append("  " + "  ".join(cells) + "  " + r[3])
    return out


def render(report: dict[str, Any]) -> str:
    lines = [f"verishape verify-guards {report['script']}"]
    if report["assumptions"]:
        lines.append("assumptions: " + "; ".join(report["assumptions"]))
    first_of_call = {c["frames"][0]: c for c in report.get("calls", []) if len(c["frames"]) > 1}
    for fr in report["frames"]:
        lines.append("")
        lines += _frame_lines(fr, first_of_call.get(fr["id"]))
    lines.append("")
    lines += _findings_lines(report["findings"])
    s = report["summary"]
    calls = f"{s['calls']} call(s), " if s.get("calls") is not None and s["calls"] != s["frames"] else ""
    lines.append(f"summary: {calls}{s['frames']} frame(s), {s['guards']} guard(s) ({s['guards_implied']} implied), "
                 f"{s['runtime_asserts']} runtime assert(s), {s['findings']} finding(s)"
                 + (f"; {s['value_guards']} float value guard(s) listed apart" if s.get("value_guards") else "")
                 + (f"; {s['answers_from_store']} of {s['answers']} solver answers from the proof store"
                    if s.get("answers_from_store") else ""))
    return "\n".join(lines)


def _frame_lines(fr: dict[str, Any], call: dict[str, Any] | None) -> list[str]:
    """One frame's part of the report: its state, declared space, checks and decisions."""
    lines: list[str] = []
    if call is not None:
        lines.append(f"call {call['id']}: {call['name']} ({call['location']}) compiled {len(call['frames'])} "
                     f"frames: {', '.join(map(str, call['frames']))} (a graph break or a nested compiled call)")
    export = fr.get("kind") == "export"
    if fr["compiled"]:
        state = "exported" if export else "compiled"
    else:
        state = f"did not {'export' if export else 'compile'}: {fr['error']}"
    lines.append(f"frame {fr['id']}: {fr['name']} ({fr['location']}), {state}")
    for n in fr.get("notes", []):
        lines.append(f"  note: {n}")
    for d in fr["declared_space"]:
        lines.append(f"  declared: {d}")
    for kind, key in (("range constraint", "range_constraints"), ("guard", "guards"),
                      ("runtime assert", "runtime_asserts")):
        for g in fr.get(key, []):
            mark = {"implied": "implied", "not_implied": "NOT implied", "undecided": "undecided",
                    "vacuous": "VACUOUS proof (premises contradict), not counted as implied"}[g["status"]]
            where = f"   [{g['source_line']}]" if g["source_line"] else ""
            stored = " (from store)" if g["proof"].get("from_store") else ""
            lines.append(f"  {kind}: {g['guard']}: {mark}{stored}{where}")
            if g["counterexample"]:
                lines.append(f"      counterexample: {_cex(g['counterexample'])}")
            if g.get("isolation_note"):
                lines.append(f"      {g['isolation_note']}")
    if fr["decisions"]:
        stored = sum(bool(d["result"].get("from_store")) for d in fr["decisions"])
        lines.append(f"  solver decisions while compiling: {len(fr['decisions'])}"
                     + (f" ({stored} from store)" if stored else ""))
    for m in fr["minimizations"]:
        if m["dropped"]:
            state = "proved equivalent, installed" if m["applied"] else "NOT proved equivalent, stock installed"
            lines.append(f"  guard minimization: {len(m['stock_guards'])} -> {len(m['installed_guards'])} "
                         f"guards ({state})")
            for r in m.get("rewritten", []):
                lines.append(f"    rewritten {r['guard']} as {r['as']} (proved equivalent)")
            for t in m.get("tightened_ranges", []):
                lines.append(f"    range check tightened to {t['range']} ({t['proof']['result']['status']}), "
                             f"replacing {'; '.join(t['folded'])}")
    for d in fr["divisibility_facts"]:
        lines.append(f"  divisibility relied on: {d['fact']} is {d['value']} ({d['status']})")
    for w in fr.get("widened_specializations", []):
        lines.append(f"  widened by specialization equivalence ({w['status']}): {w['evidence']}")
    if fr.get("value_guards"):
        lines.append(f"  value guards (Python floats, not shapes; not audited against the declared space): "
                     f"{len(fr['value_guards'])}")
        for v in fr["value_guards"]:
            lines.append(f"    {v['guard']}" + (f"   [{v['source_line']}]" if v["source_line"] else ""))
    return lines


def _findings_lines(findings: list[dict[str, Any]]) -> list[str]:
    """The findings, each with its counterexample and replay, then the replay table."""
    lines: list[str] = []
    if findings:
        lines.append(f"{len(findings)} finding(s):")
        for x in findings:
            lines.append(f"  [{x['kind']}] frame {x['frame']}: {x['guard']}")
            if x["detail"]:
                lines.append(f"      {x['detail']}")
            if x["counterexample"]:
                lines.append(f"      counterexample: {_cex(x['counterexample'])}")
            if x.get("replay"):
                r = x["replay"]
                extra = r.get("compiled_error") or r.get("eager_error") or r.get("reason") or ""
                how = "replay of the exported program" if r.get("mode") == "exported_program" else "replay without guards"
                lines.append(f"      {how}: {r['outcome']}" + (f" ({extra})" if extra else ""))
        lines += _replay_table(findings)
    else:
        lines.append("no findings: every compiled artifact is valid for the whole declared input space")
    return lines
