"""One model at real size on a CUDA GPU, stock vs verishape: compile time, solver work,
and kernel time per step at batch 1 and batch N.

GPT-2 124M (12 layers, width 768, random weights) or ``--model llama1b`` (a 1B-parameter
LLaMA config), Inductor, automatic dynamic shapes, caches off.  Each variant runs in a
fresh process: calls at batch N (static compile), N + 1 (dynamic compile) and 1 (stock
compiles again; verishape proves and reuses the dynamic artifact), then timed steps at
batch 1 and batch N (CUDA events, medians).  Solver calls and their time come from the
frames' decision logs.  JSON output.

    python benchmarks/gpu_scale.py --model gpt2 --batch 8 --json benchmarks/results/gpu_scale.json

Needs a CUDA device (exit 2 without one); ``--device cpu --layers 1 --seq 16`` is a dry run
of the script on the CPU (wall-clock step times).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def build(model: str, device: str = "cuda", layers: int = 0) -> Any:
    """The model with random weights; ``layers`` > 0 overrides the depth (a dry run)."""
    import torch

    torch.manual_seed(0)
    if model == "gpt2":
        from transformers import GPT2Config, GPT2Model

        return GPT2Model(GPT2Config(**({"n_layer": layers} if layers else {}))).eval().to(device)
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers or 16,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=32000)
    return LlamaModel(cfg).eval().to(device).to(torch.float16 if device == "cuda" else torch.float32)


def child(model: str, variant: str, batch: int, seq: int, device: str = "cuda", layers: int = 0) -> dict[str, Any]:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    import torch
    from torch._dynamo.utils import counters

    import verishape
    from verishape.compiler import frames
    from verishape.core.premises import current_prover

    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    module = build(model, device, layers)
    cuda = device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()
    compiled = torch.compile(module) if variant == "stock" else verishape.compile(module)

    def inputs(b: int) -> dict[str, Any]:
        g = torch.Generator(device=device).manual_seed(b)
        return {"input_ids": torch.randint(0, 1000, (b, seq), device=device, generator=g),
                "attention_mask": torch.ones(b, seq, dtype=torch.long, device=device), "use_cache": False}

    out: dict[str, Any] = {"compile_s": {}}
    with torch.no_grad():
        for b in (batch, batch + 1, 1):
            sync()
            start = time.perf_counter()
            compiled(**inputs(b))
            sync()
            out["compile_s"][str(b)] = time.perf_counter() - start
        for b in (1, batch):
            kw = inputs(b)
            for _ in range(10):
                compiled(**kw)
            times = []
            for _ in range(30):
                if not cuda:
                    t0 = time.perf_counter()
                    compiled(**kw)
                    times.append((time.perf_counter() - t0) * 1000)
                    continue
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                compiled(**kw)
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            out[f"step_ms_batch_{b}"] = statistics.median(times)
    stats = current_prover().stats
    out["solver_queries"], out["solver_calls"], out["solver_s"] = stats.queries, stats.solver_calls, stats.solver_time_s
    with frames._envs_lock:
        envs = [e for es in frames._envs_by_code.values() for e in es]
    out["not_widened"] = [f"{name}: {why[:200]}" for e in envs for name, why in getattr(e, "verishape_log", None)
                          and e.verishape_log.not_widened or ()]
    out["reused_at_1"] = counters["verishape"]["reused_at_size_1"]
    out["torch"], out["device"] = torch.__version__, torch.cuda.get_device_name() if cuda else "cpu"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("gpt2", "llama1b"), default="gpt2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu: a dry run of the script")
    ap.add_argument("--layers", type=int, default=0, help="override the depth (a dry run: 1)")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_scale.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.batch, args.seq, args.device, args.layers)))
        return 0
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_scale: needs a CUDA device (torch sees none); run it on a GPU machine", file=sys.stderr)
        return 2
    rows = {}
    for variant in ("stock", "verishape"):
        # each variant compiles its kernels afresh: Triton's and Inductor's on-disk caches
        # would otherwise hand the second variant what the first compiled
        cache = tempfile.mkdtemp(prefix=f"gpu_scale_{variant}_")
        env = {**os.environ, "TRITON_CACHE_DIR": f"{cache}/triton", "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor"}
        proc = subprocess.run([sys.executable, __file__, "--child", args.model, variant, "--batch", str(args.batch),
                               "--seq", str(args.seq), "--device", args.device, "--layers", str(args.layers)],
                              capture_output=True, text=True, cwd=ROOT, env=env)
        if proc.returncode != 0:
            print(f"gpu_scale: the {variant} run failed: {proc.stderr.strip().splitlines()[-3:]}", file=sys.stderr)
            rows[variant] = {"error": proc.stderr.strip().splitlines()[-3:]}
            continue
        rows[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(variant, json.dumps(rows[variant]), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"model": args.model, "layers": args.layers or "config", "batch": args.batch, "seq": args.seq,
                                    "rows": rows},
                                    indent=1))
    return 1 if any("error" in r for r in rows.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
