"""Kernel time where a size's divisibility follows from the user's facts, on a CUDA GPU:
verishape dynamic vs stock dynamic vs stock static.

Each program is compiled three ways with Inductor (Triton kernels): stock
``torch.compile`` with the varying dimension dynamic, ``verishape.compile`` the same way
(its proofs can drop boundary masks and mark sizes ``tt.divisibility 16``), and stock with
static shapes (the bound that dynamic shapes give up).  Kernel time: CUDA events around
``--iters`` calls after ``--warmup`` calls, the three variants taking turns for
``--rounds`` rounds, medians.  The generated Triton code of the dynamic variants is kept
and compared: the mask lines and the ``tt.divisibility`` arguments of each.  JSON output.

    python benchmarks/gpu_divisibility.py --json benchmarks/results/gpu_divisibility.json

Needs a CUDA device (exit 2 without one).  The goal: verishape dynamic within 3% of static
where stock dynamic is slower.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def programs() -> dict[str, tuple[Callable[..., Any], Callable[[], list[Any]], int]]:
    """name -> (function, inputs, the dynamic dimension of the first input)."""
    import torch
    import torch.nn.functional as F

    def checked_rows(x):
        torch._check(x.shape[0] % 128 == 0)
        return torch.relu(x) * 2 + 1

    def checked_odd_width(x):
        torch._check(x.shape[0] % 16 == 0)
        return torch.sigmoid(x) * x

    def reshape_into_16(x):
        return x.reshape(-1, 16).softmax(-1).reshape(x.shape)

    def padded_to_multiple(x):
        n = x.shape[0]
        pad = (-n) % 64
        y = F.pad(x, (0, 0, 0, pad))
        torch._check(y.shape[0] % 64 == 0)
        return (y * 3).sum(1)

    def nonzero_checked(x):
        idx = torch.nonzero(x[:, 0] > -1e9).squeeze(1)  # every row: an unbacked size
        torch._check(idx.shape[0] % 32 == 0)
        return x[idx] * 2

    return {
        "checked_rows": (checked_rows, lambda: [torch.randn(4096 * 128, 32, device="cuda")], 0),
        "checked_odd_width": (checked_odd_width, lambda: [torch.randn(16 * 65536, 3, device="cuda")], 0),
        "reshape_into_16": (reshape_into_16, lambda: [torch.randn(8192, 48, device="cuda")], 0),
        "padded_to_multiple": (padded_to_multiple, lambda: [torch.randn(64 * 4096, 24, device="cuda")], 0),
        "nonzero_checked": (nonzero_checked, lambda: [torch.randn(32 * 4096, 64, device="cuda")], -1),
    }


def _compiled(variant: str, fn: Callable[..., Any], args: list[Any], dim: int) -> tuple[Callable[..., Any], str]:
    import torch
    from torch._inductor.utils import run_and_get_code

    import verishape

    torch._dynamo.reset()
    if variant != "static" and dim >= 0:
        torch._dynamo.mark_dynamic(args[0], dim)
    compile_fn = verishape.compile if variant == "verishape" else torch.compile
    compiled = compile_fn(fn, backend="inductor", dynamic=False if variant == "static" else None)
    with torch._inductor.config.patch(fx_graph_cache=False):
        _, sources = run_and_get_code(compiled, *args)
    return compiled, "\n".join(sources)


def _time_ms(fn: Callable[..., Any], args: list[Any], warmup: int, iters: int) -> float:
    import torch

    for _ in range(warmup):
        fn(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def _code_facts(src: str) -> dict[str, Any]:
    masks = sorted({line.strip() for line in src.splitlines() if re.match(r"\s*[xyr]\w*mask = ", line)})
    divisible = re.findall(r"\[\['tt\.divisibility', 16\]\]", src)
    return {"mask_lines": masks, "divisibility_16_args": len(divisible),
            "constant_masks": sum("tl.full" in m for m in masks)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_divisibility.json")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_divisibility: needs a CUDA device (torch sees none); run it on a GPU machine", file=sys.stderr)
        return 2
    rows = []
    for name, (fn, make, dim) in programs().items():
        if args.only and name not in args.only.split(","):
            continue
        inputs = make()
        want = fn(*inputs)
        built = {v: _compiled(v, fn, list(inputs), dim) for v in ("stock", "verishape", "static")}
        times: dict[str, list[float]] = {v: [] for v in built}
        for r in range(args.rounds):
            order = list(built) if r % 2 == 0 else list(reversed(built))
            for v in order:
                times[v].append(_time_ms(built[v][0], inputs, args.warmup, args.iters))
        med = {v: statistics.median(t) for v, t in times.items()}
        equal = all(torch.allclose(built[v][0](*inputs), want, rtol=1e-4, atol=1e-5) for v in built)
        row = {"program": name, "median_ms": med, "times_ms": times, "outputs_equal_eager": equal,
               "verishape_vs_static": med["verishape"] / med["static"],
               "stock_vs_static": med["stock"] / med["static"],
               "code": {v: _code_facts(built[v][1]) for v in ("stock", "verishape")}}
        rows.append(row)
        print(f"{name}: stock {med['stock']:.4f} ms, verishape {med['verishape']:.4f} ms, static {med['static']:.4f} ms "
              f"(verishape/static {row['verishape_vs_static']:.3f}, stock/static {row['stock_vs_static']:.3f}); "
              f"constant masks stock {row['code']['stock']['constant_masks']} / verishape "
              f"{row['code']['verishape']['constant_masks']}; outputs equal: {equal}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                                     "rows": rows}, indent=1))
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
