"""Batch-1 widening across many model families: where Inductor reuses at size 1, and why not.

Tiny-config Hugging Face models of many families, built offline from configs (random
weights): decoders (the sequence sweep's length 1 is a decode-sized step), encoders,
encoder-decoders and vision models.  Each (model, sweep) runs in a fresh process:
``verishape.compile`` with automatic dynamic shapes and Inductor, torch's compile caches
off, the sweep of ``benchmarks/real_models.py`` (batch 2, 3, 1, 4, 1, 5 at length 8;
length 8, 12, 1, 16, 5 at batch 2; ``decode``: a decoder with its causal-LM head, length 12,
17, 1, 20, 1 at batch 2, issue 48's decode step), every output compared with eager.  Reported: backend
compiles (stock compiles 3 on these sweeps), whether size 1 reused the generic artifact,
the first refusal's kind and text, and the largest difference from eager.

    python benchmarks/widen_models.py --jobs 2 --json benchmarks/results/widen_models.json
    python benchmarks/widen_models.py --models mistral,qwen2 --sweeps seq
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 128
SWEEPS = {"batch": [(b, 8) for b in (2, 3, 1, 4, 1, 5)], "seq": [(2, s) for s in (8, 12, 1, 16, 5)],
          # issue 48's decode step: a causal LM (its head on) at batch 2, the length going to 1
          # twice between longer prompts; a decoder runs it with its language-model head
          "decode": [(2, s) for s in (12, 17, 1, 20, 1)]}
#: sweeps a decoder runs with its causal-LM head (logits over the vocabulary) instead of the bare model
LM_SWEEPS = ("decode",)

#: small sizes under every name the families use (a config keeps names it does not know)
_TEXT = dict(num_hidden_layers=2, num_layers=2, n_layer=2, num_attention_heads=4, n_head=4, num_heads=4,
             num_key_value_heads=2, hidden_size=32, n_embd=32, d_model=32, intermediate_size=64, ffn_dim=64,
             d_ff=64, n_inner=64, vocab_size=VOCAB, max_position_embeddings=64, n_positions=64,
             max_seq_len=64, head_dim=8, pad_token_id=0, bos_token_id=0, eos_token_id=0)
_ENC_DEC = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                encoder_ffn_dim=64, decoder_ffn_dim=64, d_kv=8, num_decoder_layers=2, decoder_start_token_id=0)
_VISION = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, image_size=32,
               patch_size=8, num_channels=3)

#: family -> (kind, config overrides); kind: "decoder", "encoder", "enc_dec", "vision", "conv"
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    # decoders
    "gpt2": ("decoder", {}), "llama": ("decoder", {}), "mistral": ("decoder", {"sliding_window": None}),
    "qwen2": ("decoder", {}), "qwen3": ("decoder", {}), "gemma": ("decoder", {}), "gemma2": ("decoder", {}),
    "phi": ("decoder", {}), "phi3": ("decoder", {}), "opt": ("decoder", {"word_embed_proj_dim": 32}),
    "gpt_neox": ("decoder", {"rotary_pct": 1.0}), "falcon": ("decoder", {"new_decoder_architecture": False}),
    "bloom": ("decoder", {}), "gptj": ("decoder", {"rotary_dim": 4}), "stablelm": ("decoder", {}),
    "olmo": ("decoder", {}), "starcoder2": ("decoder", {}), "codegen": ("decoder", {"rotary_dim": 4}),
    "granite": ("decoder", {}), "gpt_neo": ("decoder", {"attention_types": [[["global"], 2]], "window_size": 16}),
    "biogpt": ("decoder", {}), "xglm": ("decoder", {"attention_heads": 4, "ffn_dim": 64}),
    # encoders
    "bert": ("encoder", {}), "roberta": ("encoder", {}), "albert": ("encoder", {"embedding_size": 16}),
    "electra": ("encoder", {"embedding_size": 16}), "deberta-v2": ("encoder", {}),
    "xlm-roberta": ("encoder", {}), "mpnet": ("encoder", {}), "distilbert": ("encoder", {"dim": 32, "hidden_dim": 64,
                                                                                         "n_layers": 2,
                                                                                         "n_heads": 4}),
    "convbert": ("encoder", {"embedding_size": 32}), "mobilebert": ("encoder", {"embedding_size": 16,
                                                                                 "intra_bottleneck_size": 32,
                                                                                 "true_hidden_size": 32}),
    # encoder-decoders
    "t5": ("enc_dec", {}), "bart": ("enc_dec", {}), "mbart": ("enc_dec", {}), "pegasus": ("enc_dec", {}),
    "marian": ("enc_dec", {}),
    # vision
    "vit": ("vision", {}), "deit": ("vision", {}), "beit": ("vision", {}), "dinov2": ("vision", {}),
    "swin": ("conv", {"image_size": 32, "embed_dim": 16, "depths": [1, 1], "num_heads": [1, 2],
                      "window_size": 2, "patch_size": 4}),
    "convnext": ("conv", {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2}),
    "resnet": ("conv", {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1]}),
    "regnet": ("conv", {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "groups_width": 8}),
}


def build(family: str, lm: bool = False) -> tuple[Any, Callable[[int, int], dict[str, Any]], str]:
    """The model (eval mode) and its input maker (batch, seq) -> kwargs; ``lm``: a decoder
    with its causal-LM head."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    kind, over = FAMILIES[family]
    base = {"vision": _VISION, "conv": {"num_channels": 3}}.get(kind, _TEXT)
    extra = _ENC_DEC if kind == "enc_dec" else {}
    wanted = {**base, **extra, **over}
    config_class = type(AutoConfig.for_model(family))
    # names the config computes itself (a property without a setter) are left to it
    wanted = {k: v for k, v in wanted.items()
              if not isinstance(getattr(config_class, k, None), property) or getattr(config_class, k).fset}
    cfg = AutoConfig.for_model(family, **wanted)
    auto = AutoModelForCausalLM if lm and kind == "decoder" else AutoModel
    torch.manual_seed(0)
    try:
        model = auto.from_config(cfg, attn_implementation="sdpa").eval()
    except ValueError:  # the family has no sdpa attention: its eager attention
        torch.manual_seed(0)
        model = auto.from_config(cfg, attn_implementation="eager").eval()

    def text(batch: int, seq: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(1000 * batch + seq)
        out = {"input_ids": torch.randint(3, VOCAB, (batch, seq), generator=g),
               "attention_mask": torch.ones(batch, seq, dtype=torch.long)}
        if kind == "enc_dec":
            out["decoder_input_ids"] = torch.randint(3, VOCAB, (batch, seq), generator=g)
        if kind in ("decoder", "enc_dec"):
            out["use_cache"] = False
        return out

    def image(batch: int, seq: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(batch)
        return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}

    return model, (image if kind in ("vision", "conv") else text), kind


def _first_tensor(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state", "pooler_output"):
        v = getattr(out, key, None) if not isinstance(out, dict) else out.get(key)
        if isinstance(v, torch.Tensor):
            return v
    if isinstance(out, (tuple, list)):
        return next(t for t in map(_first_tensor, out) if t is not None)
    return None


def run(family: str, sweep: str, device: str = "cpu", cache_dir: str | None = None) -> dict[str, Any]:
    """One (model, sweep) in this process.  ``device``: cpu (C++ kernels), cuda (Triton
    kernels on the GPU) or triton-cpu (Triton kernels on the CPU, in Triton's interpreter).
    ``cache_dir``: torch's compile caches on (its defaults), in that folder."""
    import logging
    import warnings

    if cache_dir is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir  # before torch reads it
    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    import torch
    from torch._dynamo.utils import counters

    import verishape
    from verishape.compiler import frames
    from verishape.fuzz.widen_check import reason_class

    start = time.perf_counter()
    try:
        model, make, kind = build(family, lm=sweep in LM_SWEEPS)
    except Exception as exc:  # noqa: BLE001 - a config this transformers cannot build is reported, not fatal
        return {"family": family, "sweep": sweep, "status": f"not built: {type(exc).__name__}: {exc}"[:300]}
    torch._dynamo.reset()
    counters.clear()
    target = "cuda" if device == "cuda" else "cpu"
    model = model.to(target)
    if device == "triton-cpu":
        from verishape.fuzz.triton_cpu import triton_on_cpu

        codegen: Any = triton_on_cpu()
    else:
        codegen = contextlib.nullcontext()
    caches = (contextlib.nullcontext() if cache_dir is not None else
              torch._inductor.config.patch(fx_graph_cache=False))
    with caches, torch._functorch.config.patch(enable_autograd_cache=cache_dir is not None), codegen:
        compiled = verishape.compile(model)
        max_diff, calls, error = 0.0, [], None
        for batch, seq in SWEEPS[sweep]:
            kwargs = {k: v.to(target) if isinstance(v, torch.Tensor) else v for k, v in make(batch, seq).items()}
            reused = counters["verishape"]["reused"]
            try:
                with torch.no_grad():
                    got = _first_tensor(compiled(**kwargs))
                    want = _first_tensor(model(**kwargs))
            except Exception as exc:  # noqa: BLE001 - reported per model
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                break
            diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
            max_diff = max(max_diff, diff)
            calls.append({"size": (batch, seq), "reused": counters["verishape"]["reused"] > reused})
    with frames._envs_lock:
        refusals = [f"{n}: {w}" for es in frames._envs_by_code.values() for e in es for n, w in e.verishape_log.not_widened]
    compiles = counters["stats"]["unique_graphs"] - counters["verishape"]["reused"]
    at_one = [c for c in calls if 1 in (c["size"][0] if sweep == "batch" else c["size"][1],)]
    return {"family": family, "kind": kind, "sweep": sweep, "status": "error" if error else "ran", "error": error,
            "compiles": compiles,
            "lowered": counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_bypass"],
            "served_from_torch_caches": counters["inductor"]["fxgraph_cache_hit"]
            + counters["aot_autograd"]["autograd_cache_hit"], "reused_at_1": any(c["reused"] for c in at_one),
            "reused_calls": sum(c["reused"] for c in calls), "max_abs_diff": max_diff,
            "refusal_kinds": sorted({reason_class(r) for r in refusals}), "refusals": [r[:400] for r in refusals[:3]],
            "seconds": time.perf_counter() - start, "torch": torch.__version__, "device": device}


def _write(path: Path, device: str, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": device, "rows": rows}, indent=1))


def _run_all(todo: list[tuple[str, str]], args: argparse.Namespace, start: str | None, work: str | None,
             rows: list[dict[str, Any]]) -> None:
    """Every (model, sweep) of ``todo``, a fresh process each, ``args.jobs`` at a time."""
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = {pool.submit(run, m, s, args.device, os.path.join(work, f"{m}-{s}") if work else None): (m, s)
                   for m, s in todo}
        for fut in cf.as_completed(futures):
            m, s = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # noqa: BLE001 - a crashed child is a row
                row = {"family": m, "sweep": s, "status": f"crashed: {exc!r}"}
            if start:
                row["start"] = start
            rows.append(row)
            _write(args.json, args.device, rows)  # as it goes: a run stopped at its time budget keeps its rows
            print(f"{m:12s} {s:5s} {start or '':4s} {row['status']:6s} compiles={row.get('compiles')} "
                  f"lowered={row.get('lowered')} reused_at_1={row.get('reused_at_1')} "
                  f"diff={row.get('max_abs_diff', float('nan')):.1e} {row.get('refusal_kinds', '')}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(FAMILIES))
    ap.add_argument("--sweeps", default="batch,seq")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda", "triton-cpu"), default="cpu",
                    help="cuda: Triton kernels on the GPU; triton-cpu: Triton kernels on the CPU, in Triton's interpreter")
    ap.add_argument("--caches", choices=("off", "on"), default="off",
                    help="off (default): torch's compile caches off; on: torch's defaults, each (model, sweep) run "
                         "twice on a cache folder of its own, cold then warm (a restart)")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "widen_models.json")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    sweeps = [s for s in args.sweeps.split(",") if s]
    bad = [m for m in models if m not in FAMILIES] + [s for s in sweeps if s not in SWEEPS]
    if bad:
        print(f"widen_models: unknown model or sweep {bad}; models: {', '.join(FAMILIES)}; sweeps: {', '.join(SWEEPS)}",
              file=sys.stderr)
        return 2
    if args.device == "triton-cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # the workers import Triton: interpreted (verishape.fuzz.triton_cpu)
    todo = [(m, s) for m in models for s in sweeps if not (s != "batch" and FAMILIES[m][0] in ("vision", "conv"))]
    rows: list[dict[str, Any]] = []
    work = tempfile.mkdtemp(prefix="widen-models-") if args.caches == "on" else None
    try:
        # with caches on: every cold run first, then every warm run on the folder its cold run left
        for start in (("cold", "warm") if work else (None,)):
            _run_all(todo, args, start, work, rows)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    rows.sort(key=lambda r: (list(FAMILIES).index(r["family"]), r["sweep"], r.get("start") or ""))
    _write(args.json, args.device, rows)
    for kind in ("decoder", "encoder", "enc_dec", "vision", "conv"):
        for s in sweeps:
            for start in sorted({r.get("start") or "" for r in rows}):
                ran = [r for r in rows if r.get("kind") == kind and r["sweep"] == s and r["status"] == "ran"
                       and (r.get("start") or "") == start]
                if ran:
                    print(f"{kind:8s} {s:5s} {start:4s}: reused at 1 in {sum(r['reused_at_1'] for r in ran)} of "
                          f"{len(ran)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
