"""``verishape demo``: one data-dependent program, compiled both ways, decisions shown;
then the default path (Inductor, automatic dynamic shapes) on a batch sweep that ends at 1.

The first program packs the positive entries of a tensor into rows of four after a
``torch._check`` that says their count is a multiple of eight, then branches on a
divisibility fact that follows from it.  Stock ``torch.compile`` cannot decide that
branch and raises a data-dependent error; verishape proves it and compiles.

The second is a small scoring head called at batch 4, 6 and 1 with each compiler's
defaults: stock compiles three times (static, dynamic, and again at 1, which 0/1
specialization keeps out of the dynamic graph); verishape proves that the dynamic artifact
computes at 1 what a batch-1 compile would, and runs it.
"""

from __future__ import annotations

import logging
import time

import torch

from verishape.core import sources


def pack_rows(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    kept = torch.masked_select(x, x > 0)
    n = kept.shape[0]
    torch._check(n % 8 == 0)  # the caller guarantees whole blocks of eight
    width = k[0].item()
    torch._check(width >= 1)
    torch._check(width <= 4)
    if n % 4 == 0 and n * width >= n:  # stock: "could not guard on data-dependent expression"
        return kept.view(-1, 4).sum(1) * width
    return kept


INPUTS = [
    (torch.tensor([1.0, -2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, -1.0, 9.0]), torch.tensor([2])),
    (torch.arange(-3.0, 17.0), torch.tensor([1])),
    (torch.tensor([-1.0, -2.0]), torch.tensor([4])),
]


def run_demo(*, verbose: bool = False, backend: str = "aot_eager") -> int:
    import verishape

    logging.getLogger("torch").setLevel(logging.ERROR)
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    print(f"verishape {verishape.__version__} demo, torch {torch.__version__}, backend {backend!r}\n")
    print("program: pack_rows(x, k) = masked_select -> view(-1, 4), under torch._check(n % 8 == 0)\n")

    torch._dynamo.reset()
    stock = torch.compile(pack_rows, backend=backend, fullgraph=True, dynamic=True)
    try:
        stock(*INPUTS[0])
        print("stock torch.compile: compiled")
    except Exception as exc:  # noqa: BLE001 - showing what stock does is the point
        print(f"stock torch.compile: {type(exc).__name__}: {str(exc).splitlines()[0]}")

    envs: list[object] = []
    from torch._dynamo.backends.registry import lookup_backend

    inner = lookup_backend(backend)

    def keep_env(gm: torch.fx.GraphModule, example_inputs: object) -> object:
        envs.append(torch._guards.TracingContext.try_get().fake_mode.shape_env)
        return inner(gm, example_inputs)

    torch._dynamo.reset()
    compiled = verishape.compile(pack_rows, backend=keep_env, fullgraph=True, dynamic=True)
    start = time.perf_counter()
    ok = True
    for i, args in enumerate(INPUTS):
        got, want = compiled(*args), pack_rows(*args)
        same = torch.equal(got, want)
        ok &= same
        print(f"verishape.compile, input {i}: {got.tolist()}  (eager {'agrees' if same else 'DIFFERS'})")
        if i == 0:
            print(f"  first call (compile) took {time.perf_counter() - start:.2f} s")
    # The user's fact is still checked at run time: 3 positive entries break it.
    try:
        compiled(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1]))
        print("an input that breaks torch._check(n % 8 == 0) ran without error: THIS IS WRONG")
        ok = False
    except RuntimeError as exc:
        print(f"an input that breaks the user's fact is still rejected: {str(exc).splitlines()[0]}")
    env = envs[0]
    log = env.verishape_log
    print(f"\nwhat the solver decided ({log.summary()}):")
    for rec in log.records:
        print(f"  {rec}" if verbose else f"  [{rec.obligation.kind}] {rec.obligation.goal}: "
              f"{rec.result.status} in {rec.result.time_s * 1e3:.1f} ms")
    guards = [sources.describe(g.expr, env) for g in env.guards]
    print(f"\nshape guards installed ({len(guards)}): " + ("; ".join(guards) if guards else "none"))
    asserts = [str(ra.expr) for ras in env.deferred_runtime_asserts.values() for ra in ras]
    print(f"runtime asserts emitted ({len(asserts)}): " + "; ".join(asserts))
    ok &= batch_one_reuse()
    return 0 if ok else 1


_GEN = torch.Generator().manual_seed(0)
W_IN, W_OUT = torch.randn(16, 32, generator=_GEN), torch.randn(32, 8, generator=_GEN)


def scores(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.relu(x @ W_IN) @ W_OUT, dim=-1).mean(0)


def batch_one_reuse() -> bool:
    """The default path: Inductor, automatic dynamic shapes, batches 4, 6 and 1, each side
    in its own process with its own empty Inductor cache directory, so that both start cold
    (in one process the second side would find the first's kernels built and compile in a
    fraction of the time)."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    print("\ndefault path: Inductor, dynamic=None; scores(x) = softmax(relu(x @ W1) @ W2).mean(0) at batch 4, 6, 1")
    ok = True
    for name in ("verishape.compile", "stock torch.compile"):
        with tempfile.TemporaryDirectory(prefix="verishape-demo-") as cache:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
            proc = subprocess.run([sys.executable, "-c", f"from verishape.cli.demo import side; side({name!r})"],
                                  capture_output=True, text=True, env=env)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            print(f"  {name}: the side's process failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
            ok = False
            continue
        result = json.loads(lines[-1])
        ok &= result["equal"]
        print(f"  {name}: {result['compiles']} compiles; " + "; ".join(result["calls"]))
    print("  (outputs equal eager: " + ("yes" if ok else "NO") + "; each side in a fresh process with an empty "
          "Inductor cache directory)")
    return ok


def side(name: str) -> None:
    """One side of :func:`batch_one_reuse`, in its own process: prints one JSON line."""
    import json

    import verishape
    from torch._dynamo.utils import counters

    compile_fn = verishape.compile if name.startswith("verishape") else torch.compile
    torch.compile(lambda t: (t * 2).sum())(torch.randn(3))  # Inductor's own start-up, billed to neither side
    torch._dynamo.reset()
    counters.clear()
    compiled = compile_fn(scores)
    calls, equal = [], True
    for batch in (4, 6, 1):
        x = torch.randn(batch, 16, generator=torch.Generator().manual_seed(batch))
        graphs = counters["stats"]["unique_graphs"] - counters["verishape"]["reused"]
        start = time.perf_counter()
        got = compiled(x)
        elapsed = time.perf_counter() - start
        equal &= bool(torch.allclose(got, scores(x), rtol=1e-5, atol=1e-6))
        compiled_now = counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] > graphs
        reused = counters["verishape"]["reused"] > 0 and batch == 1 and not compiled_now
        calls.append(f"batch {batch}: " + ("compiled" if compiled_now else
                                            "ran the batch-N artifact (proved)" if reused else "cache hit")
                     + f" {elapsed:.2f} s")
    total = counters["stats"]["unique_graphs"] - counters["verishape"]["reused"]
    print(json.dumps({"compiles": total, "calls": calls, "equal": equal}))
