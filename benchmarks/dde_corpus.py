"""Data-dependent corpus: stock torch.compile against verishape.compile, in one run.

For each program of ``tests/dde_corpus.py`` (backend ``aot_eager``, ``fullgraph=True``,
``dynamic=True``, scalar outputs and dynamic-output-shape ops captured) it reports, side
by side: inputs that compiled and matched eager, data-dependent errors, other errors,
the first-call (compile) time, and for verishape the solver's time and decisions by kind.

    python benchmarks/dde_corpus.py [--json benchmarks/results/dde_corpus.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

import verishape  # noqa: E402
from compile_helpers import capturing, is_dde  # noqa: E402
from dde_corpus import PROGRAMS  # noqa: E402


def measure(compile_fn, program) -> dict[str, object]:
    torch._dynamo.reset()
    envs: list[object] = []
    cf = compile_fn(program.fn, backend=capturing(envs), fullgraph=True, dynamic=True)
    ok = dde = other = 0
    first_call_s = None
    for args in program.inputs:
        start = time.perf_counter()
        try:
            got = cf(*args)
            ok += int(torch.equal(got, program.fn(*args)))
        except Exception as exc:  # noqa: BLE001 - counted, that is the measurement
            if is_dde(exc):
                dde += 1
            else:
                other += 1
        if first_call_s is None:
            first_call_s = time.perf_counter() - start
    logs = [e.verishape_log for e in envs if hasattr(e, "verishape_log")]
    kinds: collections.Counter[str] = collections.Counter()
    for log in logs:
        kinds.update(log.counts())
    return {
        "ok": ok, "dde": dde, "other_errors": other, "first_call_s": first_call_s,
        "solver_s": sum(log.solver_time_s for log in logs), "decisions": dict(kinds),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    rows = []
    for p in PROGRAMS:
        stock = measure(torch.compile, p)
        vs = measure(verishape.compile, p)
        rows.append({"program": p.name, "facts": p.facts, "provable": p.provable, "inputs": len(p.inputs),
                     "stock": stock, "verishape": vs})
    both_ok = [r for r in rows if r["stock"]["ok"] == r["inputs"] and r["verishape"]["ok"] == r["inputs"]]
    t_stock = sum(r["stock"]["first_call_s"] for r in rows)
    t_vs = sum(r["verishape"]["first_call_s"] for r in rows)
    solver = sum(r["verishape"]["solver_s"] for r in rows)
    summary = {
        "programs": len(rows),
        "inputs": sum(r["inputs"] for r in rows),
        "stock_ok_inputs": sum(r["stock"]["ok"] for r in rows),
        "verishape_ok_inputs": sum(r["verishape"]["ok"] for r in rows),
        "stock_dde_inputs": sum(r["stock"]["dde"] for r in rows),
        "verishape_dde_inputs": sum(r["verishape"]["dde"] for r in rows),
        "dde_avoided_programs": sum(1 for r in rows if r["stock"]["dde"] and not r["verishape"]["dde"]),
        "first_call_s": {"stock": t_stock, "verishape": t_vs},
        "compile_time_ratio_where_both_compile": (
            sum(r["verishape"]["first_call_s"] for r in both_ok) / sum(r["stock"]["first_call_s"] for r in both_ok)
            if both_ok else None),
        "solver_share_of_verishape_first_calls": solver / t_vs if t_vs else None,
        "solver_s": solver,
    }
    report = {"benchmark": "dde_corpus", "torch": torch.__version__, "python": platform.python_version(),
              "summary": summary, "programs": rows}
    print(f"{'program':26} {'stock ok/dde':>12} {'verishape ok/dde':>17} {'stock s':>8} {'vs s':>7} {'solver s':>8}")
    for r in rows:
        s, v = r["stock"], r["verishape"]
        print(f"{r['program']:26} {s['ok']:>6}/{s['dde']:<5} {v['ok']:>9}/{v['dde']:<7} "
              f"{s['first_call_s']:8.3f} {v['first_call_s']:7.3f} {v['solver_s']:8.3f}")
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
