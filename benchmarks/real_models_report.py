"""The tables and summaries of ``real_models.py``: per model and sweep, compiles, compile
CPU ratios, decisions, guard lines and differences against eager, for the process-per-
variant runs (:func:`markdown`, :func:`summary`) and the interleaved ones
(:func:`interleave_markdown`, :func:`interleave_summary`), and the report files they go
into (:func:`write_report`, :func:`write_interleave_report`)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

#: the sweeps' names (``real_models.SWEEPS``'s keys)
SWEEP_NAMES = ("batch", "seq")


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or not b:
        return "-"
    return f"{a / b:.2f}x"


def markdown(rows: list[dict[str, Any]]) -> str:
    """One line per model and sweep: compiles per variant, compile CPU ratio
    verishape/stock, decisions and undecided, shape-guard lines, guard-check ratio, max
    abs diff against eager."""
    out = [("| model | sweep | compiles stock / verishape / widen | compile CPU s stock | ratio verishape | "
            "ratio widen | decided / undecided | range-only questions | decide s (Z3 s, premises s) | "
            "guard lines stock / verishape | guard check ratio | max diff stock / verishape |"),
           "|---|---|---|---:|---:|---:|---|---:|---|---|---:|---|"]
    for r in rows:
        by = r["variants"]
        stock = by.get("stock", {})
        for sweep, s in stock.get("sweeps", {}).items():
            v = by.get("verishape", {}).get("sweeps", {}).get(sweep, {})
            w_run = by.get("widen", {})
            w = w_run.get("sweeps", {}).get(sweep, {}) if w_run.get("available") else None
            vs = v.get("verishape", {})
            widen_compiles = "n/a" if w is None else w.get("compiles", "-")
            out.append(
                f"| {r['model']}{' (' + r['start'] + ')' if r.get('start') else ''} | {sweep} | {s['compiles']} / "
                f"{v.get('compiles', '-')} / {widen_compiles} | "
                f"{s['compile_cpu_s']:.2f} | {_ratio(v.get('compile_cpu_s'), s['compile_cpu_s'])} | "
                f"{'n/a' if w is None else _ratio(w.get('compile_cpu_s'), s['compile_cpu_s'])} | "
                f"{vs.get('decided', '-')} / {vs.get('undecided', '-')} | {vs.get('range_only_questions', '-')} | "
                f"{vs.get('decide_s', 0):.2f} ({vs.get('z3_s', 0):.2f}, {vs.get('premises_s', 0):.2f}) | "
                f"{s['shape_guard_lines']} / {v.get('shape_guard_lines', '-')} | "
                f"{_ratio(v.get('guard_check_us'), s['guard_check_us'])} | "
                f"{s['max_abs_diff']:.1e} / {v.get('max_abs_diff', float('nan')):.1e} |")
    errors = [f"- {r['model']} {name}: {run['error']}" for r in rows for name, run in r["variants"].items()
              if "error" in run]
    return "\n".join(out + ([""] + errors if errors else [])) + "\n"


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = []
    for r in rows:
        for sweep, s in r["variants"].get("stock", {}).get("sweeps", {}).items():
            v = r["variants"].get("verishape", {}).get("sweeps", {}).get(sweep)
            if v and s["compile_cpu_s"]:
                ratios.append(v["compile_cpu_s"] / s["compile_cpu_s"])
    return {"compile_cpu_ratio_median": statistics.median(ratios) if ratios else None,
            "compile_cpu_ratio_max": max(ratios) if ratios else None}


def interleave_markdown(rows: list[dict[str, Any]], other: str, backend: str) -> str:
    """One line per model and sweep: backend compiles, median compile CPU of each side and
    their ratio, the size-1 call (stock's recompile vs what replaced it), max difference."""
    out = [f"| model | sweep | compiles stock / {other} | compile CPU s stock | {other} | ratio | "
           f"size-1 call s stock / {other} | max abs diff vs eager |",
           "|---|---|---|---:|---:|---:|---|---:|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | - | error: {r['error'][:80]} | | | | | |")
            continue
        for sweep, f in r["sweeps"].items():
            c = f["compiles"]
            out.append(f"| {r['model']} | {sweep} | {'/'.join(map(str, c['stock']))} / {'/'.join(map(str, c[other]))} | "
                       f"{f['median_s']['stock']:.2f} | {f['median_s'][other]:.2f} | {f['ratio']:.2f}x | "
                       f"{f['size_1_call_cpu_s']['stock']:.2f} / {f['size_1_call_cpu_s'][other]:.2f} | "
                       f"{max(f['max_abs_diff'].values()):.1e} |")
    return f"backend: {backend}\n\n" + "\n".join(out) + "\n"


def interleave_summary(rows: list[dict[str, Any]], other: str) -> dict[str, Any]:
    """Per sweep: models with fewer backend compiles than stock, the median and max ratio
    of compile CPU, and the largest difference against eager."""
    out: dict[str, Any] = {}
    for sweep in SWEEP_NAMES:
        fs = [r["sweeps"][sweep] for r in rows if sweep in r.get("sweeps", {})]
        if not fs:
            continue
        ratios = [f["ratio"] for f in fs if f["ratio"] is not None]
        out[sweep] = {"models": len(fs),
                      "fewer_compiles": sum(max(f["compiles"][other]) < min(f["compiles"]["stock"]) for f in fs),
                      "ratio_median": statistics.median(ratios) if ratios else None,
                      "ratio_max": max(ratios) if ratios else None,
                      "max_abs_diff": max(max(f["max_abs_diff"].values()) for f in fs)}
    return out


def combined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant's rounds as one run: the first round's figures, with the median compile
    CPU time and the best guard-check times of all rounds (each round's compile CPU kept
    under ``compile_cpu_s_rounds``).  A round that failed is kept only if all did."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    out = json.loads(json.dumps(ok[0]))
    for sweep, figures in out.get("sweeps", {}).items():
        same = [r["sweeps"][sweep] for r in ok if sweep in r.get("sweeps", {})]
        figures["compile_cpu_s_rounds"] = [f["compile_cpu_s"] for f in same]
        figures["compile_cpu_s"] = statistics.median(figures["compile_cpu_s_rounds"])
        for key in ("guard_check_us", "shape_guard_fn_us"):
            values = [f[key] for f in same if f.get(key) is not None]
            figures[key] = min(values) if values else None
    return out


def write_report(args: argparse.Namespace, rows: list[dict[str, Any]], sweeps: dict[str, Any],
                 start: float) -> dict[str, Any]:
    """The process-per-variant run's JSON (``args.json``) and table (``args.markdown``)."""
    report = {"benchmark": "real_models", "backend": args.backend, "rounds": args.rounds, "sweeps": sweeps,
              "torch_caches": args.caches,
              "store": args.store, "wall_s": time.perf_counter() - start, "summary": summary(rows),
              "torch": version("torch"), "transformers": version("transformers"),
              "python": platform.python_version(), "cpus": os.cpu_count(), "models": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(rows))
    return report


def write_interleave_report(path: Path, args: argparse.Namespace, rows: list[dict[str, Any]], other: str,
                            start: float) -> dict[str, Any]:
    """The interleaved run's JSON (``path``) and table (beside it, ``.md``); its summary."""
    summary_ = interleave_summary(rows, other)
    path.write_text(json.dumps({"benchmark": "real_models_interleave", "backend": args.backend, "other": other,
                                "device": device_name(args.device),
                                "rounds": args.interleave, "wall_s": time.perf_counter() - start,
                                "torch": version("torch"), "transformers": version("transformers"),
                                "cpus": os.cpu_count(), "models": rows, "summary": summary_}, indent=2) + "\n")
    path.with_suffix(".md").write_text(interleave_markdown(rows, other, args.backend))
    return summary_


def device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu"


def version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None
