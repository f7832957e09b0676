"""PyTorch's ExportDB examples swept to size 1 under ``verishape.compile``: widening on programs not written here.

Each example of ``torch._export.db.examples`` whose inputs are positional, with a tensor among them, is called
at dimension-0 sizes 2, 3, 1, 4, 1, 5: every tensor input whose first dimension is the first tensor's gets that
size (floats drawn from a generator seeded by the size, other dtypes repeated from the example's rows).  The
sweep is :func:`verishape.fuzz.widen_check.run_sweep`'s, as for the adversarial corpus: each call compared with
eager (values, shapes, strides, storage sharing), a reuse that differs where stock does not counted wrong.
An example whose eager run fails at a size keeps that failure as its expected outcome (stock's too).

    python benchmarks/widen_exportdb.py [--backend inductor|aot_eager] [--only NAME,...] [--json F]

Exit 0: nothing wrong; 1: a wrong call; 2: bad arguments.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SWEEP = (2, 3, 1, 4, 1, 5)


def sweepable(case: Any) -> bool:
    """Positional inputs only, one of them a tensor with a first dimension."""
    import torch

    return not case.example_kwargs and any(isinstance(a, torch.Tensor) and a.dim() >= 1 for a in case.example_args)


def make_args(case: Any) -> Callable[[int], list[Any]]:
    """The example's inputs at size n (see the module docstring); the same values for the same n."""
    import torch

    first = next(a.shape[0] for a in case.example_args if isinstance(a, torch.Tensor) and a.dim() >= 1)

    def make(n: int) -> list[Any]:
        g = torch.Generator().manual_seed(100 + n)
        out: list[Any] = []
        for a in case.example_args:
            if not (isinstance(a, torch.Tensor) and a.dim() >= 1 and a.shape[0] == first):
                out.append(copy.deepcopy(a))
            elif a.is_floating_point():
                out.append(torch.randn((n, *a.shape[1:]), dtype=a.dtype, generator=g))
            else:
                out.append(a[torch.arange(n) % first].clone())
        return out

    return make


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("inductor", "aot_eager"), default="inductor")
    ap.add_argument("--only", default="", help="comma-separated example names (default: all that can be swept)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import logging

    import torch
    from torch._export.db.examples import all_examples

    from verishape.fuzz.widen_check import reason_class, run_sweep

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    examples = all_examples()
    only = {n for n in args.only.split(",") if n}
    if only - examples.keys():
        print(f"widen_exportdb: --only names no ExportDB example: {sorted(only - examples.keys())}", file=sys.stderr)
        return 2
    cases = {name: case for name, case in sorted(examples.items()) if (not only or name in only) and sweepable(case)}
    rows: dict[str, dict[str, Any]] = {}
    reasons: collections.Counter[str] = collections.Counter()
    wrong: list[str] = []
    other: list[str] = []
    start = time.perf_counter()
    for name, case in cases.items():
        sweep = run_sweep(copy.deepcopy(case.model), make_args(case), SWEEP, backend=args.backend)
        rows[name] = {**sweep.to_dict(), "refusal_kinds": sorted({reason_class(r) for r in sweep.refusals})}
        if not sweep.reuses:
            reasons.update(rows[name]["refusal_kinds"])
        wrong += [f"{name}: {w}" for w in sweep.wrong]
        other += [f"{name}: {w}" for w in sweep.other_differences]
        print(f"{name:36s} compiles {sweep.compiles}, reused {sweep.reuses}, wrong {len(sweep.wrong)}", flush=True)
    reused = sum(r["reuses"] > 0 for r in rows.values())
    summary = {"examples": len(examples), "swept": len(rows), "reused": reused, "wrong": wrong,
               "other_differences": other, "refusal_reasons": dict(reasons.most_common()),
               "seconds": time.perf_counter() - start}
    print(f"{args.backend}: {len(rows)} of {len(examples)} examples swept, reused at 1: {reused}, wrong: {len(wrong)}, "
          f"stock's own differences: {len(other)} ({summary['seconds']:.0f} s)")
    for reason, k in reasons.most_common(8):
        print(f"    {k:3d}  {reason}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"torch": torch.__version__, "backend": args.backend, "sweep": SWEEP,
                                         "summary": summary, "examples": rows}, indent=1))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
