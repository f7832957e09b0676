"""A served decoder loop: ``generate()`` across a request mix, stock ``torch.compile`` vs
``verishape.compile``, side by side (issue 38's measurement).

A served decoder sees prompts of many lengths, decode steps at length 1 with a growing KV
cache, and batches from 1 to N.  Each (family, cache, variant) runs in a fresh process: a
tiny-config Hugging Face causal LM (random weights, built offline), its ``forward`` compiled
(``model.forward = compile(model.forward)``: Inductor, automatic dynamic shapes, torch's
caches off, the child's kernels built in an empty Inductor cache directory of its own, as in a
first run; ``--kernel-cache shared``: in the machine's, where kernels an earlier run built,
either side's, are loaded instead of compiled: the same compiles, fewer seconds;
``--torch-caches on``: on, each variant run cold then warm on one cache
directory, as a restarted server runs), then greedy ``generate()`` for every request of the mix (batch, prompt length),
``NEW_TOKENS`` new tokens each, with ``disable_compile=True`` so that only this compile runs,
the dynamic cache (the default) or ``cache_implementation="static"``.  Reported per run:
Inductor compiles (backend compiles less reuses), Dynamo frames compiled, recompile-limit
hits (after which the forward runs eagerly), reuses proved by verishape, compile seconds
(Dynamo's own per-frame total), wall time, and whether every request's tokens equal an eager
copy's.  JSON output.

    python benchmarks/serve_loop.py --families llama,gpt2,qwen2 --caches dynamic,static --json benchmarks/results/serve_loop.json
    python benchmarks/serve_loop.py --families llama --size 1b --layers 4 --device cuda --mode reduce-overhead --mix 2x7,3x5,1x11
    python benchmarks/serve_loop.py --families gemma2 --caches dynamic,static --sliding-window 8   # past the window
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the issue's request mix: (batch, prompt length)
MIX = ((2, 7), (1, 11), (3, 5), (1, 9), (4, 13), (1, 6), (2, 10))
NEW_TOKENS = 5
VOCAB = 128
FAMILIES = ("llama", "gpt2", "qwen2", "mistral", "gpt_neox", "phi3", "gemma2")
#: a family's own settings over ``_CONFIG``: Gemma 2 alternates sliding-window and full
#: layers, at its own default window (4096: no request of a mix here slides past it;
#: ``--sliding-window`` sets a smaller one)
_FAMILY_CONFIG = {"gemma2": dict(sliding_window=4096)}
#: the attention a family is built with: SDPA, except where transformers has none for it
_ATTENTION = {"gemma2": "eager"}
VARIANTS = ("stock", "verishape", "enable", "hf-stock", "hf-enable", "declared", "stock-spec", "vllm",
            "declared-filter", "enable-spec")
#: the declared space of issue 50's measurement (``declared``: ``verishape.compile(shapes_spec=...)``,
#: ``stock-spec``: the same spec through ``torch.compile``, under ``"**kwargs"``, the form that
#: reaches a Hugging Face forward's wrapper; ``vllm``: every call's token dimensions
#: ``mark_dynamic``, every guard dropped with ``skip_all_guards_unsafe``; ``declared-filter``: the
#: declared space with ``verishape.proved_guard_filter(unsafe=skip_all_guards_unsafe)``, vLLM's
#: filter for every guard the declaration says nothing of, the shape guard dropped only where proved;
#: ``enable-spec``: a framework's own ``torch.compile(shapes_spec=...)`` of the same spec, by
#: parameter name, while ``verishape.enable()`` holds)
DECLARED_BATCH, DECLARED_LENGTH = (1, 8), (1, 128)
#: variants where Hugging Face compiles the decode step itself (``generate``'s compile
#: config, its default backend "inductor"; the static cache only: what it compiles), with
#: nothing else compiled; ``hf-enable`` under ``verishape.enable()``
HF_VARIANTS = ("hf-stock", "hf-enable")
_CONFIG = dict(num_hidden_layers=2, n_layer=2, num_attention_heads=4, n_head=4, num_key_value_heads=2,
               hidden_size=32, n_embd=32, intermediate_size=64, n_inner=64, vocab_size=VOCAB,
               max_position_embeddings=64, n_positions=64, head_dim=8, pad_token_id=0, bos_token_id=0,
               eos_token_id=0, rotary_pct=1.0, sliding_window=None)


#: the ~1B LLaMA-style widths (LLaMA 3.2 1B: hidden 2048, 16 layers, 32 heads, 8 KV heads,
#: MLP 8192; the vocabulary kept small, random weights), for any family: ``--size 1b``
_1B = dict(num_hidden_layers=16, n_layer=16, num_attention_heads=32, n_head=32, num_key_value_heads=8,
           hidden_size=2048, n_embd=2048, intermediate_size=8192, n_inner=8192, head_dim=64,
           max_position_embeddings=256, n_positions=256)
SIZES = ("tiny", "1b")


def build(family: str, size: str = "tiny", layers: int | None = None, device: str = "cpu") -> tuple[Any, Any]:
    """The model and an eager copy with the same weights, on ``device``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config_class = type(AutoConfig.for_model(family))
    chosen = {**_CONFIG, **_FAMILY_CONFIG.get(family, {}), **(_1B if size == "1b" else {})}
    window = os.environ.get("SERVE_LOOP_SLIDING_WINDOW")  # ``--sliding-window``: a family that has one
    if window and "sliding_window" in _FAMILY_CONFIG.get(family, {}):
        chosen["sliding_window"] = int(window)
    if layers is not None:
        chosen.update(num_hidden_layers=layers, n_layer=layers)
    wanted = {k: v for k, v in chosen.items()
              if not isinstance(getattr(config_class, k, None), property) or getattr(config_class, k).fset}
    cfg = AutoConfig.for_model(family, **wanted)
    torch.manual_seed(0)
    attention = _ATTENTION.get(family, "sdpa")
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attention).eval().to(device)
    reference = AutoModelForCausalLM.from_config(cfg, attn_implementation=attention).eval().to(device)
    reference.load_state_dict(model.state_dict())
    return model, reference


class _LimitHits(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.hits = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "torch._dynamo hit config." in record.getMessage():
            self.hits += 1


def _count_lowerings() -> list[int]:
    """How many graphs Inductor lowers from now on (a cross-check of ``inductor_compiles``,
    which is worked out from Dynamo's and verishape's counters)."""
    from torch._inductor.graph import GraphLowering

    count = [0]
    run = GraphLowering.run

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return run(self, *args, **kwargs)

    GraphLowering.run = counted  # this child process only
    return count


def _steady_guard_latency(iters: int) -> None:
    """Torch measures each new entry's guard check once, after flushing the CPU caches
    (``guard_latency_us``); with ``SERVE_LOOP_GUARD_ITERS=N`` it is the mean of N checks of
    the frame's arguments in a row instead (the root manager's ``check``): the per-call cost
    of a served loop, caches warm."""
    if iters <= 1:
        return
    import torch._dynamo.guards as guards

    def steady(root: Any, scope: Any, _n: int) -> float:
        root.check(scope)
        start = time.perf_counter()
        for _ in range(iters):
            root.check(scope)
        return (time.perf_counter() - start) / iters * 1e6

    guards.profile_guard_manager = steady


def declared_spec(layers: int, under_kwargs: bool = False) -> Any:
    """The served loop's declared space, by parameter name (or under ``"**kwargs"``): batch
    1..8, new tokens 1..128 (``input_ids``, ``position_ids``), the cache's length 1..256 (each
    layer's keys and values, a static cache's ``max_cache_len``).  Under ``"**kwargs"`` (torch's
    reading) without the mask and the cache: a static cache's decode step passes a 4-d mask
    where the prefill passes a 2-d one, and torch's spec refuses a rank it does not declare."""
    from torch.fx.experimental.dynamic_spec import ObjectSpec, SeqSpec, ShapesSpec, ShapeVar, TensorSpec

    b = ShapeVar("batch", min=DECLARED_BATCH[0], max=DECLARED_BATCH[1])
    n = ShapeVar("tokens", min=DECLARED_LENGTH[0], max=DECLARED_LENGTH[1])
    t = ShapeVar("cache", min=1, max=2 * DECLARED_LENGTH[1])
    params: dict[str, Any] = {"input_ids": TensorSpec([b, n]), "position_ids": TensorSpec([b, n])}
    if under_kwargs:
        return ShapesSpec({"**kwargs": params})
    layer = ObjectSpec({"keys": TensorSpec([b, None, t, None]), "values": TensorSpec([b, None, t, None]),
                        "max_cache_len": t})
    params.update(attention_mask=TensorSpec([b, t]), past_key_values=ObjectSpec({"layers": SeqSpec([layer] * layers)}))
    return ShapesSpec(params)


def _declared_forward(forward: Any, variant: str, mode: str, layers: int) -> Any:
    """``forward`` compiled for the declared space, as ``variant`` declares it."""
    import functools

    import torch

    import verishape

    mode_ = None if mode == "default" else mode
    if variant == "declared":
        return verishape.compile(forward, mode=mode_, shapes_spec=declared_spec(layers))
    if variant == "declared-filter":
        guard_filter = verishape.proved_guard_filter(unsafe=torch.compiler.skip_all_guards_unsafe)
        return verishape.compile(forward, mode=mode_, shapes_spec=declared_spec(layers),
                                 options={"guard_filter_fn": guard_filter})
    if variant == "stock-spec":
        return torch.compile(forward, mode=mode_, shapes_spec=declared_spec(layers, under_kwargs=True))
    if variant == "enable-spec":
        verishape.enable()
        return torch.compile(forward, mode=mode_, shapes_spec=declared_spec(layers))
    compiled = torch.compile(forward, mode=mode_, options={"guard_filter_fn": torch.compiler.skip_all_guards_unsafe})

    @functools.wraps(forward)  # Hugging Face reads the forward's signature
    def marked(*args: Any, **kwargs: Any) -> Any:
        for name in ("input_ids", "position_ids"):
            t = kwargs.get(name)
            if isinstance(t, torch.Tensor):
                for dim in range(t.dim()):
                    if t.shape[dim] >= 2:  # vLLM pads its token count; a size of 1 cannot be marked
                        torch._dynamo.mark_dynamic(t, dim)
        return compiled(*args, **kwargs)

    return marked


def child(family: str, cache: str, variant: str, mix: tuple[tuple[int, int], ...], device: str = "cpu",
          mode: str = "default", size: str = "tiny", layers: int | None = None) -> dict[str, Any]:
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    from torch._dynamo.utils import counters, get_compilation_metrics

    import verishape
    from verishape.compiler import frames

    if os.environ.get("SERVE_LOOP_TORCH_CACHES") != "on":
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    model, reference = build(family, size, layers, device)
    if variant in ("enable", "hf-enable"):  # what a framework that names its own backend gets: verishape.enable()
        verishape.enable()
    if variant in ("declared", "stock-spec", "vllm", "declared-filter", "enable-spec"):
        model.forward = _declared_forward(model.forward, variant, mode, model.config.num_hidden_layers)
    elif variant not in HF_VARIANTS:
        compile_fn = verishape.compile if variant == "verishape" else torch.compile
        model.forward = compile_fn(model.forward, mode=None if mode == "default" else mode)
    _steady_guard_latency(int(os.environ.get("SERVE_LOOP_GUARD_ITERS", "1")))
    hits = _LimitHits()
    logging.getLogger("torch._dynamo").addHandler(hits)
    lowerings = _count_lowerings()
    torch._dynamo.reset()
    counters.clear()
    kwargs: dict[str, Any] = {"max_new_tokens": NEW_TOKENS, "do_sample": False, "disable_compile": True}
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    reference_kwargs = dict(kwargs)
    if variant in HF_VARIANTS:
        from transformers import CompileConfig

        config = CompileConfig(backend="inductor", mode=mode)
        config._compile_all_devices = True  # Hugging Face compiles on CUDA only, unless told
        kwargs.update(disable_compile=False, compile_config=config)
    equal, requests = True, []
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    start = time.perf_counter()
    with torch.no_grad():
        for i, (batch, length) in enumerate(mix):
            ids = torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(i)).to(device)
            mask = torch.ones_like(ids)
            graphs = counters["stats"]["unique_graphs"]
            sync()
            t0 = time.perf_counter()
            try:
                got = model.generate(ids, attention_mask=mask, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a variant that drops guards may fail: reported, not fatal
                requests.append({"batch": batch, "prompt": length, "error": f"{type(exc).__name__}: {exc}"[:300]})
                equal = False
                continue
            sync()
            seconds = time.perf_counter() - t0
            same = torch.equal(got, reference.generate(ids, attention_mask=mask, **reference_kwargs))
            equal &= same
            requests.append({"batch": batch, "prompt": length, "seconds": seconds, "tokens_equal": same,
                             "traced": counters["stats"]["unique_graphs"] - graphs,
                             "tokens": hashlib.sha256(got.cpu().numpy().tobytes()).hexdigest()[:16]})
    wall = time.perf_counter() - start
    ran = [r for r in requests if "error" not in r]
    warm = [r for r in ran if r["traced"] == 0]
    metrics = get_compilation_metrics()
    reused = counters["verishape"]["reused"]
    # a candidate compiled at 1 (compiler/widen/candidate.py) ends in a restart, never
    # returned to Dynamo, which counts the graphs its backend returns: counted here
    candidates = counters["verishape"]["candidates"]
    # with torch's caches on, a graph served from them was not lowered here: Inductor lowered
    # what its FX-graph cache missed or bypassed (an AOTAutograd cache hit loads its graph from
    # the FX-graph cache, a hit there too)
    lowered = (counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_bypass"]
               if os.environ.get("SERVE_LOOP_TORCH_CACHES") == "on" else counters["stats"]["unique_graphs"] - reused + candidates)
    cached = counters["stats"]["unique_graphs"] - reused + candidates - lowered
    with frames._envs_lock:
        refusals = [f"{n}: {w}"[:300] for es in frames._envs_by_code.values() for e in es
                    for n, w in getattr(e, "verishape_log", None) and e.verishape_log.not_widened or ()]
        filtered = [line[:300] for es in frames._envs_by_code.values() for e in es
                    for line in getattr(e, "verishape_log", None) and e.verishape_log.filtered or ()]
    return {"family": family, "cache": cache, "variant": variant, "torch": torch.__version__,
            "inductor_compiles": lowered, "graphs_lowered": lowerings[0], "dynamo_frames": len(metrics),
            "served_from_torch_caches": cached,
            "recompile_limit_hits": hits.hits, "reused": reused,
            "reused_at_size_1": counters["verishape"]["reused_at_size_1"],
            "reused_relaid": counters["verishape"]["reused_relaid"],
            "reused_generic": counters["verishape"]["reused_generic"],
            "candidates": candidates, "candidates_dropped": counters["verishape"]["candidates_dropped"],
            "compile_s": sum(m.entire_frame_compile_time_s or 0.0 for m in metrics), "wall_s": wall,
            # torch's own measure of each new entry's guard check (one run on the frame's
            # arguments, after a cache flush), per compiled frame
            "guard_latency_us": [m.guard_latency_us for m in metrics if m.guard_latency_us is not None],
            "tokens_equal": equal, "device": device, "mode": mode, "size": size, "layers": layers,
            "tokens_per_s": (sum(r["batch"] for r in ran) * NEW_TOKENS / sum(r["seconds"] for r in ran)) if ran else None,
            "errors": len(requests) - len(ran),
            # requests during which nothing was traced: the serving rate once compiled
            "warm_tokens_per_s": (sum(r["batch"] for r in warm) * NEW_TOKENS / sum(r["seconds"] for r in warm)
                                  if warm else None),
            "requests": requests, "refusals": refusals[:5],
            # what verishape.proved_guard_filter did with each frame's shape guard
            "shape_guard": filtered}


def parse_mix(text: str) -> tuple[tuple[int, int], ...] | None:
    """``BATCHxPROMPT,...`` as (batch, prompt) pairs of positive integers; None where it is not that."""
    try:
        mix = tuple((int(b), int(n)) for b, n in (item.split("x") for item in text.split(",")))
    except ValueError:
        return None
    return mix if mix and all(b >= 1 and n >= 1 for b, n in mix) else None


def bad_mix_or_window(program: str, mix: str | None, window: int | None) -> str | None:
    """The one-line error for a ``--mix`` that :func:`parse_mix` refuses or a ``--sliding-window`` under 2, or None."""
    if mix is not None and parse_mix(mix) is None:
        return (f"{program}: --mix {mix!r}: expected BATCHxPROMPT pairs of positive integers, comma-separated "
                f"(e.g. 2x7,3x5)")
    if window is not None and window < 2:
        return f"{program}: --sliding-window {window}: must be at least 2"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="llama,gpt2,qwen2")
    ap.add_argument("--caches", default="dynamic,static")
    ap.add_argument("--requests", type=int, default=len(MIX), help="the first N requests of the mix")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--mode", choices=("default", "reduce-overhead", "max-autotune-no-cudagraphs"), default="default",
                    help="torch.compile's mode (reduce-overhead: CUDA graphs, on a GPU)")
    ap.add_argument("--size", choices=SIZES, default="tiny", help="tiny widths, or the ~1B LLaMA widths")
    ap.add_argument("--layers", type=int, help="override the number of layers (a 1B-wide model with fewer layers)")
    ap.add_argument("--mix", help="another request mix, BATCHxPROMPT,... (e.g. 2x7,3x5); replaces --requests")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "serve_loop.json")
    ap.add_argument("--torch-caches", choices=("off", "on"), default="off",
                    help="on: torch's FX-graph and AOTAutograd caches on (the default users run); each variant runs "
                         "twice on one empty cache directory, cold then warm (a restarted server)")
    ap.add_argument("--kernel-cache", choices=("fresh", "shared"), default="fresh",
                    help="with --torch-caches off: fresh, each child's kernels compiled in an empty Inductor cache "
                         "directory (a first run's seconds); shared, the machine's (counts only: kernels earlier runs "
                         "built are loaded)")
    ap.add_argument("--variants", default="stock,verishape",
                    help="comma-separated: stock (torch.compile), verishape (verishape.compile), enable "
                         "(torch.compile under verishape.enable())")
    ap.add_argument("--sliding-window", type=int,
                    help="the attention window of a family built with one (gemma2; default: its own, 4096), small enough "
                         "that a mix's requests slide past it")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if why := bad_mix_or_window("serve_loop", args.mix, args.sliding_window):
        print(why, file=sys.stderr)
        return 2
    mix = MIX[:args.requests] if args.mix is None else parse_mix(args.mix)
    if args.layers is not None and args.layers < 1:
        print(f"serve_loop: --layers {args.layers}: must be at least 1", file=sys.stderr)
        return 2
    if args.child:
        print(json.dumps(child(*args.child, mix, args.device, args.mode, args.size, args.layers)))
        return 0
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("serve_loop: --device cuda needs a CUDA device; this machine has none", file=sys.stderr)
            return 2
    families = [f for f in args.families.split(",") if f]
    caches = [c for c in args.caches.split(",") if c]
    variants = [v for v in args.variants.split(",") if v]
    bad = ([f for f in families if f not in FAMILIES] + [c for c in caches if c not in ("dynamic", "static")]
           + [v for v in variants if v not in VARIANTS])
    if bad or not variants or not 1 <= args.requests <= len(MIX):
        print(f"serve_loop: unknown family, cache or variant {bad} (families: {', '.join(FAMILIES)}; caches: dynamic, "
              f"static; variants: {', '.join(VARIANTS)}), or --requests {args.requests} outside 1..{len(MIX)}",
              file=sys.stderr)
        return 2
    rows = []
    for family in families:
        for cache in caches:
            for variant, start in [(v, s) for v in variants if cache == "static" or v not in HF_VARIANTS
                                   for s in (("cold", "warm") if args.torch_caches == "on" else ("off",))]:
                env = dict(os.environ, SERVE_LOOP_TORCH_CACHES=args.torch_caches,
                           SERVE_LOOP_SLIDING_WINDOW=str(args.sliding_window or ""))
                own_dir = start == "cold" or (start == "off" and args.kernel_cache == "fresh")
                if own_dir:
                    cache_dir = tempfile.mkdtemp(prefix="serve-loop-")
                if start != "off" or own_dir:
                    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
                proc = subprocess.run([sys.executable, __file__, "--child", family, cache, variant,
                                       "--mix", ",".join(f"{b}x{n}" for b, n in mix), "--device", args.device,
                                       "--mode", args.mode, "--size", args.size,
                                       *(["--layers", str(args.layers)] if args.layers is not None else [])],
                                      capture_output=True, text=True, cwd=ROOT, env=env)
                if start == "warm" or (start == "off" and own_dir):  # (a cold run's folder serves its warm run)
                    shutil.rmtree(cache_dir, ignore_errors=True)
                if proc.returncode != 0:
                    row = {"family": family, "cache": cache, "variant": variant,
                           "error": proc.stderr.strip().splitlines()[-3:]}
                else:
                    row = json.loads(proc.stdout.strip().splitlines()[-1])
                row["torch_caches"] = start
                rows.append(row)
                print(f"{family:8s} {cache:7s} {variant:9s} {start:4s} " + (
                    f"error: {row['error']}" if "error" in row else
                    f"inductor compiles {row['inductor_compiles']}, from torch's caches "
                    f"{row['served_from_torch_caches']}, frames {row['dynamo_frames']}, "
                    f"limit hits {row['recompile_limit_hits']}, reused {row['reused']}, "
                    f"compile {row['compile_s']:.1f} s, wall {row['wall_s']:.1f} s, tokens/s {row['tokens_per_s'] or 0:.1f}, "
                    f"failed requests {row['errors']}, "
                    f"tokens equal {row['tokens_equal']}"),
                    flush=True)
    for row in rows:  # the same tokens as stock's, request by request (where eager's differ on a GPU)
        other = next((r for r in rows if r.get("variant") == "stock" and r.get("family") == row.get("family")
                      and r.get("cache") == row.get("cache") and r["torch_caches"] == row["torch_caches"]), None)
        if "error" not in row and other is not None and "error" not in other:
            row["tokens_equal_stock"] = [a.get("tokens") for a in row["requests"]] == [a.get("tokens") for a in other["requests"]]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"mix": mix, "new_tokens": NEW_TOKENS, "device": args.device, "mode": args.mode,
                                     "torch_caches": args.torch_caches, "kernel_cache": args.kernel_cache,
                                     "size": args.size, "layers": args.layers, "sliding_window": args.sliding_window,
                                     "rows": rows}, indent=1))
    return 1 if any("error" in r or not r["tokens_equal"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
