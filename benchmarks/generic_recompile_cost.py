"""What a generic recompile costs where nothing widens: the step time of the artifact a
frame's second compile makes, stock's (only the sizes that changed are symbols) against
verishape's (every input size a symbol, ``compiler/widen/generic_recompile.py``).

A GPT-2-style model (random weights, ``--width`` wide, ``--layers`` deep) is called with
``input_ids`` alone at batch ``--batches[0]``, then with an ``attention_mask`` too at the
other batches (two layouts of inputs, where the policy applies: Note [A frame's inputs that
vary earn the generic policy]), the sequence length fixed: both variants compile twice,
stock's second artifact generic in the batch alone, verishape's in the batch and the length
(the two inputs share both).  Then each variant's call at the last batch is timed ``--calls``
times, the two taking turns over ``--rounds`` rounds; medians and the ratio
verishape / stock.  JSON output.

    python benchmarks/generic_recompile_cost.py --json benchmarks/results/generic_recompile_cost.json
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


def build(width: int, layers: int, device: str = "cpu") -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=width, n_layer=layers, n_head=max(1, width // 64), vocab_size=1024, n_positions=1024,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval().to(device)


def _symbolic_inputs() -> list[str] | None:
    """The input sizes verishape's newest compile made symbols (its VeriShapeEnv; None
    after a stock compile, whose env verishape does not keep)."""
    from verishape.compiler import frames

    with frames._envs_lock:
        envs = [e for es in frames._envs_by_code.values() for e in es]
    if not envs:
        return None
    return sorted({src.name for srcs in envs[-1].var_to_sources.values() for src in srcs})


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from torch._dynamo.utils import counters

    import verishape
    from verishape.compiler import frames

    model = build(args.width, args.layers, args.device)
    inputs = [torch.randint(0, 1024, (b, args.length), generator=torch.Generator().manual_seed(b)).to(args.device)
              for b in args.batches]
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    runs: dict[str, Any] = {}
    for name, compile_fn in (("stock", torch.compile), ("verishape", verishape.compile)):
        torch._dynamo.reset()
        counters.clear()
        with frames._envs_lock:
            frames._envs_by_code.clear()
        fn = compile_fn(model.forward)
        with torch.no_grad():
            for i, ids in enumerate(inputs):
                mask = None if i == 0 else torch.ones_like(ids)
                torch.testing.assert_close(fn(ids, attention_mask=mask).logits,
                                           model(ids, attention_mask=mask).logits, atol=1e-4, rtol=1e-4)
        runs[name] = {"fn": fn, "compiles": counters["stats"]["unique_graphs"] - counters["verishape"]["reused"],
                      "times": [], "symbolic": _symbolic_inputs()}
    last, last_mask = inputs[-1], torch.ones_like(inputs[-1])
    with torch.no_grad():
        for run in runs.values():  # a warm-up call each, untimed
            run["fn"](last, attention_mask=last_mask)
        for _ in range(args.rounds):
            for run in runs.values():
                sync()
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    run["fn"](last, attention_mask=last_mask)
                sync()
                run["times"].append((time.perf_counter() - t0) / args.calls)
    out = {name: {"compiles": r["compiles"], "step_s": statistics.median(r["times"]),
                  "symbolic_input_sizes": r["symbolic"]} for name, r in runs.items()}
    return {"torch": torch.__version__, "device": args.device, "width": args.width, "layers": args.layers, "length": args.length,
            "batches": args.batches, "calls": args.calls, "rounds": args.rounds, **out,
            "step_ratio": out["verishape"]["step_s"] / out["stock"]["step_s"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--batches", default="8,16", help="comma-separated; the first is compiled static")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "generic_recompile_cost.json")
    args = ap.parse_args(argv)
    try:
        args.batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        args.batches = []
    if len(args.batches) < 2 or min(args.batches) < 2 or min(args.width, args.layers, args.length, args.calls,
                                                             args.rounds) < 1:
        print(f"generic_recompile_cost: --batches={args.batches!r} needs two or more sizes >= 2, and "
              "--width/--layers/--length/--calls/--rounds must be at least 1", file=sys.stderr)
        return 2
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("generic_recompile_cost: --device cuda needs a CUDA device; none is visible", file=sys.stderr)
        return 2
    result = measure(args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"compiles stock {result['stock']['compiles']}, verishape {result['verishape']['compiles']}; step at "
          f"batch {args.batches[-1]}: stock {result['stock']['step_s'] * 1e3:.2f} ms, verishape "
          f"{result['verishape']['step_s'] * 1e3:.2f} ms, ratio {result['step_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
