"""What keeping a dynamic compile for a later size-1 call costs a program that never sees size 1.

``verishape.compile`` with ``widen_specializations`` on (the default) against the same call
with it off, on tiny Hugging Face models through a batch sweep that never reaches 1 (2, 3,
4, 5): each side keeps nothing or keeps graph copies and the lowering's answer log.  One
process per model, the two taking turns for ``--rounds`` rounds after a sweep of each that is
not counted (``real_models.unmeasured_sweeps``), torch's compile caches off, median compile
CPU of each and their ratio; JSON output.

    python benchmarks/widen_overhead.py --models gpt2,bert --backend inductor --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

import real_models as rm  # noqa: E402

SHAPES = [(b, 8) for b in (2, 3, 4, 5)]


def measure(model: str, backend: str, rounds: int) -> dict:
    import torch

    import verishape

    rm.cold_caches()
    variants = {"off": lambda m, **kw: verishape.compile(m, widen_specializations=False, **kw),
                "on": lambda m, **kw: verishape.compile(m, widen_specializations=True, **kw)}
    torch.manual_seed(0)
    case = rm.MODELS[model]()
    for fn in variants.values():
        rm._warm_up(fn, backend)
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    compiles: dict[str, set[int]] = {v: set() for v in variants}
    rm.unmeasured_sweeps(case, variants, backend, SHAPES)
    for r in range(rounds):
        for v in (list(variants) if r % 2 == 0 else list(reversed(variants))):
            f = rm.run_sweep(case, variants[v], backend, SHAPES, checks=10)
            cpu[v].append(f["compile_cpu_s"])
            compiles[v].add(f["compiles"])
    med = {v: statistics.median(xs) for v, xs in cpu.items()}
    return {"model": model, "compile_cpu_s": cpu, "median_s": med, "compiles": {v: sorted(c) for v, c in compiles.items()},
            "ratio_on_off": med["on"] / med["off"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,bert,llama")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "widen_overhead.json")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds: got {args.rounds}; use 1 or more")
    unknown = [m for m in args.models.split(",") if m not in rm.MODELS]
    if unknown:
        ap.error(f"--models: unknown model(s) {', '.join(unknown)}; choose among {', '.join(rm.MODELS)}")
    start = time.perf_counter()
    rows = []
    for model in args.models.split(","):
        row = measure(model, args.backend, args.rounds)
        rows.append(row)
        print(f"{model:11} off {row['median_s']['off']:.2f}s on {row['median_s']['on']:.2f}s "
              f"ratio {row['ratio_on_off']:.3f} compiles {row['compiles']}", flush=True)
    ratios = [r["ratio_on_off"] for r in rows]
    out = {"benchmark": "widen_overhead", "backend": args.backend, "rounds": args.rounds, "shapes": SHAPES,
           "torch": rm._version("torch"), "wall_s": time.perf_counter() - start, "models": rows,
           "ratio_median": statistics.median(ratios)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"ratio_median": out["ratio_median"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
