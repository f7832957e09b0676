"""Export corpus: stock ``torch.export.export`` against ``verishape.export``, in one process.

For each program of ``tests/export_corpus.py`` (non-strict) and each exporter: did it export
(or fail with a data-dependent error, or another error), does the program match eager on
every input, does it reject every bad input (one that breaks the user's ``torch._check``),
how many ``_assert_scalar`` nodes it has, and how long the export took.  Export times are
the median of ``--repeat`` rounds, stock and verishape alternating (which goes first flips
each round); the summary's ratio is the median over programs that both export.

    python benchmarks/export_corpus.py [--json benchmarks/results/export_corpus.json]
                                        [--markdown benchmarks/results/export_corpus.md] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

import verishape  # noqa: E402
from export_corpus import PROGRAMS, Program  # noqa: E402


def is_dde(exc: BaseException) -> bool:
    """Stock's data-dependent error, also when export wraps it in a UserError."""
    text = f"{type(exc).__name__}: {exc}"
    return "GuardOnDataDependentSymNode" in text or "data-dependent" in text.lower()


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def export_once(exporter: Callable[..., Any], program: Program) -> tuple[Any, float, BaseException | None]:
    torch._dynamo.reset()
    start = time.perf_counter()
    try:
        ep = exporter(program.module(), program.inputs[0], dynamic_shapes=program.dynamic_shapes, strict=False)
        return ep, time.perf_counter() - start, None
    except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
        return None, time.perf_counter() - start, exc


def asserts_in(ep: Any) -> int:
    return sum(1 for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default)


def check_program(ep: Any, program: Program) -> dict[str, Any]:
    """Every input against eager; every bad input must raise (eager raises on it too)."""
    module, eager = ep.module(), program.module()
    matches = 0
    for args in program.inputs:
        try:
            matches += int(same(module(*args), eager(*args)))
        except Exception:  # noqa: BLE001 - a mismatch, counted
            pass
    rejected = 0
    for args in program.bad:
        try:
            module(*args)
        except Exception:  # noqa: BLE001 - rejecting is what we count
            rejected += 1
    return {"matches_eager": matches, "bad_rejected": rejected, "assert_nodes": asserts_in(ep)}


def outcome(ep: Any, exc: BaseException | None) -> str:
    if ep is not None:
        return "exported"
    return "dde" if exc is not None and is_dde(exc) else "error"


def measure(program: Program, repeat: int) -> dict[str, Any]:
    exporters = {"stock": torch.export.export, "verishape": verishape.export}
    times: dict[str, list[float]] = {k: [] for k in exporters}
    last: dict[str, tuple[Any, BaseException | None]] = {}
    for r in range(repeat):
        order = list(exporters) if r % 2 == 0 else list(reversed(exporters))
        for side in order:
            ep, seconds, exc = export_once(exporters[side], program)
            times[side].append(seconds)
            last[side] = (ep, exc)
    row: dict[str, Any] = {"program": program.name, "provable": program.provable, "facts": program.facts,
                           "after": program.after, "inputs": len(program.inputs), "bad_inputs": len(program.bad)}
    for side in exporters:
        ep, exc = last[side]
        entry: dict[str, Any] = {"outcome": outcome(ep, exc), "export_s": statistics.median(times[side])}
        if exc is not None:
            entry["error"] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        if ep is not None:
            entry.update(check_program(ep, program))
            if side == "verishape":
                log = verishape.export_decisions(ep) if hasattr(verishape, "export_decisions") else None
                entry["decisions"] = dict(log.counts()) if log is not None else {}
        row[side] = entry
    if row["verishape"]["outcome"] == "dde":
        row["suggestions"] = follow_suggestions(program)
    return row


def follow_suggestions(program: Program, rounds: int = 4) -> dict[str, Any]:
    """For a program verishape cannot export: apply the ``torch._check`` each error names (as
    a tool would, with ``suggest.apply_to_function``) and re-export, until it exports or no
    check is named.  Then the program must match eager on every example input."""
    from verishape.compiler.export import suggest

    cls, applied = program.module, []
    for _ in range(rounds):
        torch._dynamo.reset()
        try:
            ep = verishape.export(cls(), program.inputs[0], dynamic_shapes=program.dynamic_shapes, strict=False)
        except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
            found = getattr(exc, "verishape_suggestion", None)
            if found is None:
                return {"applied": applied, "outcome": outcome(None, exc), "named_a_check": bool(applied)}
            applied.append({"check": found.check, "line": found.statement, "decides": f"{found.question} is "
                            f"{found.decides}", "rejects_nothing_eager_accepts": found.rejects_nothing_eager_accepts,
                            "eager": found.eager, "proof_ms": found.proof_ms})
            cls = type(cls.__name__, (cls,), {"forward": suggest.apply_to_function(cls.forward, found)})
            continue
        module, eager = ep.module(), cls()
        matches = 0
        for args in program.inputs:  # against the patched eager: an input its checks reject must raise
            try:
                expected = eager(*args)
            except Exception:  # noqa: BLE001 - the applied check rejects it in eager too
                try:
                    module(*args)
                except Exception:  # noqa: BLE001 - and the program rejects it: they agree
                    matches += 1
                continue
            try:
                matches += int(same(module(*args), expected))
            except Exception:  # noqa: BLE001 - a mismatch, counted
                pass
        return {"applied": applied, "outcome": "exported", "matches_eager": matches, "named_a_check": True}
    return {"applied": applied, "outcome": "still failing", "named_a_check": bool(applied)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def count(side: str, what: str, provable: bool | None = None) -> int:
        return sum(1 for r in rows if r[side]["outcome"] == what and (provable is None or r["provable"] == provable))

    def correct(side: str, r: dict[str, Any]) -> bool:
        e = r[side]
        return (e["outcome"] == "exported" and e["matches_eager"] == r["inputs"]
                and e["bad_rejected"] == r["bad_inputs"])

    both = [r for r in rows if r["stock"]["outcome"] == r["verishape"]["outcome"] == "exported"]
    ratios = [r["verishape"]["export_s"] / r["stock"]["export_s"] for r in both]
    return {
        "programs": len(rows),
        "provable": sum(r["provable"] for r in rows),
        "controls": sum(not r["provable"] for r in rows),
        "stock_exported_provable": count("stock", "exported", True),
        "verishape_exported_provable": count("verishape", "exported", True),
        "stock_dde_provable": count("stock", "dde", True),
        "verishape_dde_provable": count("verishape", "dde", True),
        "controls_dde": {side: count(side, "dde", False) for side in ("stock", "verishape")},
        "correct_programs": {side: sum(correct(side, r) for r in rows) for side in ("stock", "verishape")},
        "inputs_matching_eager": {side: sum(r[side].get("matches_eager", 0) for r in rows)
                                  for side in ("stock", "verishape")},
        "bad_inputs_rejected": {side: sum(r[side].get("bad_rejected", 0) for r in rows)
                                for side in ("stock", "verishape")},
        "assert_nodes_where_both_export": {side: sum(r[side]["assert_nodes"] for r in both)
                                           for side in ("stock", "verishape")},
        "export_time_ratio_median_where_both_export": statistics.median(ratios) if ratios else None,
        "dde_errors_naming_a_check": {
            "verishape": sum(1 for r in rows if r.get("suggestions", {}).get("named_a_check")),
            "of": sum(1 for r in rows if r["verishape"]["outcome"] == "dde")},
        "exported_after_applying_the_checks": sum(1 for r in rows
                                                  if r.get("suggestions", {}).get("outcome") == "exported"
                                                  and r["suggestions"]["matches_eager"] == r["inputs"]),
        "programs_where_both_export": len(both),
    }


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    def cell(e: dict[str, Any], r: dict[str, Any]) -> str:
        if e["outcome"] != "exported":
            return e["outcome"].upper() if e["outcome"] == "dde" else "error"
        return f"ok {e['matches_eager']}/{r['inputs']}, bad {e['bad_rejected']}/{r['bad_inputs']}, {e['assert_nodes']} asserts"

    lines = ["| program | facts | provable | stock | verishape | time ratio |", "|---|---|---|---|---|---|"]
    for r in rows:
        s, v = r["stock"], r["verishape"]
        ratio = (f"{v['export_s'] / s['export_s']:.2f}x" if s["outcome"] == v["outcome"] == "exported" else "-")
        lines.append(f"| `{r['program']}` | {r['facts']} | {'yes' if r['provable'] else 'control'} | "
                     f"{cell(s, r)} | {cell(v, r)} | {ratio} |")
    suggested = [r for r in rows if r.get("suggestions")]
    if suggested:
        lines += ["", "| control | checks named (applied in turn) | rejects nothing eager accepts | re-export |",
                  "|---|---|---|---|"]
        for r in suggested:
            sug = r["suggestions"]
            checks = "; ".join(f"`{a['check']}`" for a in sug["applied"]) or "none"
            nothing = ", ".join("yes (proved)" if a["rejects_nothing_eager_accepts"] else "no" for a in sug["applied"])
            result = (f"exported, {sug['matches_eager']}/{r['inputs']} equal eager" if sug["outcome"] == "exported"
                      else sug["outcome"])
            lines.append(f"| `{r['program']}` | {checks} | {nothing or '-'} | {result} |")
    ratio = summary["export_time_ratio_median_where_both_export"]
    lines += ["", f"Provable programs exported: stock {summary['stock_exported_provable']}/{summary['provable']}, "
              f"verishape {summary['verishape_exported_provable']}/{summary['provable']}; controls failing with a "
              f"data-dependent error: stock {summary['controls_dde']['stock']}/{summary['controls']}, verishape "
              f"{summary['controls_dde']['verishape']}/{summary['controls']}; median export-time ratio where both "
              f"export: {ratio:.2f}x ({summary['programs_where_both_export']} programs)." if ratio else ""]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="program names (default: all)")
    args = ap.parse_args()
    programs = [p for p in PROGRAMS if not args.only or p.name in args.only]
    rows = []
    for p in programs:
        row = measure(p, args.repeat)
        rows.append(row)
        s, v = row["stock"], row["verishape"]
        print(f"{p.name:22} {'provable' if p.provable else 'control':8} stock {s['outcome']:8} "
              f"verishape {v['outcome']:8} {s['export_s']:.3f}s {v['export_s']:.3f}s "
              f"{v.get('error', '')[:60] or s.get('error', '')[:60]}", flush=True)
        if row.get("suggestions"):
            sug = row["suggestions"]
            print(f"{'':22} checks named: {[a['check'] for a in sug['applied']]} -> {sug['outcome']}", flush=True)
    summary = summarize(rows)
    report = {"benchmark": "export_corpus", "torch": torch.__version__, "python": platform.python_version(),
              "repeat": args.repeat, "summary": summary, "programs": rows}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(rows, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
