"""One model at real size on a CUDA GPU, stock vs verishape: compile time, solver work,
and kernel time per step at batch 1 and batch N.

GPT-2 124M (12 layers, width 768, random weights) or ``--model llama1b`` (a 1B-parameter
LLaMA config), Inductor, automatic dynamic shapes, caches off.  Each variant runs in a
fresh process: calls at batch N (static compile), N + 1 (dynamic compile) and 1 (stock
compiles again; verishape proves and reuses the dynamic artifact), then timed steps at
batch 1 and batch N (CUDA events, medians).  Solver calls and their time come from the
frames' decision logs.  JSON output.

    python benchmarks/gpu_scale.py --model gpt2 --batch 8 --json benchmarks/results/gpu_scale.json

Needs a CUDA device (exit 2 without one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def build(model: str) -> Any:
    import torch

    torch.manual_seed(0)
    if model == "gpt2":
        from transformers import GPT2Config, GPT2Model

        return GPT2Model(GPT2Config()).eval().cuda()
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=32000)
    return LlamaModel(cfg).eval().cuda().half()


def child(model: str, variant: str, batch: int, seq: int) -> dict[str, Any]:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    import torch
    from torch._dynamo.utils import counters

    import verishape
    from verishape.compiler import frames

    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    module = build(model)
    compiled = torch.compile(module) if variant == "stock" else verishape.compile(module)

    def inputs(b: int) -> dict[str, Any]:
        g = torch.Generator(device="cuda").manual_seed(b)
        return {"input_ids": torch.randint(0, 1000, (b, seq), device="cuda", generator=g), "use_cache": False}

    out: dict[str, Any] = {"compile_s": {}}
    with torch.no_grad():
        for b in (batch, batch + 1, 1):
            torch.cuda.synchronize()
            start = time.perf_counter()
            compiled(**inputs(b))
            torch.cuda.synchronize()
            out["compile_s"][str(b)] = time.perf_counter() - start
        for b in (1, batch):
            kw = inputs(b)
            for _ in range(10):
                compiled(**kw)
            times = []
            for _ in range(30):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                compiled(**kw)
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            out[f"step_ms_batch_{b}"] = statistics.median(times)
    with frames._envs_lock:
        envs = [e for es in frames._envs_by_code.values() for e in es]
    records = [r for e in envs for r in e.verishape_log.records]
    out["solver_calls"] = len(records)
    out["solver_s"] = sum(getattr(r.result, "time_s", 0.0) or 0.0 for r in records)
    out["reused_at_1"] = counters["verishape"]["reused_at_size_1"]
    out["torch"], out["device"] = torch.__version__, torch.cuda.get_device_name()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("gpt2", "llama1b"), default="gpt2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_scale.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.batch, args.seq)))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("gpu_scale: needs a CUDA device (torch sees none); run it on a GPU machine", file=sys.stderr)
        return 2
    rows = {}
    for variant in ("stock", "verishape"):
        proc = subprocess.run([sys.executable, __file__, "--child", args.model, variant, "--batch", str(args.batch),
                               "--seq", str(args.seq)], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            print(f"gpu_scale: the {variant} run failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        rows[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(variant, json.dumps(rows[variant]), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"model": args.model, "batch": args.batch, "seq": args.seq, "rows": rows},
                                    indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
