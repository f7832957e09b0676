"""A campaign of the widening fuzzer: random programs, swept to size 1, on both backends.

Programs are drawn with hypothesis from the grammar of ``verishape/fuzz/widen_programs.py``
(a fixed seed: the same programs every run), each run through its sweep under
``verishape.compile`` and compared call by call with eager
(``verishape/fuzz/widen_check.py``).  Programs run in worker processes (``--jobs``), so a
program that crashes its process is counted as a crash, not the end of the campaign.

Reported per backend (JSON): programs run, how many reused a generic artifact at 1
(reuse rate over the programs whose sweep compiled), wrong calls (a reused call that
differs from eager where stock torch.compile does not; each with its program's source),
other differences (stock's own), crashes, and refusal reasons by kind.

    python benchmarks/widen_fuzz.py --programs 300 --seed 0 --jobs 2 --json benchmarks/results/widen_fuzz.json
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import json
import os
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("inductor", "aot_eager")


#: programs drawn per hypothesis run (each run has its own seed): one long run mostly
#: mutates a few programs, many short runs spread over the grammar
PER_RUN = 5


def draw(n: int, seed: int, max_ops: int) -> list[Any]:
    """``n`` programs from the grammar, the same for the same seed: short hypothesis runs
    of :data:`PER_RUN` examples with seeds ``seed``, ``seed + 1``, ..., each run's first
    example (hypothesis starts from the simplest) left out; duplicates dropped."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from verishape.fuzz.widen_programs import programs

    out: list[Any] = []
    seen: set[str] = set()
    run = 0
    while len(out) < n and run < 50 * n:
        got: list[Any] = []

        @hseed(seed + run)
        @settings(max_examples=PER_RUN + 1, phases=[Phase.generate], database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(programs(max_ops=max_ops))
        def collect(p: Any) -> None:
            got.append(p)

        collect()
        for p in got[1:]:
            if p.lines and p.source not in seen and len(out) < n:
                seen.add(p.source)
                out.append(p)
        run += 1
    return out


def run_one(program: Any, backend: str, device: str | None = None, layouts: bool = False,
            warm: bool = False, one_early: bool = False, declared: bool = False, phases: bool = False) -> dict[str, Any]:
    """Worker: one program's sweep on one backend."""
    import warnings

    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("torch").setLevel(logging.CRITICAL)
    from verishape.fuzz.widen_check import reason_class, run_sweep
    from verishape.fuzz.widen_programs import eager_accepts, layout_sweep, one_early_sweep, phase_sweep

    start = time.perf_counter()
    if not eager_accepts(program):
        return {"status": "invalid"}
    make_args, sizes = layout_sweep(program) if layouts else (program.make_args, program.sweep)
    if one_early and not layouts:
        sizes = one_early_sweep(program)
    extra: dict[str, Any] = {}
    if declared and not layouts:
        # the swept size declared 1..16 where it is a whole dimension, the first call at 1:
        # the compile at 2 and its proofs (Note [A declared size at 1 is compiled at 2])
        sizes, extra["shapes_spec"] = declared_sweep(program)
    fn = program.function()
    if phases:
        fn, make_args, sizes = phase_sweep(program)
    sweep = run_sweep(fn, make_args, sizes, backend=backend, device=device, warm=warm, **extra)
    out = sweep.to_dict()
    out.update(status="ran", seconds=time.perf_counter() - start,
               refusal_kinds=sorted({reason_class(r) for r in sweep.refusals}))
    return out


def declared_sweep(program: Any) -> tuple[list[int], dict[str, Any]]:
    """Sizes 1, first, 1, later, second, 1, and a ``shapes_spec`` declaring the swept size
    ``B`` (1..16) wherever it is a whole dimension of an input."""
    from torch.fx.experimental.dynamic_spec import ShapeVar, TensorSpec

    from verishape.fuzz.widen_programs import B

    b = ShapeVar("B", min=1, max=16)
    first, second, _, later, _ = program.sweep
    spec = {name: TensorSpec([b if d == B else None for d in shape]) for name, shape in program.inputs}
    return [1, first, 1, later, second, 1], spec


def campaign(programs: list[Any], backends: tuple[str, ...], jobs: int,
             device: str | None = None, layouts: bool = False, warm: bool = False,
             one_early: bool = False, declared: bool = False, phases: bool = False) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {b: [None] * len(programs) for b in backends}  # type: ignore[list-item]
    todo = [(i, b) for b in backends for i in range(len(programs))]
    ctx = multiprocessing.get_context("spawn")
    while todo:
        with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {pool.submit(run_one, programs[i], b, device, layouts, warm, one_early, declared, phases): (i, b) for i, b in todo}
            todo = []
            broken = False
            for fut in cf.as_completed(futures):
                i, b = futures[fut]
                try:
                    results[b][i] = fut.result()
                except cf.process.BrokenProcessPool:
                    broken = True
                    results[b][i] = None  # decided below
                    todo.append((i, b))
            if broken:
                # a worker died: run what it took down one at a time, so the culprit is known
                retry, todo = todo, []
                for i, b in retry:
                    with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as solo:
                        try:
                            results[b][i] = solo.submit(run_one, programs[i], b, device, layouts, warm, one_early, declared,
                                                               phases).result()
                        except cf.process.BrokenProcessPool:
                            results[b][i] = {"status": "crash"}
    return results


def summarize(programs: list[Any], results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for backend, rows in results.items():
        ran = [r for r in rows if r["status"] == "ran"]
        compiled = [r for r in ran if r["compiles"] > 0]
        reused = [r for r in compiled if r["reuses"] > 0]
        kinds = collections.Counter(k for r in compiled if not r["reuses"] for k in r["refusal_kinds"])
        out[backend] = {
            "programs": len(rows), "ran": len(ran), "invalid": sum(r["status"] == "invalid" for r in rows),
            "crashes": sum(r["status"] == "crash" for r in rows), "compiled": len(compiled),
            "reused": len(reused), "reuse_rate": len(reused) / len(compiled) if compiled else None,
            "reused_calls": sum(r["reuses"] for r in ran),
            "wrong": [{"program": programs[i].source, "sweep": programs[i].sweep, "wrong": r["wrong"]}
                      for i, r in enumerate(rows) if r["status"] == "ran" and r["wrong"]],
            "other_differences": [{"program": programs[i].source, "differences": r["other_differences"]}
                                  for i, r in enumerate(rows) if r["status"] == "ran" and r["other_differences"]],
            "refusal_reasons": dict(kinds.most_common()),
            # --warm: programs that reused at a size in the cold process and not in the warm one
            "lost_when_warm": [{"program": programs[i].source, "refusals": r["refusals"][:2]}
                               for i, r in enumerate(rows) if r["status"] == "ran" and r.get("cold_reused")
                               and any(c and not w for c, w in zip(r["cold_reused"], r["reused"]))],
            "seconds": sum(r.get("seconds", 0.0) for r in ran),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-ops", type=int, default=6)
    ap.add_argument("--backend", choices=(*BACKENDS, "both"), default="both")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda", "triton-cpu"), default="cpu",
                    help="cuda: Triton kernels on the GPU; triton-cpu: Inductor's Triton codegen on the CPU, kernels "
                         "in Triton's interpreter")
    ap.add_argument("--layouts", action="store_true",
                    help="sweep input layouts too: a size -n is n with every input of rank >= 2 in reversed "
                         "dimension order (first, second, -second, -later, 1, -1)")
    ap.add_argument("--warm", action="store_true",
                    help="torch's caches on: each sweep runs cold, then again served by the caches (a restart, "
                         "with the widening records); the warm run is the one checked against eager")
    ap.add_argument("--one-early", action="store_true",
                    help="size 1 right after the first size (first, 1, later, 1, second): the recompile at 1 "
                         "traces a candidate generic in the size (compiler/widen/candidate.py)")
    ap.add_argument("--declared", action="store_true",
                    help="the swept size declared 1..16 (shapes_spec) and the first call at 1 (1, first, 1, later, "
                         "second, 1): a compile at 2 served at 1 by proof (compiler/declared.py)")
    ap.add_argument("--phases", action="store_true",
                    help="called as a served decoder's forward: an extra state argument, None in a prefill and a "
                         "tensor of the swept size in a decode step -n (first, -first, 1, later, -1, second): a "
                         "prefill at 1 after a decode step traces a candidate")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "widen_fuzz.json")
    args = ap.parse_args(argv)
    if args.programs < 1 or args.jobs < 1:
        print(f"widen_fuzz: --programs and --jobs must be at least 1 (got {args.programs}, {args.jobs})",
              file=sys.stderr)
        return 2
    if args.device == "triton-cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # the workers import Triton: interpreted (verishape.fuzz.triton_cpu)
    import torch

    backends = BACKENDS if args.backend == "both" else (args.backend,)
    start = time.perf_counter()
    programs = draw(args.programs, args.seed, args.max_ops)
    results = campaign(programs, backends, args.jobs, None if args.device == "cpu" else args.device, args.layouts,
                       args.warm, args.one_early, args.declared, args.phases)
    summary = summarize(programs, results)
    report = {"torch": torch.__version__, "device": args.device, "layouts": args.layouts, "warm": args.warm, "one_early": args.one_early,
              "declared": args.declared, "phases": args.phases,
              "seed": args.seed,
              "max_ops": args.max_ops,
              "jobs": args.jobs,
              "wall_s": time.perf_counter() - start, "summary": summary,
              "programs": [{"source": p.source, "sweep": p.sweep,
                            **{b: results[b][i] for b in backends}} for i, p in enumerate(programs)]}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, default=str))
    for b, s in summary.items():
        rate = f"{s['reuse_rate']:.0%}" if s["reuse_rate"] is not None else "-"
        print(f"{b}: {s['programs']} programs ({s['invalid']} invalid, {s['crashes']} crashed), "
              f"{s['compiled']} compiled, reused{'' if args.layouts else ' at 1'}: {s['reused']} ({rate}), wrong: {len(s['wrong'])}, "
              f"stock's own differences: {len(s['other_differences'])}"
              + (f", reused cold but not warm: {len(s['lost_when_warm'])}" if args.warm else ""))
        for reason, n in list(s["refusal_reasons"].items())[:8]:
            print(f"    {n:4d}  {reason}")
    print(f"torch {torch.__version__}; {report['wall_s']:.0f} s; JSON: {args.json}")
    return 1 if any(s["wrong"] for s in summary.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
