"""Proof store: cold vs warm compiles of the same programs, and `verishape proofs check`
throughput (z3 vs cvc5).

Each side runs in a fresh interpreter, so nothing but the store file carries over:

* ``off``  - ``VERISHAPE_PROOF_STORE=off``: verishape as without a store;
* ``cold`` - a new, empty store: every obligation goes to Z3 and is written;
* ``warm`` - the store the cold run filled: answers come from disk.

Each child compiles every program of ``tests/dde_corpus.py`` with ``verishape.compile``
(backend ``aot_eager``, ``fullgraph=True``, ``dynamic=True``, as ``benchmarks/dde_corpus.py``)
on all its inputs and reports per program the first-call time, the time spent deciding
(the ShapeEnv's solver time: store lookups included), Z3's own time, store hits and
solver calls, and the outcome of each input (warm must equal cold).  Rounds repeat the
three sides; the summary takes medians over rounds.

Then ``verishape proofs check`` re-decides the warm store with z3 and with cvc5.

    python benchmarks/proof_store.py [--rounds 3] [--out benchmarks/results/proof_store]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("off", "cold", "warm")


# ------------------------------------------------------------------ child: one compile run


def child(out: Path) -> None:
    """Compile the corpus once in this (fresh) process and write the measurements."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    t0 = time.perf_counter()
    import torch
    from compile_helpers import capturing, is_dde
    from dde_corpus import PROGRAMS

    from verishape import solvers
    import verishape

    import_s = time.perf_counter() - t0
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    prover = solvers.default_prover()
    rows = []
    for program in PROGRAMS:
        torch._dynamo.reset()
        prover.clear_cache()  # each program starts without the in-memory cache: the store is what is measured
        before = prover.stats.as_dict()
        envs: list[object] = []
        fn = verishape.compile(program.fn, backend=capturing(envs), fullgraph=True, dynamic=True)
        outcomes, first_call_s = [], None
        start = time.perf_counter()
        for args in program.inputs:
            call = time.perf_counter()
            try:
                outcomes.append("ok" if torch.equal(fn(*args), program.fn(*args)) else "mismatch")
            except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
                outcomes.append("dde" if is_dde(exc) else type(exc).__name__)
            if first_call_s is None:
                first_call_s = time.perf_counter() - call
        total_s = time.perf_counter() - start
        after = prover.stats.as_dict()
        logs = [e.verishape_log for e in envs if hasattr(e, "verishape_log")]
        rows.append({
            "program": program.name, "outcomes": ",".join(outcomes), "first_call_s": first_call_s, "total_s": total_s,
            "decide_s": sum(log.solver_time_s for log in logs),
            "z3_s": after["solver_time_s"] - before["solver_time_s"],
            "solver_calls": int(after["solver_calls"] - before["solver_calls"]),
            "store_hits": int(after["store_hits"] - before["store_hits"]),
            "answers_from_store": sum(log.from_store()[0] for log in logs),
        })
    out.write_text(json.dumps({"import_s": import_s, "programs": rows}))


# ------------------------------------------------------------------ parent


def run_side(side: str, store: Path, work: Path) -> dict:
    out = work / f"{side}.json"
    env = dict(os.environ, VERISHAPE_PROOF_STORE="off" if side == "off" else str(store))
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", str(out)], env=env, check=True, cwd=ROOT)
    data = json.loads(out.read_text())
    data["process_s"] = time.perf_counter() - start
    return data


def totals(run: dict) -> dict:
    rows = run["programs"]
    first = sum(r["first_call_s"] for r in rows)
    decide = sum(r["decide_s"] for r in rows)
    return {
        "first_call_s": first, "all_calls_s": sum(r["total_s"] for r in rows), "decide_s": decide,
        "z3_s": sum(r["z3_s"] for r in rows), "decide_share_of_first_calls": decide / first if first else None,
        "solver_calls": sum(r["solver_calls"] for r in rows), "store_hits": sum(r["store_hits"] for r in rows),
        "process_s": run["process_s"],
    }


def check_throughput(store: Path, solver: str, jobs: int) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "verishape", "proofs", "check", "--store", str(store),
                           "--solver", solver, "--jobs", str(jobs), "--json"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"proofs check --solver {solver} failed: {done.stderr.strip()[-500:]}")
    report = json.loads(done.stdout)
    return {"solver": report["solver"], "jobs": jobs, "obligations": report["records"],
            "check_s": report["seconds"], "command_s": wall, "obligations_per_s": report["obligations_per_s"],
            "agree": sum(report["agree"].values()), "disagreements": len(report["disagreements"]),
            "not_redecided": report["not_redecided"], "not_redecided_by_reason": report["not_redecided_by_reason"],
            "bad_counterexamples": len(report["bad_counterexamples"]), "clean": report["clean"]}


def median_summary(rounds: list[dict]) -> dict:
    out = {}
    for side in SIDES:
        per = [totals(r[side]) for r in rounds]
        out[side] = {k: statistics.median(p[k] for p in per) if per[0][k] is not None else None for k in per[0]}
    cold, warm = out["cold"], out["warm"]
    out["warm_over_cold_first_call"] = warm["first_call_s"] / cold["first_call_s"]
    out["cold_over_off_first_call"] = cold["first_call_s"] / out["off"]["first_call_s"]
    out["same_outcomes"] = all(
        [p["outcomes"] for p in r["warm"]["programs"]] == [p["outcomes"] for p in r["cold"]["programs"]]
        == [p["outcomes"] for p in r["off"]["programs"]] for r in rounds)
    return out


def markdown(report: dict) -> str:
    s = report["summary"]
    title = (f"Proof store, {report['programs']} programs of tests/dde_corpus.py (aot_eager), median of "
             f"{report['rounds']} rounds, {report['machine']}:")
    lines = [
        title,
        "",
        "| side | first calls (s) | deciding (s) | of which Z3 (s) | deciding share | Z3 calls | store hits |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side in SIDES:
        t = s[side]
        lines.append(f"| {side} | {t['first_call_s']:.2f} | {t['decide_s']:.2f} | {t['z3_s']:.2f} | "
                     f"{t['decide_share_of_first_calls']:.0%} | {t['solver_calls']:.0f} | {t['store_hits']:.0f} |")
    ratios = (f"warm/cold first-call time: {s['warm_over_cold_first_call']:.2f}; cold/off: "
              f"{s['cold_over_off_first_call']:.2f}; same outcomes on every side: {s['same_outcomes']}")
    lines += ["", ratios, "",
              "| `proofs check` | obligations | seconds | obligations/s | agree | disagree | not re-decided |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for c in report["check"]:
        lines.append(f"| {c['solver']} (--jobs {c['jobs']}) | {c['obligations']} | {c['check_s']:.1f} | "
                     f"{c['obligations_per_s']} | {c['agree']} | {c['disagreements']} | {c['not_redecided']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for `proofs check`")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "proof_store",
                    help="writes OUT.json and OUT.md")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return 0
    rounds = []
    with tempfile.TemporaryDirectory(prefix="verishape-proof-store-") as tmp:
        work = Path(tmp)
        for i in range(args.rounds):
            store = work / f"round{i}.sqlite"
            rounds.append({side: run_side(side, store, work) for side in SIDES})
            t = {side: totals(rounds[-1][side]) for side in SIDES}
            print(f"round {i + 1}: first calls off {t['off']['first_call_s']:.2f} s, cold {t['cold']['first_call_s']:.2f} s "
                  f"({t['cold']['solver_calls']} Z3 calls), warm {t['warm']['first_call_s']:.2f} s "
                  f"({t['warm']['solver_calls']} Z3 calls, {t['warm']['store_hits']} hits)", file=sys.stderr)
        check = [check_throughput(store, solver, args.jobs) for solver in ("z3", "cvc5")]
    import torch

    report = {
        "benchmark": "proof_store", "torch": torch.__version__, "python": platform.python_version(),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}", "rounds": args.rounds,
        "programs": len(rounds[0]["cold"]["programs"]), "summary": median_summary(rounds), "check": check,
        "runs": rounds,
    }
    text = markdown(report)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
