"""Fuzz every OpInfo entry that runs on CPU (``verishape fuzz-meta --all`` with a time budget).

Runs outside CI (tens of minutes); CI runs a small fixed slice (tests/test_fuzz_*.py).
Resumable: finished ops go to a JSON-lines progress file and are skipped on rerun, and an
op that killed a sequential run is recorded as a crash instead of being retried.

    python benchmarks/fuzz_campaign.py --time-budget 2.5 --jobs 1 \
        --progress benchmarks/results/fuzz_campaign.progress.jsonl \
        --json benchmarks/results/fuzz_campaign.json

``--executor ray`` runs the ops as Ray tasks (a local Ray, or a cluster with
``--ray-address HOST:6379``); ``--from NAME --first N`` takes N entries of the sorted list
starting at NAME (the fixed slice of the throughput table), ``--time-budget 0`` means no
time budget:

    python benchmarks/fuzz_campaign.py --from abs --first 24 --max-examples 10 --time-budget 0 \
        --jobs 2 --executor ray --progress '' --json /tmp/ray.json

The summary figures of a run are written up in benchmarks/FUZZ.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from verishape.fuzz.campaign import run_campaign
from verishape.fuzz.executors import make_executor
from verishape.fuzz.fuzzer import MODES, FuzzConfig
from verishape.fuzz.ops import resolve
from verishape.fuzz.report import dump
from verishape.fuzz.rootcause import KnownIssuesError, load_known


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", help="comma-separated names (default: every CPU OpInfo)")
    p.add_argument("--mode", choices=sorted(MODES), default="both")
    p.add_argument("--max-examples", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--from", dest="start", default="", metavar="NAME", help="skip the ops sorted before NAME")
    p.add_argument("--first", type=int, default=None, metavar="N", help="only the first N ops (after --from)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--executor", choices=("local", "ray"), default="local")
    p.add_argument("--ray-address", default=None, help="join this Ray cluster (with --executor ray)")
    p.add_argument("--time-budget", type=float, default=2.5, help="seconds per op, all modes together; 0: none")
    p.add_argument("--progress", default="benchmarks/results/fuzz_campaign.progress.jsonl", help="'': none")
    p.add_argument("--json", default="benchmarks/results/fuzz_campaign.json")
    p.add_argument("--known-issues", default=None, metavar="KNOWN.json",
                   help="known upstream issues to mark root causes with (benchmarks/known_upstream.json)")
    args = p.parse_args()
    try:
        known = load_known(args.known_issues) if args.known_issues else []
    except KnownIssuesError as exc:
        print(f"fuzz_campaign: {exc}", file=sys.stderr)
        return 2
    names = None if not args.ops else args.ops.split(",")
    targets = [t.full_name for t in resolve(names) if t.full_name >= args.start][:args.first]
    cfg = FuzzConfig(max_examples=args.max_examples, seed=args.seed, modes=MODES[args.mode],
                     time_budget_s=args.time_budget or None)
    executor = make_executor(args.executor, args.jobs, args.ray_address)
    start = time.monotonic()
    report = run_campaign(targets, cfg, jobs=args.jobs, progress_file=args.progress or None, executor=executor,
                          known=known)
    wall = time.monotonic() - start
    report["summary"]["wall_s"] = round(wall, 1)
    report["summary"]["ops_per_min"] = round(len(targets) / wall * 60, 1)
    report["summary"]["executor"] = f"{args.executor} jobs={args.jobs}"
    dump(report, args.json)
    print(json.dumps(report["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
