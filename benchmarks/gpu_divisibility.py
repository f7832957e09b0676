"""Kernel time where a size's divisibility follows from the user's facts, on a CUDA GPU:
verishape dynamic vs stock dynamic vs stock static.

Each program is compiled three ways with Inductor (Triton kernels): stock
``torch.compile`` with the varying dimension dynamic, ``verishape.compile`` the same way
(its proofs can drop boundary masks and mark sizes ``tt.divisibility 16``), and stock with
static shapes (the bound that dynamic shapes give up).  Kernel time: CUDA events around
``--iters`` calls after ``--warmup`` calls, the three variants taking turns for
``--rounds`` rounds, medians.  Two times per variant: the call (host dispatch and guards
included: on an H200 these programs' kernels take a few microseconds, less than a call's
host work, so call time alone cannot show a kernel difference) and the kernel (the GPU time
of the kernels a call launches, summed from ``torch.profiler`` over ``--iters`` calls).
The generated Triton code of each variant is kept and compared: the mask lines and the
``tt.divisibility`` arguments.  JSON output.

    python benchmarks/gpu_divisibility.py --json benchmarks/results/gpu_divisibility.json

Needs a CUDA device (exit 2 without one); ``--device cpu`` is a dry run of the same code
paths (C++ kernels, wall-clock timing, small inputs) for checking the script itself.  The goal: verishape dynamic within 3% of static
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


def programs(device: str = "cuda", scale: int = 1) -> dict[str, tuple[Callable[..., Any], Callable[[], list[Any]], int]]:
    """name -> (function, inputs, the dynamic dimension of the first input).  ``scale``
    divides the row counts (kept multiples of 128) for a dry run."""
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
        "checked_rows": (checked_rows, lambda: [torch.randn(4096 * 128 // scale, 32, device=device)], 0),
        "checked_odd_width": (checked_odd_width, lambda: [torch.randn(16 * 65536 // scale, 3, device=device)], 0),
        "reshape_into_16": (reshape_into_16, lambda: [torch.randn(8192 // scale, 48, device=device)], 0),
        "padded_to_multiple": (padded_to_multiple, lambda: [torch.randn(64 * 4096 // scale, 24, device=device)], 0),
        "nonzero_checked": (nonzero_checked, lambda: [torch.randn(32 * 4096 // scale, 64, device=device)], -1),
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
    import time

    import torch

    for _ in range(warmup):
        fn(*args)
    if not torch.cuda.is_available() or not any(getattr(a, "is_cuda", False) for a in args):
        start_s = time.perf_counter()
        for _ in range(iters):
            fn(*args)
        return (time.perf_counter() - start_s) * 1000 / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def _kernel_ms(fn: Callable[..., Any], args: list[Any], iters: int) -> float | None:
    """GPU time of the kernels one call launches (mean over ``iters`` calls), from the
    profiler's device events; None off CUDA."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if not any(getattr(a, "is_cuda", False) for a in args):
        return None
    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn(*args)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    return sum(e.time_range.elapsed_us() for e in kernels) / 1000 / iters


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
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu: a dry run of the script")
    ap.add_argument("--scale", type=int, default=1, help="divide the row counts by this (a dry run: 32)")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_divisibility.json")
    args = ap.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_divisibility: needs a CUDA device (torch sees none); run it on a GPU machine", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    for name, (fn, make, dim) in programs(args.device, args.scale).items():
        if args.only and name not in args.only.split(","):
            continue
        try:
            row = _measure(name, fn, make, dim, args)
        except Exception as exc:  # a benchmark row, not a decision: the failure is reported, the rest still runs
            row = {"program": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
            print(f"{name}: error: {row['error']}", flush=True)
        rows.append(row)
        # after each program: a run that is stopped keeps what it measured
        args.json.write_text(json.dumps({"torch": torch.__version__, "device": device, "rows": rows}, indent=1))
    print(f"torch {torch.__version__} on {device}; JSON: {args.json}")
    return 1 if any("error" in r for r in rows) else 0


def _measure(name: str, fn: Callable[..., Any], make: Callable[[], list[Any]], dim: int,
             args: argparse.Namespace) -> dict[str, Any]:
    import torch

    inputs = make()
    want = fn(*inputs)
    built = {v: _compiled(v, fn, list(inputs), dim) for v in ("stock", "verishape", "static")}
    times: dict[str, list[float]] = {v: [] for v in built}
    for r in range(args.rounds):
        order = list(built) if r % 2 == 0 else list(reversed(built))
        for v in order:
            times[v].append(_time_ms(built[v][0], inputs, args.warmup, args.iters))
    med = {v: statistics.median(t) for v, t in times.items()}
    kernel: dict[str, list[float]] = {v: [] for v in built}
    for r in range(args.rounds):
        for v in (list(built) if r % 2 == 0 else list(reversed(built))):
            k = _kernel_ms(built[v][0], inputs, args.iters)
            if k is not None:
                kernel[v].append(k)
    kmed = {v: statistics.median(t) for v, t in kernel.items() if t}
    equal = all(torch.allclose(built[v][0](*inputs), want, rtol=1e-4, atol=1e-5) for v in built)
    row = {"program": name, "median_ms": med, "times_ms": times, "outputs_equal_eager": equal,
           "verishape_vs_static": med["verishape"] / med["static"],
           "stock_vs_static": med["stock"] / med["static"],
           "kernel_median_ms": kmed, "kernel_ms": kernel,
           "kernel_verishape_vs_static": kmed["verishape"] / kmed["static"] if kmed else None,
           "kernel_stock_vs_static": kmed["stock"] / kmed["static"] if kmed else None,
           "code": {v: _code_facts(built[v][1]) for v in built}}
    print(f"{name}: stock {med['stock']:.4f} ms, verishape {med['verishape']:.4f} ms, static {med['static']:.4f} ms "
          f"(verishape/static {row['verishape_vs_static']:.3f}, stock/static {row['stock_vs_static']:.3f}); "
          f"constant masks stock {row['code']['stock']['constant_masks']} / verishape "
          f"{row['code']['verishape']['constant_masks']}; outputs equal: {equal}", flush=True)
    if kmed:
        print(f"    kernels: stock {kmed['stock'] * 1000:.2f} us, verishape {kmed['verishape'] * 1000:.2f} us, "
              f"static {kmed['static'] * 1000:.2f} us (verishape/static {row['kernel_verishape_vs_static']:.3f}, "
              f"stock/static {row['kernel_stock_vs_static']:.3f})", flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
