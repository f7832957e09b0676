"""The adversarial widening corpus (``tests/widen_corpus.py``) on both backends, with JSON.

Every program is swept to size 1 under ``verishape.compile`` and compared with eager call
by call (``verishape/fuzz/widen_check.py``).  Reported per backend: programs that reused a
generic artifact at 1, wrong calls (a reuse that differs from eager where stock does not),
stock's own differences, and refusal reasons by kind; per program, its group, reuses and
reasons.  The slow test ``tests/test_widen_corpus.py`` asserts the same on every run.

    python benchmarks/widen_corpus.py --json benchmarks/results/widen_corpus.json

On a GPU: ``--device cuda --backend inductor`` (Triton kernels); ``--shard i/n`` runs every
n-th program from the i-th (0-based), so that n processes cover the corpus side by side.  Off the CPU, a program whose eager run on the CPU
fails an index bound or divides an integer by zero at a size of its sweep is left out and
listed (``skipped``): on CUDA the first is a device-side assert that ends the process, the
second returns garbage instead of raising (shape errors such as an empty ``max`` raise on
the host on both, and stay).  On the CPU below torch 2.13, a program that divides an integer
by zero is left out for Inductor: 2.11's C++ kernel ends the process there (stock, with
static sizes too), where 2.13's raises.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("inductor", "aot_eager", "both"), default="both")
    ap.add_argument("--only", default="", help="comma-separated program names (default: all)")
    ap.add_argument("--device", default=None, help="cuda: inputs and created tensors on the GPU; triton-cpu: on the CPU with Inductor's "
                    "Triton codegen, kernels in Triton's interpreter (default: CPU, C++ codegen)")
    ap.add_argument("--shard", default="0/1", help="i/n: every n-th program from the i-th (default 0/1: all)")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "widen_corpus.json")
    args = ap.parse_args(argv)
    if args.device == "triton-cpu":
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            print("widen_corpus: --device triton-cpu needs TRITON_INTERPRET=1 before Triton is imported", file=sys.stderr)
            return 2
        os.environ["TRITON_INTERPRET"] = "1"  # before torch imports Triton: its library is interpreted
    try:
        shard, shards = (int(p) for p in args.shard.split("/"))
        if not 0 <= shard < shards:
            raise ValueError
    except ValueError:
        ap.error(f"--shard: got {args.shard!r}; use i/n with 0 <= i < n, for example 0/2")
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
    cases = [c for i, c in enumerate(CASES) if i % shards == shard and (not only or c.name in only)]
    skipped: dict[str, str] = {}
    if args.device is not None and args.device.startswith("cuda"):
        for c in list(cases):
            why = _raises_on_cpu(c)
            if why:
                skipped[c.name] = why
                cases.remove(c)
    elif args.backend != "aot_eager" and _release(torch.__version__) < (2, 13):
        # torch 2.11's Inductor C++ kernel ends the process (SIGILL, stock, static sizes too) on
        # an integer division by zero, where 2.13 raises as eager does
        for c in list(cases):
            why = _raises_on_cpu(c)
            if why and "ZeroDivisionError" in why:
                skipped[c.name] = f"{why} (torch {torch.__version__}'s Inductor ends the process there)"
                cases.remove(c)
    backends = ("inductor", "aot_eager") if args.backend == "both" else (args.backend,)
    rows: dict[str, dict[str, dict]] = {}
    summary: dict[str, dict] = {}
    for backend in backends:
        reasons: collections.Counter[str] = collections.Counter()
        wrong, other, reused, start = [], [], 0, time.perf_counter()
        for c in cases:
            sweep = run_sweep(c.fn, c.make, c.sweep, backend=backend, device=args.device)
            row = {"group": c.group, **sweep.to_dict(),
                   "refusal_kinds": sorted({reason_class(r) for r in sweep.refusals})}
            rows.setdefault(c.name, {})[backend] = row
            reused += sweep.reuses > 0
            if not sweep.reuses:
                reasons.update(row["refusal_kinds"])
            wrong += [f"{c.name}: {w}" for w in sweep.wrong]
            other += [f"{c.name}: {w}" for w in sweep.other_differences]
        n = len(cases)
        summary[backend] = {"programs": n, "reused": reused, "wrong": wrong, "other_differences": other,
                            "refusal_reasons": dict(reasons.most_common()),
                            "seconds": time.perf_counter() - start}
        print(f"{backend}: {n} programs ({len(skipped)} left out: {', '.join(skipped) or 'none'}), reused at 1: {reused}, wrong: {len(wrong)}, "
              f"stock's own differences: {len(other)} ({summary[backend]['seconds']:.0f} s)")
        for reason, k in reasons.most_common(8):
            print(f"    {k:3d}  {reason}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"torch": torch.__version__, "device": _device_name(args.device),
                                     "shard": args.shard, "skipped": skipped, "summary": summary, "programs": rows}, indent=1))
    print(f"torch {torch.__version__}; JSON: {args.json}")
    return 1 if any(s["wrong"] for s in summary.values()) else 0


def _raises_on_cpu(case: object) -> str | None:
    """Why ``case`` cannot be swept off the CPU (its eager run fails an index bound or
    divides an integer by zero at a size, errors a GPU does not raise), or None."""
    for n in case.sweep:  # type: ignore[attr-defined]
        try:
            case.fn(*case.make(n))  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - a program's own error, read for its kind
            text = str(exc)
            if "out of bounds" in text or "out of range" in text or "ZeroDivisionError" in text:
                return f"eager on the CPU at size {n}: {text.splitlines()[0][:80]}"
    return None


def _release(version: str) -> tuple[int, ...]:
    """``2.11.0+cu130`` -> (2, 11)."""
    return tuple(int(p) for p in version.split("+")[0].split(".")[:2])


def _device_name(device: str | None) -> str:
    import torch

    if device == "triton-cpu":
        return "cpu (Inductor's Triton codegen, kernels in Triton's interpreter)"
    return torch.cuda.get_device_name() if device and device.startswith("cuda") else "cpu"


if __name__ == "__main__":
    sys.exit(main())
