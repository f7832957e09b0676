"""One model at real size on a CUDA GPU, stock vs verishape: compiles, reuse at 1, and what
running the generic kernels at 1 costs.

GPT-2 124M (12 layers, width 768, random weights) or ``--model llama1b`` (a 1B-parameter
LLaMA config), Inductor, automatic dynamic shapes, caches off, ``--mode reduce-overhead``
for CUDA graphs.  Each variant runs in a fresh process with its own kernel caches, the two side by side
(their compile seconds share the machine; their timed steps never overlap): the
three calls of ``--sweep`` (batch: N, N + 1, 1; seq: length L, L + 1, 1 at batch N, a
decode-sized step; stock compiles again at 1, verishape proves and reuses the dynamic
artifact), each checked against eager, then timed steps at the size-1 point and the first
point (CUDA events, medians) with the kernel time per step from ``torch.profiler``.
``at_one`` in the JSON: the reused artifact's step and kernel time at 1 over stock's
batch-1 compile, and where it is slower, after how many steps the saved compile is paid back.

    python benchmarks/gpu_scale.py --model gpt2 --batch 8 --sweep seq --json benchmarks/results/gpu_scale.json

Needs a CUDA device (exit 2 without one); ``--device cpu --layers 1 --seq 16`` is a dry run
of the script on the CPU (wall-clock step times).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def child(model: str, variant: str, batch: int, seq: int, device: str = "cuda", layers: int = 0,
          sweep: str = "batch", mode: str = "default") -> dict[str, Any]:
    """One variant in this process: the three calls of ``sweep`` (batch: N, N + 1, 1 at
    length ``seq``; seq: ``seq``, ``seq`` + 1, 1 at batch N, a decode-sized step), then timed
    steps at the size-1 point and at the first point."""
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
    kw = {} if mode == "default" else {"mode": mode}
    compiled = torch.compile(module, **kw) if variant == "stock" else verishape.compile(module, **kw)

    def inputs(b: int, n: int) -> dict[str, Any]:
        g = torch.Generator(device=device).manual_seed(b * 1000 + n)
        return {"input_ids": torch.randint(0, 1000, (b, n), device=device, generator=g),
                "attention_mask": torch.ones(b, n, dtype=torch.long, device=device), "use_cache": False}

    batch_points = [(batch, seq), (batch + 1, seq), (1, seq)]
    seq_points = [(batch, seq), (batch, seq + 1), (batch, 1)]
    points = {"batch": batch_points, "seq": seq_points, "both": batch_points + seq_points[1:]}[sweep]
    ones = [p for p in points if 1 in p]
    out: dict[str, Any] = {"compile_s": {}, "sweep": sweep, "mode": mode}
    with torch.no_grad():
        out["reused"] = {}
        for b, n in points:
            sync()
            before = counters["verishape"]["reused"]
            start = time.perf_counter()
            got = compiled(**inputs(b, n)).last_hidden_state
            sync()
            out["compile_s"][f"{b}x{n}"] = time.perf_counter() - start
            out["reused"][f"{b}x{n}"] = counters["verishape"]["reused"] > before
            want = module(**inputs(b, n)).last_hidden_state
            out.setdefault("max_abs_diff", 0.0)
            out["max_abs_diff"] = max(out["max_abs_diff"], (got.float() - want.float()).abs().max().item())
        with _alone():  # the other variant's process times its steps before or after, never during
            for b, n in (*ones, points[0]):
                out[f"step_ms_{b}x{n}"], out[f"kernel_ms_{b}x{n}"] = _step_times(compiled, inputs(b, n), cuda)
    stats = current_prover().stats
    out["solver_queries"], out["solver_calls"], out["solver_s"] = stats.queries, stats.solver_calls, stats.solver_time_s
    with frames._envs_lock:
        envs = [e for es in frames._envs_by_code.values() for e in es]
    out["not_widened"] = [f"{name}: {why[:200]}" for e in envs for name, why in getattr(e, "verishape_log", None)
                          and e.verishape_log.not_widened or ()]
    out["reused_at_1"] = counters["verishape"]["reused_at_size_1"]
    out["compiles"] = counters["stats"]["unique_graphs"] - out["reused_at_1"]
    out["torch"], out["device"] = torch.__version__, torch.cuda.get_device_name() if cuda else "cpu"
    return out


@contextlib.contextmanager
def _alone() -> Iterator[None]:
    """Hold the lock file the parent names (``GPU_SCALE_LOCK``) while steps are timed: the two
    variants compile side by side but never time their steps on the GPU at the same time."""
    path = os.environ.get("GPU_SCALE_LOCK")
    if path is None:
        yield
        return
    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def _step_times(compiled: Any, kw: dict[str, Any], cuda: bool) -> tuple[float, float | None]:
    """Median step time (CUDA events; wall clock off CUDA) over 30 steps after 10 warm-up
    steps, and the kernel time per step: the GPU's own time of every kernel the profiler
    saw over 10 steps (None off CUDA)."""
    import torch

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
    if not cuda:
        return statistics.median(times), None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            compiled(**kw)
        torch.cuda.synchronize()
    device_us = sum(getattr(e, "self_device_time_total", 0.0) for e in prof.key_averages())
    return statistics.median(times), device_us / 1000 / 10


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("gpt2", "llama1b"), default="gpt2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu: a dry run of the script")
    ap.add_argument("--layers", type=int, default=0, help="override the depth (a dry run: 1)")
    ap.add_argument("--sweep", choices=("batch", "seq", "both"), default="batch",
                    help="batch: N, N+1, 1; seq: length L, L+1, 1 at batch N (a decode-sized step); both: the "
                         "batch sweep, then the sequence sweep's last two calls (one model build)")
    ap.add_argument("--mode", choices=("default", "reduce-overhead"), default="default",
                    help="torch.compile's mode (reduce-overhead: CUDA graphs)")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_scale.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.batch, args.seq, args.device, args.layers,
                               args.sweep, args.mode)))
        return 0
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_scale: needs a CUDA device (torch sees none); run it on a GPU machine", file=sys.stderr)
        return 2
    # the two variants compile side by side (a GPU machine has 16 cores) and time their steps
    # one after the other (a lock): one gpu_run.sh share fits both, and the JSON is written as
    # each ends, so a share that runs out keeps what finished
    procs = {}
    lock = tempfile.mkstemp(prefix="gpu_scale_lock_")[1]
    for variant in ("stock", "verishape"):
        # each variant compiles its kernels afresh: Triton's and Inductor's on-disk caches
        # would otherwise hand the second variant what the first compiled
        cache = tempfile.mkdtemp(prefix=f"gpu_scale_{variant}_")
        env = {**os.environ, "TRITON_CACHE_DIR": f"{cache}/triton", "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor",
               "GPU_SCALE_LOCK": lock}
        procs[variant] = subprocess.Popen(
            [sys.executable, __file__, "--child", args.model, variant, "--batch", str(args.batch),
             "--seq", str(args.seq), "--device", args.device, "--layers", str(args.layers),
             "--sweep", args.sweep, "--mode", args.mode],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    rows: dict[str, Any] = {}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    for variant, proc in procs.items():
        out, err = proc.communicate()
        if proc.returncode != 0:
            print(f"gpu_scale: the {variant} run failed: {err.strip().splitlines()[-3:]}", file=sys.stderr)
            rows[variant] = {"error": err.strip().splitlines()[-3:]}
        else:
            rows[variant] = json.loads(out.strip().splitlines()[-1])
            print(variant, json.dumps(rows[variant]), flush=True)
        report = {"model": args.model, "layers": args.layers or "config", "batch": args.batch, "seq": args.seq,
                  "sweep": args.sweep, "mode": args.mode, "side_by_side": True, "rows": rows,
                  "at_one": _at_one(rows) if len(rows) == 2 else None}
        args.json.write_text(json.dumps(report, indent=1))
    print("at 1:", json.dumps(report["at_one"]))
    return 1 if any("error" in r for r in rows.values()) else 0


def _at_one(rows: dict[str, Any]) -> dict[str, Any]:
    """The cost of running the generic kernels at 1: verishape's step (the reused artifact)
    over stock's (a compile for 1), and, where it is slower, after how many steps the compile
    it saved is paid back."""
    stock, ours = rows.get("stock", {}), rows.get("verishape", {})
    if "error" in stock or "error" in ours or not stock or not ours:
        return {}
    out: dict[str, Any] = {"reused_calls": ours["reused_at_1"], "compiles": {"stock": stock["compiles"],
                                                                            "verishape": ours["compiles"]}}
    points = [k.removeprefix("step_ms_") for k in ours if k.startswith("step_ms_")]
    for one in [p for p in points if "1" in p.split("x") and p in stock["compile_s"]]:
        if not ours.get("reused", {}).get(one):
            out[one] = {"reused": False}  # compiled for 1 on both sides: nothing to compare
            continue
        row: dict[str, Any] = {"reused": True, "step_ratio": ours[f"step_ms_{one}"] / stock[f"step_ms_{one}"]}
        if ours.get(f"kernel_ms_{one}") and stock.get(f"kernel_ms_{one}"):
            row["kernel_ratio"] = ours[f"kernel_ms_{one}"] / stock[f"kernel_ms_{one}"]
        saved = stock["compile_s"][one] - ours["compile_s"][one]
        extra_ms = ours[f"step_ms_{one}"] - stock[f"step_ms_{one}"]
        row["compile_saved_s"] = saved
        row["payback_steps"] = None if extra_ms <= 0 else int(saved * 1000 / extra_ms)
        out[one] = row
    return out


if __name__ == "__main__":
    sys.exit(main())
