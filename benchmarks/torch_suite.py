"""PyTorch's own tests, stock and with VeriShapeEnv in every torch module, side by side.

Runs the given test files (from a PyTorch checkout: this repository holds none of them) with
pytest twice per file, each side in a process of its own (stock first, then verishape, by
``torch_suite_plugin.py``), and compares test by test:

* **outcomes**: passed, failed, error, skipped, xfailed, xpassed.  Any difference is listed.
  A test in which verishape built no ShapeEnv ran none of its code; its outcomes are counted
  apart (``untouched``), never as agreement.
* **seconds** (each process with torch's caches in an empty folder of its own, so neither side
  loads what the other compiled): each side's total over the tests both ran, their ratio, and the tests in which
  verishape spent ``--slower-s`` more than stock (default 0.5 s) and at least 1.5x, with the
  solver's calls, seconds and over-budget questions in them.  Each such test runs again, alone,
  ``--recheck`` times on each side, taking turns; only one slower in the median of those
  reruns too is reported as ``slower`` (the rest as ``noise``).

    python benchmarks/torch_suite.py ~/pytorch/test/dynamo/test_unspec.py \\
        ~/pytorch/test/test_dynamic_shapes.py --json benchmarks/results/torch_suite.json

Exit status 0 when both sides ran every file, 2 for a file that is missing or that pytest could
not collect (one line naming it).  The report's ``pytorch_commit`` is ``--commit`` as given: say
which PyTorch revision the files came from.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("stock", "verishape")
#: pytest's "no tests collected" and "usage error" exit statuses: the file did not run
_NOT_RUN = (2, 3, 4, 5)


def run_side(side: str, files: list[str], select: str | None, timeout: int) -> tuple[dict[str, dict[str, Any]], int, str]:
    """One pytest process over ``files`` on ``side``: every test's row (the plugin's), pytest's
    exit status and the tail of its output."""
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out, tempfile.TemporaryDirectory() as caches:
        # torch's caches in an empty folder per process: no side loads graphs or kernels the other built
        env = {**os.environ, "TORCH_SUITE_SIDE": side, "TORCH_SUITE_OUT": out.name, "TORCHINDUCTOR_CACHE_DIR": caches,
               "PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")]),
               "VERISHAPE_PROOF_STORE": "off"}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "torch_suite_plugin", "-p", "no:cacheprovider",
               "-o", "addopts=", "--rootdir", str(Path(files[0]).parent), *(["-k", select] if select else []), *files]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=Path(files[0]).parent)
            status, tail = proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            status, tail = 124, [f"timed out after {timeout} s"]
        rows = {}
        for line in out.read().splitlines():
            row = json.loads(line)
            rows[row.pop("test")] = row
    return rows, status, " | ".join(tail)


def compare(stock: dict[str, dict[str, Any]], veri: dict[str, dict[str, Any]], slower_s: float) -> dict[str, Any]:
    """Outcomes and seconds test by test (tests both sides ran)."""
    both = sorted(set(stock) & set(veri))
    touched = [t for t in both if veri[t].get("envs_built", 0)]
    differ = [{"test": t, "stock": stock[t]["outcome"], "verishape": veri[t]["outcome"]}
              for t in both if stock[t]["outcome"] != veri[t]["outcome"]]
    slow = [{"test": t, "stock_s": round(stock[t]["seconds"], 3), "verishape_s": round(veri[t]["seconds"], 3),
             **{k: veri[t].get(k) for k in ("solver_calls", "solver_s", "over_budget")}}
            for t in both if veri[t]["seconds"] - stock[t]["seconds"] > slower_s
            and veri[t]["seconds"] > 1.5 * stock[t]["seconds"]]
    total = {side: sum(rows[t]["seconds"] for t in both) for side, rows in (("stock", stock), ("verishape", veri))}
    return {"tests": len(both), "only_stock": sorted(set(stock) - set(veri)), "only_verishape": sorted(set(veri) - set(stock)),
            "touched": len(touched), "untouched": len(both) - len(touched),
            "identical_touched": sum(1 for t in touched if stock[t]["outcome"] == veri[t]["outcome"]),
            "differ": differ, "seconds": {k: round(v, 2) for k, v in total.items()},
            "ratio": round(total["verishape"] / total["stock"], 3) if total["stock"] else None,
            "solver_calls": sum(veri[t].get("solver_calls", 0) for t in both),
            "solver_s": round(sum(veri[t].get("solver_s", 0.0) for t in both), 3),
            "over_budget": sum(veri[t].get("over_budget", 0) for t in both),
            "candidates_slower": slow,
            # where the seconds went: the tests that differ most, either way
            "largest_differences": sorted(([t, round(stock[t]["seconds"], 3), round(veri[t]["seconds"], 3)] for t in both),
                                          key=lambda r: -abs(r[2] - r[1]))[:10]}


def recheck(path: str, slow: list[dict[str, Any]], times: int, timeout: int) -> None:
    """Each test in ``slow`` again, alone, ``times`` times per side taking turns: the medians, and
    whether it stays slower (``verdict``: ``slower`` or ``noise``)."""
    for row in slow:
        name = row["test"].split("::", 1)[1]
        seconds: dict[str, list[float]] = {side: [] for side in SIDES}
        for i in range(times):
            for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                rows, _, _ = run_side(side, [f"{path}::{name}"], None, timeout)
                seconds[side] += [r["seconds"] for r in rows.values()]
        med = {side: statistics.median(s) if s else None for side, s in seconds.items()}
        row["recheck_s"] = {side: (round(m, 3) if m is not None else None) for side, m in med.items()}
        ok = all(m is not None for m in med.values())
        row["verdict"] = ("slower" if ok and med["verishape"] - med["stock"] > 0.5 * (row["verishape_s"] - row["stock_s"])
                          and med["verishape"] > 1.5 * med["stock"] else "noise" if ok else "did not rerun")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="PyTorch test files (from a checkout)")
    ap.add_argument("-k", dest="select", help="pytest's -k expression, for both sides")
    ap.add_argument("--slower-s", type=float, default=0.5, help="seconds more than stock that make a test a candidate")
    ap.add_argument("--recheck", type=int, default=3, help="reruns per side of each candidate (0: none)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per pytest process")
    ap.add_argument("--commit", default="unknown", help="the PyTorch revision the files came from")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    for f in args.files:
        if not Path(f).is_file():
            print(f"torch_suite: {f}: no such file (give test files of a PyTorch checkout)", file=sys.stderr)
            return 2
    import torch

    report: dict[str, Any] = {"torch": torch.__version__, "pytorch_commit": args.commit, "files": {}}
    for f in args.files:
        start = time.perf_counter()
        ran = {}
        for side in SIDES:
            rows, status, tail = ran[side] = run_side(side, [f], args.select, args.timeout)
            if status in _NOT_RUN or (not rows and status != 0):
                print(f"torch_suite: {f}: pytest did not run it on the {side} side (exit {status}): {tail}",
                      file=sys.stderr)
                return 2
        result = compare(ran["stock"][0], ran["verishape"][0], args.slower_s)
        result["pytest_exit"] = {side: ran[side][1] for side in SIDES}
        if args.recheck:
            recheck(f, result["candidates_slower"], args.recheck, args.timeout)
        result["wall_s"] = round(time.perf_counter() - start, 1)
        report["files"][Path(f).name] = result
        slower = [r for r in result["candidates_slower"] if r.get("verdict", "slower") == "slower"]
        print(f"{Path(f).name}: {result['tests']} tests ({result['touched']} built a VeriShapeEnv), outcomes "
              f"identical in {result['identical_touched']} of those, {len(result['differ'])} differ; seconds "
              f"{result['seconds']['stock']} / {result['seconds']['verishape']} ({result['ratio']}x); solver "
              f"{result['solver_calls']} calls, {result['solver_s']} s; slower by > {args.slower_s} s: {len(slower)}")
        for row in result["differ"]:
            print(f"  DIFFERS {row['test']}: stock {row['stock']}, verishape {row['verishape']}")
        for row in slower:
            print(f"  SLOWER {row['test']}: {row.get('recheck_s', row)} (solver {row['solver_calls']} calls, "
                  f"{row['solver_s']} s)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
