"""The adversarial widening corpus (``tests/widen_corpus.py``) on both backends, with JSON.

Every program is swept to size 1 under ``verishape.compile`` and compared with eager call
by call (``verishape/fuzz/widen_check.py``).  Reported per backend: programs that reused a
generic artifact at 1, wrong calls (a reuse that differs from eager where stock does not),
stock's own differences, and refusal reasons by kind; per program, its group, reuses and
reasons.  The slow test ``tests/test_widen_corpus.py`` asserts the same on every run.

    python benchmarks/widen_corpus.py --json benchmarks/results/widen_corpus.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("inductor", "aot_eager", "both"), default="both")
    ap.add_argument("--only", default="", help="comma-separated program names (default: all)")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "widen_corpus.json")
    args = ap.parse_args(argv)
    import logging
    import warnings

    import torch

    from verishape.fuzz.widen_check import reason_class, run_sweep
    from widen_corpus import CASES

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    only = {n for n in args.only.split(",") if n}
    unknown = only - {c.name for c in CASES}
    if unknown:
        print(f"widen_corpus: --only names no program: {sorted(unknown)}", file=sys.stderr)
        return 2
    backends = ("inductor", "aot_eager") if args.backend == "both" else (args.backend,)
    rows: dict[str, dict[str, dict]] = {}
    summary: dict[str, dict] = {}
    for backend in backends:
        reasons: collections.Counter[str] = collections.Counter()
        wrong, other, reused, start = [], [], 0, time.perf_counter()
        for c in CASES:
            if only and c.name not in only:
                continue
            sweep = run_sweep(c.fn, c.make, c.sweep, backend=backend)
            row = {"group": c.group, **sweep.to_dict(),
                   "refusal_kinds": sorted({reason_class(r) for r in sweep.refusals})}
            rows.setdefault(c.name, {})[backend] = row
            reused += sweep.reuses > 0
            if not sweep.reuses:
                reasons.update(row["refusal_kinds"])
            wrong += [f"{c.name}: {w}" for w in sweep.wrong]
            other += [f"{c.name}: {w}" for w in sweep.other_differences]
        n = sum(1 for c in CASES if not only or c.name in only)
        summary[backend] = {"programs": n, "reused": reused, "wrong": wrong, "other_differences": other,
                            "refusal_reasons": dict(reasons.most_common()),
                            "seconds": time.perf_counter() - start}
        print(f"{backend}: {n} programs, reused at 1: {reused}, wrong: {len(wrong)}, "
              f"stock's own differences: {len(other)} ({summary[backend]['seconds']:.0f} s)")
        for reason, k in reasons.most_common(8):
            print(f"    {k:3d}  {reason}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"torch": torch.__version__, "summary": summary, "programs": rows}, indent=1))
    print(f"torch {torch.__version__}; JSON: {args.json}")
    return 1 if any(s["wrong"] for s in summary.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
