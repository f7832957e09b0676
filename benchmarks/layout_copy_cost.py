"""What a layout reuse costs per call: a decode step whose KV cache arrives contiguous, run
by stock's own compile for that layout and by verishape's reuse of the artifact compiled
for the transposed layout (which copies the cache into that layout first), side by side.

The step is a served decoder's attention in small: ``cat`` the new token's keys onto the
cache, attend, return the new cache.  Per cache length: both variants compile the same
sequence (transposed at two sizes, then contiguous), then the contiguous call is timed
``--calls`` times, the two variants taking turns over ``--rounds`` rounds; medians and
the ratio verishape / stock, and the bytes the copy moves per call.  Where the copies of a
thousand calls would cost more than the compile (``layout.pays_back``) verishape compiles as
stock does, and the row says why.  JSON output.

    python benchmarks/layout_copy_cost.py --lengths 256,1024,4096 --json benchmarks/results/layout_copy_cost.json
    python benchmarks/layout_copy_cost.py --force-copy    # the copy's own cost, reused whatever it costs
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BATCH, HEADS, DIM = 4, 8, 64


def step(cache: Any, new: Any, q: Any) -> Any:
    import torch.nn.functional as F
    import torch

    keys = torch.cat([cache, new], dim=-2)
    return F.scaled_dot_product_attention(q, keys, keys), keys


def _inputs(length: int, transposed: bool, seed: int) -> tuple[Any, Any, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)
    cache = torch.randn(BATCH, HEADS, length, DIM, generator=g)
    if transposed:  # a projection viewed per head: (b, L, heads, d) in memory
        cache = torch.empty_permuted(cache.shape, (0, 2, 1, 3)).copy_(cache)
    new = torch.randn(BATCH, HEADS, 1, DIM, generator=g)
    return cache, new, torch.randn(BATCH, HEADS, 1, DIM, generator=g)


def measure(length: int, calls: int, rounds: int) -> dict[str, Any]:
    import torch
    from torch._dynamo.utils import counters

    import verishape

    compiled = {}
    reused, refusal = 0, None
    for name, fn in (("stock", torch.compile), ("verishape", verishape.compile)):
        torch._dynamo.reset()
        counters.clear()
        c = fn(step)
        for args in (_inputs(length // 2, True, 0), _inputs(length, True, 1)):  # static, then generic
            c(*args)
        c(*_inputs(length, False, 2))  # the layout miss: stock compiles, verishape reuses (proved)
        if name == "verishape":
            reused = counters["verishape"]["reused_relaid"]
            from verishape.compiler import frames

            envs = frames.envs_for(step.__code__)[-3:]  # this length's frames (the earlier ones stay listed)
            refusal = next((why for e in envs for _, why in e.verishape_log.not_widened), None)
        compiled[name] = c
    args = _inputs(length, False, 3)
    want = step(*args)
    times: dict[str, list[float]] = {"stock": [], "verishape": []}
    for _ in range(rounds):
        for name, c in compiled.items():
            got = c(*args)
            torch.testing.assert_close(got, want)
            start = time.perf_counter()
            for _ in range(calls):
                c(*args)
            times[name].append((time.perf_counter() - start) / calls)
    stock, mine = statistics.median(times["stock"]), statistics.median(times["verishape"])
    return {"length": length, "reused_relaid": reused, "refusal": refusal if not reused else None,
            "stock_ms": stock * 1e3, "verishape_ms": mine * 1e3,
            "ratio": mine / stock, "copied_bytes_per_call": args[0].numel() * args[0].element_size()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="256,1024,4096")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--force-copy", action="store_true",
                    help="reuse whatever the copy costs (layout.PAYBACK_CALLS = 0): measures the copy itself")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "layout_copy_cost.json")
    args = ap.parse_args(argv)
    try:
        lengths = [int(n) for n in args.lengths.split(",")]
        if not lengths or min(lengths) < 4 or args.calls < 1 or args.rounds < 1:
            raise ValueError
    except ValueError:
        print(f"layout_copy_cost: --lengths {args.lengths!r} must be integers >= 4, comma-separated, and --calls, "
              f"--rounds at least 1", file=sys.stderr)
        return 2
    import torch

    if args.force_copy:
        from verishape.compiler.widen import layout

        layout.PAYBACK_CALLS = 0
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    rows = []
    with torch.no_grad():
        for n in lengths:
            row = measure(n, args.calls, args.rounds)
            rows.append(row)
            print(f"cache length {n}: stock {row['stock_ms']:.3f} ms, verishape {row['verishape_ms']:.3f} ms "
                  f"({row['ratio']:.2f}x), {row['copied_bytes_per_call'] / 2**20:.1f} MiB copied per call, "
                  f"reused {row['reused_relaid']}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"torch": torch.__version__, "force_copy": args.force_copy, "batch": BATCH,
                                     "heads": HEADS, "dim": DIM,
                                     "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
