"""The fewest graphs a served loop can compile: a floor under issue 48's "within 4 compiles".

Widening serves a call from a kept compile where only sizes differ; it cannot merge two graphs that take
different paths through the program's Python (a cache layer initialized or not, a sliding window full or
not, a cached tensor that is a view of a longer one).  This counts those paths for ``serve_loop.py``'s served
loop (``generate()`` over a request mix, the same models and mixes): Dynamo's graphs with the ``eager``
backend (nothing lowered: a lowering's own guards only add graphs) and no recompile limit, traced four ways:

* ``automatic``: ``torch.compile`` as users run it (automatic dynamic: the first compile static);
* ``dynamic``: ``dynamic=True``, every size a symbol from the first call (0 and 1 specialized, duck sizing);
* ``generic``: ``dynamic=True`` without duck sizing and with backed sizes size-oblivious
  (``backed_size_oblivious``: 1 is not specialized either), the most generic trace Dynamo makes.  Its graph
  count is the floor: under automatic dynamic, whose first compile is static, one more wherever the first
  call's path recurs at other sizes.  A trace that size-oblivious semantics breaks (a broadcast against a
  size that is 1 at run time) is reported with its error, and one that breaks the graph (size-oblivious
  reasoning breaks SDPA attention's trace in LLaMA-style models) with its graph breaks, which make graphs
  that are no paths: either way ``dynamic`` bounds the floor instead;
* ``no_one``: ``dynamic=True`` without duck sizing on the mix with every batch of 1 sent at 2 (a size 1 is
  widening's to serve), the floor where ``generic`` has none.

    python benchmarks/serve_paths.py --families gemma2 --sliding-window 8 --json F
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import serve_loop  # noqa: E402  (benchmarks/ is on the path only from here)

SETTINGS = ("automatic", "dynamic", "generic", "no_one")


def child(family: str, cache: str, setting: str, mix: tuple[tuple[int, int], ...]) -> dict[str, Any]:
    """Trace the served loop once under ``setting`` in this process: graphs in all and per request."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.config.recompile_limit = torch._dynamo.config.cache_size_limit = 1024
    if setting in ("generic", "no_one"):
        torch.fx.experimental._config.use_duck_shape = False
    if setting == "generic":
        torch.fx.experimental._config.backed_size_oblivious = True
    if setting == "no_one":
        mix = tuple((max(batch, 2), length) for batch, length in mix)
    model, _ = serve_loop.build(family)
    model.forward = torch.compile(model.forward, backend="eager", dynamic=None if setting == "automatic" else True)
    kwargs: dict[str, Any] = {"max_new_tokens": serve_loop.NEW_TOKENS, "do_sample": False, "disable_compile": True}
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    per_request = []
    with torch.no_grad():
        for i, (batch, length) in enumerate(mix):
            ids = torch.randint(1, serve_loop.VOCAB, (batch, length), generator=torch.Generator().manual_seed(i))
            before = counters["stats"]["unique_graphs"]
            try:
                model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
            except Exception as exc:  # noqa: BLE001 - a setting whose trace fails is reported, not fatal
                return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"[:300],
                        "per_request": per_request}
            per_request.append(counters["stats"]["unique_graphs"] - before)
    # a graph break makes more graphs than paths (each resumed function is traced apart): no floor then
    return {"graphs": counters["stats"]["unique_graphs"], "per_request": per_request,
            "graph_breaks": sum(counters["graph_break"].values())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="llama,gpt2,qwen2,gemma2")
    ap.add_argument("--caches", default="dynamic,static")
    ap.add_argument("--mix", help="another request mix, BATCHxPROMPT,... (default: serve_loop.py's)")
    ap.add_argument("--sliding-window", type=int, help="the window of a family built with one (gemma2)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    caches = [c for c in args.caches.split(",") if c]
    bad = [f for f in families if f not in serve_loop.FAMILIES] + [c for c in caches if c not in ("dynamic", "static")]
    if bad or not families or not caches:
        print(f"serve_paths: unknown family or cache {bad} (families: {', '.join(serve_loop.FAMILIES)}; caches: "
              f"dynamic, static)", file=sys.stderr)
        return 2
    if why := serve_loop.bad_mix_or_window("serve_paths", args.mix, args.sliding_window):
        print(why, file=sys.stderr)
        return 2
    mix = serve_loop.MIX if args.mix is None else serve_loop.parse_mix(args.mix)
    if args.child:
        print(json.dumps(child(*args.child, mix)))
        return 0
    env = dict(os.environ, SERVE_LOOP_SLIDING_WINDOW=str(args.sliding_window or ""))
    rows = []
    for family in families:
        for cache in caches:
            row: dict[str, Any] = {"family": family, "cache": cache}
            for setting in SETTINGS:
                proc = subprocess.run([sys.executable, __file__, "--child", family, cache, setting,
                                       "--mix", ",".join(f"{b}x{n}" for b, n in mix)],
                                      capture_output=True, text=True, cwd=ROOT, env=env)
                row[setting] = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
                                else {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]})
            rows.append(row)
            print(f"{family:8s} {cache:7s} " + "  ".join(
                f"{s} {row[s].get('graphs', 'error')}" + (f" ({row[s]['graph_breaks']} graph breaks)"
                                                          if row[s].get("graph_breaks") else "")
                for s in SETTINGS), flush=True)
    import torch

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"torch": torch.__version__, "mix": mix, "new_tokens": serve_loop.NEW_TOKENS,
                                         "sliding_window": args.sliding_window, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
