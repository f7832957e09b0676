"""What verishape costs per compile as models get deeper: stock vs verishape, by depth.

GPT-2 and LLaMA with tiny width and 12 or 24 layers (random weights, built offline),
Inductor, automatic dynamic shapes, torch's FX-graph and AOTAutograd caches off.  A
*sequence* is one variant's calls that compile, on a freshly built model after
``torch._dynamo.reset()``: batch 2 (the static compile), batch 3 (the dynamic one) and batch 1
(stock compiles a third time; verishape traces and proves the reuse of the dynamic artifact).
CPU time of each call (``time.process_time``).

Both variants run in one process per (model, depth), taking turns A B B A ... after one
unmeasured sequence of each (lazy imports, Inductor's kernels loaded): on this shared 2-core
machine the CPU time of the same compile in separate processes scatters by 15-25%, which
would hide a 5% difference, while turns in one process see the same machine state.  Best of
``--rounds`` per variant; the ratio verishape / stock per compile.  ``--processes`` measures
each sequence in a fresh process instead (the older method, for comparison).

    python benchmarks/widen_depth.py --models gpt2,llama --depths 12,24 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 128
CALLS = (("static", 2), ("dynamic", 3), ("size 1", 1))


def build(model: str, layers: int) -> Any:
    import torch

    torch.manual_seed(0)
    if model == "gpt2":
        from transformers import GPT2Config, GPT2Model

        cfg = GPT2Config(n_layer=layers, n_head=2, n_embd=32, vocab_size=VOCAB, n_positions=64,
                         bos_token_id=0, eos_token_id=0)
        return GPT2Model(cfg).eval()
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                      intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0,
                      eos_token_id=0, pad_token_id=0)
    return LlamaModel(cfg).eval()


def _sequence(model: str, layers: int, variant: str) -> dict[str, Any]:
    """One variant's three compiling calls on a fresh model, after a Dynamo reset."""
    import torch
    from torch._dynamo.utils import counters

    import verishape

    torch._dynamo.reset()
    counters.clear()
    module = build(model, layers)
    compiled = torch.compile(module) if variant == "stock" else verishape.compile(module)
    out: dict[str, Any] = {}
    for name, batch in CALLS:
        g = torch.Generator().manual_seed(batch)
        kwargs = {"input_ids": torch.randint(0, VOCAB, (batch, 8), generator=g),
                  "attention_mask": torch.ones(batch, 8, dtype=torch.long), "use_cache": False}
        graphs = counters["stats"]["unique_graphs"]
        start, wall = time.process_time(), time.perf_counter()
        with torch.no_grad():
            got = compiled(**kwargs).last_hidden_state
        out[name] = {"cpu_s": time.process_time() - start, "wall_s": time.perf_counter() - wall,
                     "traced": counters["stats"]["unique_graphs"] - graphs}
        with torch.no_grad():
            want = module(**kwargs).last_hidden_state
        out[name]["max_abs_diff"] = (got - want).abs().max().item()
    out["reused_at_1"] = counters["verishape"]["reused_at_size_1"]
    out["torch"] = torch.__version__
    return out


def _quiet() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    import torch

    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def child(model: str, layers: int, variant: str) -> dict[str, Any]:
    """One process, one sequence of one variant (``--processes``)."""
    _quiet()
    return _sequence(model, layers, variant)


def child_turns(model: str, layers: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """One process: a warm-up sequence of each variant, then ``rounds`` measured sequences
    of each in A B B A order (so a drift over the process's life falls on both alike)."""
    _quiet()
    for variant in ("stock", "verishape"):
        _sequence(model, layers, variant)
    runs: dict[str, list[dict[str, Any]]] = {"stock": [], "verishape": []}
    for r in range(rounds):
        for variant in (("stock", "verishape") if r % 2 == 0 else ("verishape", "stock")):
            runs[variant].append(_sequence(model, layers, variant))
    return runs


def _spawn(*child_args: str) -> Any:
    proc = subprocess.run([sys.executable, __file__, "--child", *child_args], capture_output=True, text=True,
                          cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"child {'/'.join(child_args)} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _by_processes(model: str, layers: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    for variant in ("stock", "verishape"):  # warm-up: Inductor's kernels built on disk
        _spawn(model, str(layers), variant)
    runs: dict[str, list[dict[str, Any]]] = {"stock": [], "verishape": []}
    for r in range(rounds):
        for variant in (("stock", "verishape") if r % 2 == 0 else ("verishape", "stock")):
            runs[variant].append(_spawn(model, str(layers), variant))
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--depths", default="12,24")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "widen_depth.json")
    ap.add_argument("--processes", action="store_true",
                    help="each sequence in a fresh process (default: both variants taking turns in one process)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        model, layers, what = args.child
        out = child(model, int(layers), what) if what in ("stock", "verishape") else \
            child_turns(model, int(layers), int(what))
        print(json.dumps(out))
        return 0
    models = [m for m in args.models.split(",") if m]
    if any(m not in ("gpt2", "llama") for m in models) or args.rounds < 1:
        print(f"widen_depth: --models takes gpt2,llama (got {args.models}); --rounds at least 1", file=sys.stderr)
        return 2
    depths = [int(d) for d in args.depths.split(",") if d]
    rows = []
    for model in models:
        for layers in depths:
            runs = _by_processes(model, layers, args.rounds) if args.processes else \
                _spawn(model, str(layers), str(args.rounds))
            row: dict[str, Any] = {"model": model, "layers": layers, "runs": runs,
                                   "torch": runs["stock"][0]["torch"]}
            for name, _ in CALLS:
                best = {v: min(x[name]["cpu_s"] for x in xs) for v, xs in runs.items()}
                row[name] = {"stock_cpu_s": best["stock"], "verishape_cpu_s": best["verishape"],
                             "ratio": best["verishape"] / best["stock"]}
            row["reused_at_1"] = all(x["reused_at_1"] for x in runs["verishape"])
            rows.append(row)
            print(f"{model} x{layers}: " + ", ".join(
                f"{name} {row[name]['stock_cpu_s']:.2f} s / {row[name]['verishape_cpu_s']:.2f} s "
                f"= {row[name]['ratio']:.2f}x" for name, _ in CALLS) + f"; reused at 1: {row['reused_at_1']}",
                flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"rounds": args.rounds, "method": "processes" if args.processes else "turns",
                                     "rows": rows}, indent=1))
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
