"""Widening across restarts, with torch's caches on (the default users run): stock
``torch.compile`` against ``verishape.compile`` on a batch sweep (4, 6, 1, 3, 1), each
start in a process of its own.

Starts, per workload and side (``--starts``):

* ``cold``: an empty cache folder;
* ``warm``: the same folder again (a restarted server);
* ``remote``: an empty second folder, torch's AOTAutograd and FX-graph remote caches on a
  Redis server this benchmark starts on localhost (filled by a cold run with the remote
  cache on: a second machine of a fleet);
* ``artifacts``: an empty folder after ``torch.compiler.load_cache_artifacts()`` of what the
  cold process saved with ``save_cache_artifacts()``.

Figures per process: Inductor compiles (FX-graph cache misses and bypasses: graphs lowered
in this process), graphs served from torch's caches, size-1 reuses, Dynamo compile seconds,
outputs equal to eager's.  The goal: verishape lowers no more graphs than stock at every
start, and reuses at 1 wherever the cold start did.

    python benchmarks/warm_restart.py --json benchmarks/reference/warm_restart.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import redis_server  # noqa: E402

BATCHES = (4, 6, 1, 3, 1)
SEQ = 8
WORKLOADS = ("mlp", "gpt2", "llama")
STARTS = ("cold", "warm", "remote", "artifacts")


def _workload(name: str):
    """(module, inputs for a batch) of a workload."""
    import torch

    torch.manual_seed(0)
    if name == "mlp":
        module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
        return module, lambda b: {"input": torch.randn(b, 8, generator=torch.Generator().manual_seed(b))}
    import tiny_models

    case = tiny_models.MODELS[name]()
    return case.module.eval(), lambda b: case.inputs(b, SEQ)


def child(name: str, side: str, save: str | None, load: str | None) -> dict:
    import torch
    from torch._dynamo.utils import counters

    if load:
        torch.compiler.load_cache_artifacts(pathlib.Path(load).read_bytes())
    module, inputs = _workload(name)
    if side == "verishape":
        import verishape

        compiled = verishape.compile(module)
    else:
        compiled = torch.compile(module)
    equal = True
    start = time.perf_counter()
    with torch.no_grad():
        for b in BATCHES:
            kwargs = inputs(b)
            got, want = compiled(**kwargs), module(**kwargs)
            got = got[0] if isinstance(got, tuple) else getattr(got, "last_hidden_state", got)
            want = want[0] if isinstance(want, tuple) else getattr(want, "last_hidden_state", want)
            equal = equal and torch.allclose(got, want, atol=1e-5, rtol=1e-4)
    wall = time.perf_counter() - start
    if save:
        blob = torch.compiler.save_cache_artifacts()
        pathlib.Path(save).write_bytes(blob[0] if blob else b"")
    from torch._dynamo.utils import get_compilation_metrics

    return {"workload": name, "variant": side, "torch": torch.__version__,
            "inductor_compiles": counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_bypass"],
            "served_from_torch_caches": counters["inductor"]["fxgraph_cache_hit"]
            + counters["aot_autograd"]["autograd_cache_hit"],
            "aot_cache_hits": counters["aot_autograd"]["autograd_cache_hit"],
            "reused_at_size_1": counters["verishape"]["reused_at_size_1"],
            "compile_s": round(sum(m.entire_frame_compile_time_s or 0.0 for m in get_compilation_metrics()), 3),
            "wall_s": round(wall, 3), "outputs_equal": bool(equal)}


def _run(name: str, side: str, env: dict[str, str], extra: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", name, side, *extra], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    if proc.returncode != 0:
        return {"workload": name, "variant": side, "error": proc.stderr.strip().splitlines()[-3:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def sweep(name: str, side: str, starts: list[str], work: str, port: int | None) -> list[dict]:
    """One workload, one side, every start asked for (each a process)."""
    base = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(work, f"{name}-{side}-local"))
    blob = os.path.join(work, f"{name}-{side}.artifacts")
    rows = []
    for start in starts:
        env, extra = dict(base), []
        if start == "cold":
            extra = ["--save", blob]
        elif start == "remote":
            env.update(TORCHINDUCTOR_REDIS_HOST="127.0.0.1", TORCHINDUCTOR_REDIS_PORT=str(port),
                       TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE="1", TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE="1")
            # a first machine fills the remote cache, a second one with an empty folder is measured
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, f"{name}-{side}-remote-first")
            filled = _run(name, side, env, [])
            if "error" in filled:
                rows.append({**filled, "start": "remote (filling)"})
                continue
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, f"{name}-{side}-remote-second")
        elif start == "artifacts":
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, f"{name}-{side}-loaded")
            extra = ["--load", blob]
        row = _run(name, side, env, extra)
        row["start"] = start
        rows.append(row)
        print(f"{name:6s} {side:9s} {start:9s} " + (
            f"error: {row['error']}" if "error" in row else
            f"inductor compiles {row['inductor_compiles']}, from torch's caches {row['served_from_torch_caches']}, "
            f"reused at 1 {row['reused_at_size_1']}, compile {row['compile_s']:.1f} s, "
            f"outputs equal {row['outputs_equal']}"), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--starts", default=",".join(STARTS))
    parser.add_argument("--json", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "warm_restart.json")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "SIDE"), help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    parser.add_argument("--load", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.save, args.load)))
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    starts = [s for s in args.starts.split(",") if s]
    bad = [w for w in workloads if w not in WORKLOADS] + [s for s in starts if s not in STARTS]
    if bad or not workloads or not starts:
        print(f"warm_restart: unknown workload or start {bad or '(none given)'} (workloads: {', '.join(WORKLOADS)}; "
              f"starts: {', '.join(STARTS)})", file=sys.stderr)
        return 2
    if starts[0] != "cold" and any(s in ("warm", "artifacts") for s in starts):
        print("warm_restart: --starts must begin with cold (warm and artifacts read what it leaves)", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="warm-restart-")
    try:
        with (redis_server.started(work) if "remote" in starts else contextlib.nullcontext()) as port:
            rows = [row for name in workloads for side in ("stock", "verishape")
                    for row in sweep(name, side, starts, work, port)]
    except redis_server.NoServer as exc:
        print(f"warm_restart: --starts remote: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for row in rows:
        other = next((r for r in rows if r["variant"] == "stock" and r["workload"] == row["workload"]
                      and r.get("start") == row.get("start")), None)
        if row["variant"] == "verishape" and other and "error" not in row and "error" not in other:
            row["compiles_at_most_stock"] = row["inductor_compiles"] <= other["inductor_compiles"]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"batches": BATCHES, "seq": SEQ, "rows": rows}, indent=1))
    failed = [r for r in rows if "error" in r or not r["outputs_equal"] or r.get("compiles_at_most_stock") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
