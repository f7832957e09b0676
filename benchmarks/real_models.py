"""Real models: stock ``torch.compile`` against ``verishape.compile`` on tiny Hugging Face models.

Each model (GPT-2, BERT, LLaMA, T5, BART, DistilBERT, ViT) is built offline from a tiny
config with random weights (``transformers``, the ``bench`` extra; sdpa attention, eval mode,
``torch.no_grad``).  Each (model, variant) runs in a fresh interpreter (this script with
``--child``), so no Dynamo cache, automatic-dynamic state or solver cache crosses from one
variant to the other.  Variants: ``stock`` (``torch.compile``), ``verishape``
(``verishape.compile``) and, with ``--widen``, ``widen`` (``verishape.compile(...,
widen_specializations=True)``; reported as n/a when this verishape has no such keyword).
Same backend on every side (``aot_eager`` by default, ``--backend inductor``).

Inside a child, two sweeps run, each from a clean Dynamo state:

* batch: batch sizes 2, 3, 1, 4, 1, 5 at sequence length 8;
* seq: sequence lengths 8, 12, 1, 16, 5 at batch 2 (not for ViT, whose image size is fixed).

Figures per sweep: calls that compiled (and graphs the backend received), the cache
entries left on the model's ``forward``, compile CPU time (``time.process_time`` around
the calls that compiled; a warm-up compile of an unrelated function runs first, so that
lazy imports are not billed to the first model), shape-guard lines of the frames'
final guard production, warm guard-check time (the cache entry that serves the sweep's first
input, best of rounds of many checks), the max abs difference against eager over the
sweep; for verishape, the decision path: questions, decided, undecided, time in
``_decide``, in premise building, in the prover and in Z3, how many questions had no
recorded fact beyond value ranges ("range-only"), how many candidates ``verishape.solvers.refute``
broke without the solver, and the slowest questions.

The proof store is off in the children by default (``--store``), so every run measures cold
compiles.  Warm guard-check times come from different processes (stock and verishape
cannot alternate as in ``guards.py``): read ratios near 1 as noise.

``--rounds N`` runs N processes per (model, variant), taking turns, and reports the median
compile CPU: between processes it moves by about 10% on a busy machine.

``--interleave N`` measures the compile-CPU ratio without that noise: one process per model
runs each sweep N times per variant (stock and verishape, each from a clean Dynamo state and
a cleared solver cache, the order alternating every round) and reports the median of each
variant's compile CPU and their ratio.  Both variants then share one interpreter, one heap and
one set of lazy imports, so what differs between them is verishape's own work (after a round
of each sweep that is not counted: ``UNMEASURED_ROUNDS``).

    python benchmarks/real_models.py                       # all models, aot_eager
    python benchmarks/real_models.py --models gpt2,t5 --widen --backend inductor
    python benchmarks/real_models.py --models llama,t5 --interleave 5

``--device cuda`` builds the models and inputs on the GPU (with ``--backend inductor``:
Triton kernels); compile time there is best read as wall time (Triton compiles in worker
processes, outside ``process_time``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path[:0] = [str(ROOT / "benchmarks")]  # its helpers, also when loaded by file path (the tests)

from real_models_report import combined, markdown, write_interleave_report, write_report  # noqa: E402
from tiny_models import HF_MODELS, MODELS, ModelCase, on_device  # noqa: E402

#: The sweeps: (batch, sequence length) per call, in call order.
SWEEPS: dict[str, list[tuple[int, int]]] = {
    "batch": [(b, 8) for b in (2, 3, 1, 4, 1, 5)],
    "seq": [(2, s) for s in (8, 12, 1, 16, 5)],
}
VARIANTS = ("stock", "verishape", "widen")
# ------------------------------------------------------------------ instrumentation (children only)


class _Spies:
    """Counts what a compile did, by wrapping (in this process only) the ShapeEnv
    constructor, its final guard production and verishape's decision path."""

    def __init__(self) -> None:
        self.envs: list[Any] = []
        self.guard_lines: dict[int, int] = {}  # id(env) -> lines of its last guard production
        self.decide_s = 0.0
        self.premises_s = 0.0
        self.questions = 0
        self.range_only = 0
        self.range_only_decided = 0
        self.slowest: list[tuple[float, str]] = []  # (seconds in _decide, question)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The wrappers, in place for one block and restored after it (a test process
        that measures a sweep keeps torch and verishape as they were)."""
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        from verishape.core import premises as premises_mod
        from verishape.core.shape_env import VeriShapeEnv

        spies = self
        init, produce = ShapeEnv.__init__, ShapeEnv.produce_guards_verbose
        decide, premises, relevant = VeriShapeEnv._decide, VeriShapeEnv._premises, premises_mod.relevant
        last_relevant: list[int] = [0]

        def counting_init(env: Any, *a: Any, **k: Any) -> None:
            init(env, *a, **k)
            spies.envs.append(env)

        def counting_produce(env: Any, *a: Any, **k: Any) -> Any:
            out = produce(env, *a, **k)
            # Dynamo's guard production is the last one for its env (the backend's own
            # cache keys, with Inductor, come before it); out[0] is the python rendering.
            spies.guard_lines[id(env)] = len(out[0].exprs)
            return out

        def timed_decide(env: Any, expr: Any, *a: Any, **k: Any) -> Any:
            before = len(env.verishape_log.records)
            last_relevant[0] = -1
            start = time.perf_counter()
            try:
                return decide(env, expr, *a, **k)
            finally:
                elapsed = time.perf_counter() - start
                spies.decide_s += elapsed
                spies.questions += 1
                spies.slowest = sorted([*spies.slowest, (elapsed, str(expr))], reverse=True)[:3]
                if last_relevant[0] == 0:
                    spies.range_only += 1
                    spies.range_only_decided += len(env.verishape_log.records) > before

        def timed_premises(env: Any, *a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return premises(env, *a, **k)
            finally:
                spies.premises_s += time.perf_counter() - start

        def counted_relevant(*a: Any, **k: Any) -> Any:
            out = relevant(*a, **k)
            last_relevant[0] = len(out)
            return out

        ShapeEnv.__init__ = counting_init  # type: ignore[method-assign]
        ShapeEnv.produce_guards_verbose = counting_produce  # type: ignore[method-assign]
        VeriShapeEnv._decide = timed_decide  # type: ignore[method-assign]
        VeriShapeEnv._premises = timed_premises  # type: ignore[method-assign]
        premises_mod.relevant = counted_relevant
        try:
            yield
        finally:
            ShapeEnv.__init__ = init  # type: ignore[method-assign]
            ShapeEnv.produce_guards_verbose = produce  # type: ignore[method-assign]
            VeriShapeEnv._decide = decide  # type: ignore[method-assign]
            VeriShapeEnv._premises = premises  # type: ignore[method-assign]
            premises_mod.relevant = relevant

    def reset(self) -> None:
        self.envs.clear()
        self.guard_lines.clear()
        self.decide_s = self.premises_s = 0.0
        self.questions = self.range_only = self.range_only_decided = 0
        self.slowest = []


_SPIES = _Spies()


def _frame_locals(module: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The locals Dynamo sees when it enters ``type(module).forward`` with ``kwargs``:
    its own arguments (a decorator's ``*args, **kwargs`` included: Hugging Face wraps
    ``forward``) and the cells it closes over."""
    fn = type(module).forward
    bound = inspect.signature(fn, follow_wrapped=False).bind(module, **kwargs)
    bound.apply_defaults()
    out = dict(bound.arguments)
    out.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
    return out


def _best_us(fn: Callable[[Any], Any], arg: Any, n: int, rounds: int = 7) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn(arg)
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def _shape_guard_fn(manager: Any) -> Callable[[Any], Any] | None:
    """The installed shape-guard code: Dynamo puts it in the root's epilogue lambda guards."""
    epilogue = getattr(manager.root, "get_epilogue_lambda_guards", None)
    if epilogue is None:
        return None
    guards = list(epilogue())
    if not guards:
        return lambda L: True
    return guards[0] if len(guards) == 1 else (lambda L: all(g(L) for g in guards))


def _first_tensor(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    if isinstance(out, (tuple, list)):
        return out[0]
    raise TypeError(f"real_models: cannot find a tensor in an output of type {type(out).__name__}")


def compiler_for(variant: str) -> Callable[..., Any] | None:
    """The compile function of ``variant``; None when this verishape cannot run it
    (``widen`` without a ``widen_specializations`` keyword)."""
    import torch

    import verishape

    if variant == "stock":
        return torch.compile
    if variant == "verishape":
        return verishape.compile
    if variant == "widen":
        if "widen_specializations" not in inspect.signature(verishape.compile).parameters:
            return None
        return lambda model, **kw: verishape.compile(model, widen_specializations=True, **kw)
    raise ValueError(f"real_models: variant must be one of {VARIANTS}, got {variant!r}")


def _warm_up(compile_fn: Callable[..., Any], backend: str) -> None:
    """Compile an unrelated function once (dynamic, with a size question), so that lazy
    imports and one-time setup are paid before the first measured compile."""
    import torch

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x.view(x.shape[0], -1) * 2).sum(1) + (x.shape[0] > 1)

    cf = compile_fn(f, backend=backend, dynamic=True)
    with torch.no_grad():
        cf(torch.ones(3, 4))
    torch._dynamo.reset()


def run_sweep(case: ModelCase, compile_fn: Callable[..., Any], backend: str,
              shapes: list[tuple[int, int]], checks: int = 2000) -> dict[str, Any]:
    """Compile ``case.module`` with ``compile_fn`` from a clean Dynamo state and call it on
    ``shapes`` in order; the figures of one sweep."""
    import torch
    from torch._dynamo.utils import counters

    from verishape.core.premises import current_prover

    torch._dynamo.reset()
    counters.clear()
    _SPIES.reset()
    prover = current_prover()
    prover.clear_cache()
    stats0 = dataclasses.replace(prover.stats)
    try:
        with _SPIES.active():
            return _measure(case, compile_fn(case.module, backend=backend), shapes, checks, prover, stats0)
    finally:
        _SPIES.reset()  # the envs it kept alive


def _measure(case: ModelCase, compiled: Any, shapes: list[tuple[int, int]], checks: int, prover: Any,
             stats0: Any) -> dict[str, Any]:
    import torch
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.utils import counters

    compiled_calls: list[int] = []
    reused_calls: list[int] = []
    call_cpu_s: list[float] = []
    compile_cpu_s = compile_wall_s = 0.0
    backend_compiles = 0
    max_diff = 0.0
    for i, (batch, seq) in enumerate(shapes):
        kwargs = case.inputs(batch, seq)
        graphs, reused = counters["stats"]["unique_graphs"], counters["verishape"]["reused"]
        with torch.no_grad():
            start, wall = time.process_time(), time.perf_counter()
            got = _first_tensor(compiled(**kwargs))
            elapsed, elapsed_wall = time.process_time() - start, time.perf_counter() - wall
            want = _first_tensor(case.module(**kwargs))
        call_cpu_s.append(elapsed)
        traced = counters["stats"]["unique_graphs"] - graphs
        ran_generic = counters["verishape"]["reused"] - reused
        if traced:  # Dynamo traced: the backend compiled, or a size-1 trace reused a generic artifact
            compiled_calls.append(i)
            compile_cpu_s += elapsed
            compile_wall_s += elapsed_wall
            backend_compiles += traced - ran_generic
            if ran_generic:
                reused_calls.append(i)
        if got.shape != want.shape:
            max_diff = float("inf")
        elif got.numel():
            max_diff = max(max_diff, float((got.float() - want.float()).abs().max()))
    entries = _debug_get_cache_entry_list(type(case.module).forward.__code__)
    first = _frame_locals(case.module, case.inputs(*shapes[0]))
    with torch.no_grad():
        entry = next((e for e in entries if e.guard_manager.check(first)), None)
        check_us = _best_us(entry.guard_manager.check, first, checks) if entry is not None else None
        shape_fn = _shape_guard_fn(entry.guard_manager) if entry is not None else None
        shape_us = _best_us(shape_fn, first, checks) if shape_fn is not None else None
    logs = [e.verishape_log for e in _SPIES.envs if hasattr(e, "verishape_log")]
    stats = prover.stats
    figures: dict[str, Any] = {
        "shapes": [list(s) for s in shapes],
        # calls Dynamo traced (a backend compile, or a size-1 call proved to run a generic artifact)
        "compiled_calls": compiled_calls,
        "reused_calls": reused_calls,
        # graphs the user's backend compiled (a reused size-1 trace is not one)
        "compiles": backend_compiles,
        # graphs Inductor lowered in this process, and graphs torch's caches served (--caches on)
        "lowered": counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_bypass"],
        "served_from_torch_caches": counters["inductor"]["fxgraph_cache_hit"]
        + counters["aot_autograd"]["autograd_cache_hit"],
        "graphs": counters["stats"]["unique_graphs"],
        "cache_entries": len(entries),
        "compile_cpu_s": compile_cpu_s,
        "compile_wall_s": compile_wall_s,
        "call_cpu_s": call_cpu_s,
        "shape_guard_lines": sum(_SPIES.guard_lines.values()),
        "guard_check_us": check_us,
        "shape_guard_fn_us": shape_us,
        "max_abs_diff": max_diff,
    }
    if logs:
        minimize_s = sum(m.time_s for log in logs for m in log.minimizations)
        figures["verishape"] = {
            "questions": _SPIES.questions,
            # (a widening proof is a record of the size-1 frame's log, not a question's answer)
            "decided": sum(r.obligation.kind != "specialization_widened" for log in logs for r in log.records),
            "undecided": sum(log.undecided for log in logs),
            # questions the prover's first tier (verishape.solvers.refute) broke without Z3
            "refuted_concretely": stats.refuted_concretely - getattr(stats0, "refuted_concretely", 0),
            "errors": sum(len(log.errors) for log in logs),
            "range_only_questions": _SPIES.range_only,
            "range_only_decided": _SPIES.range_only_decided,
            "decide_s": _SPIES.decide_s,
            "premises_s": _SPIES.premises_s,
            "prove_s": sum(log.solver_time_s for log in logs),
            "z3_s": stats.solver_time_s - stats0.solver_time_s,
            "z3_calls": stats.solver_calls - stats0.solver_calls,
            "prover_queries": stats.queries - stats0.queries,
            "cache_hits": stats.cache_hits - stats0.cache_hits,
            "minimize_s": minimize_s,
            # the lazy proofs that let size-1 calls run a generic artifact (inside compile_cpu_s)
            "reuse_proof_s": sum(getattr(ev, "time_s", 0.0) for log in logs for ev in log.widened),
            "decisions_by_kind": _merge_counts(log.counts() for log in logs),
            "slowest_questions": [[round(t, 4), q] for t, q in _SPIES.slowest],
        }
    return figures


def _merge_counts(counts: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def cold_caches() -> None:
    """Torch's compile caches off (Inductor's FX graph cache, the AOTAutograd cache), for
    every variant: each sweep compiles cold, as a program's first run does, whatever an
    earlier round or run left on disk.  ``--caches on`` (REAL_MODELS_TORCH_CACHES=on in the
    child) leaves torch's defaults: the parent gives each variant a cache folder of its own,
    run cold then warm."""
    import torch

    if os.environ.get("REAL_MODELS_TORCH_CACHES") == "on":
        return
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def child(model: str, variant: str, backend: str, sweeps: list[str], device: str = "cpu") -> dict[str, Any]:
    """Everything one (model, variant) process measures."""
    import torch

    cold_caches()
    compile_fn = compiler_for(variant)
    if compile_fn is None:
        return {"model": model, "variant": variant, "available": False}
    torch.manual_seed(0)
    case = on_device(MODELS[model](), device)
    _warm_up(compile_fn, backend)
    out: dict[str, Any] = {"model": model, "variant": variant, "available": True, "device": device, "sweeps": {}}
    for sweep in sweeps:
        if sweep == "seq" and not case.seq_sweep:
            continue
        out["sweeps"][sweep] = run_sweep(case, compile_fn, backend, SWEEPS[sweep])
    return out


#: uncounted sweeps of each variant before the measured rounds: the model's one-time work in the process (tiny
#: LLaMA's first call: 3.35 s CPU in round 0, 1.7 to 2.5 s after) is billed to neither variant
UNMEASURED_ROUNDS = 1


def unmeasured_sweeps(case: ModelCase, fns: dict[str, Callable[..., Any]], backend: str,
                      shapes: list[tuple[int, int]]) -> None:
    """:data:`UNMEASURED_ROUNDS` sweeps of ``shapes`` with each of ``fns``, before rounds that alternate them."""
    for _ in range(UNMEASURED_ROUNDS):
        for fn in fns.values():
            run_sweep(case, fn, backend, shapes, checks=10)


def interleaved(model: str, backend: str, sweeps: list[str], rounds: int, other: str = "verishape",
                device: str = "cpu") -> dict[str, Any]:
    """Stock and ``other`` (verishape or widen) taking turns in this process: ``rounds``
    sweeps each after :func:`unmeasured_sweeps`, the variant going first alternating; per variant the median compile CPU
    and wall time, the backend compiles, the size-1 calls that reused a generic artifact,
    the max difference against eager, and the median CPU of the sweep's first size-1
    call (stock's recompile there, or the lazy proof that replaced it)."""
    import torch

    cold_caches()
    fns = {"stock": compiler_for("stock"), other: compiler_for(other)}
    torch.manual_seed(0)
    case = on_device(MODELS[model](), device)
    for fn in fns.values():
        _warm_up(fn, backend)
    out: dict[str, Any] = {"model": model, "rounds": rounds, "unmeasured_rounds": UNMEASURED_ROUNDS,
                           "other": other, "device": device, "sweeps": {}}
    for sweep in sweeps:
        if sweep == "seq" and not case.seq_sweep:
            continue
        shapes = SWEEPS[sweep]
        first_1 = next(i for i, (b, s) in enumerate(shapes) if (b if sweep == "batch" else s) == 1)
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in fns}
        unmeasured_sweeps(case, fns, backend, shapes)
        for r in range(rounds):
            order = list(fns) if r % 2 == 0 else list(reversed(fns))
            for variant in order:
                runs[variant].append(run_sweep(case, fns[variant], backend, shapes, checks=10))
        cpu = {v: [f["compile_cpu_s"] for f in fs] for v, fs in runs.items()}
        med = {v: statistics.median(xs) for v, xs in cpu.items()}
        out["sweeps"][sweep] = {
            "compile_cpu_s": cpu, "median_s": med,
            "median_wall_s": {v: statistics.median(f["compile_wall_s"] for f in fs) for v, fs in runs.items()},
            "compiles": {v: sorted({f["compiles"] for f in fs}) for v, fs in runs.items()},
            "reused_calls": {v: sorted({tuple(f["reused_calls"]) for f in fs}) for v, fs in runs.items()},
            "max_abs_diff": {v: max(f["max_abs_diff"] for f in fs) for v, fs in runs.items()},
            "size_1_call": first_1,
            "size_1_call_cpu_s": {v: statistics.median(f["call_cpu_s"][first_1] for f in fs) for v, fs in runs.items()},
            "reuse_proof_s": {v: statistics.median(f.get("verishape", {}).get("reuse_proof_s", 0.0) for f in fs)
                              for v, fs in runs.items()},
            "ratio": med[other] / med["stock"] if med["stock"] else None}
    return out


# ------------------------------------------------------------------ parent: processes, table


def run_child(model: str, variant: str, backend: str, sweeps: list[str], store: str,
              interleave: int = 0, device: str = "cpu", cache_dir: str | None = None) -> dict[str, Any]:
    """One child process; ``cache_dir``: torch's caches on, in that folder."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.json"
        env = dict(os.environ)
        if cache_dir is not None:
            env.update(REAL_MODELS_TORCH_CACHES="on", TORCHINDUCTOR_CACHE_DIR=cache_dir)
        if store != "default":
            env["VERISHAPE_PROOF_STORE"] = store
        cmd = [sys.executable, __file__, "--child", str(path), "--models", model, "--variant", variant,
               "--backend", backend, "--sweeps", ",".join(sweeps), "--device", device]
        if interleave:
            cmd += ["--interleave", str(interleave)]
        proc = subprocess.run(cmd, check=False, env=env, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0 or not path.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            return {"model": model, "variant": variant, "available": True, "error": " | ".join(tail)}
        return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(HF_MODELS),
                    help=f"comma-separated subset of {', '.join(MODELS)} (default: the seven Hugging Face models)")
    ap.add_argument("--backend", default="aot_eager", help="aot_eager (default), inductor, eager ...")
    ap.add_argument("--sweeps", default="batch,seq", help="comma-separated subset of batch,seq")
    ap.add_argument("--widen", action="store_true", help="also run verishape.compile(widen_specializations=True)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="processes per (model, variant), taking turns; compile CPU is their median (default 1)")
    ap.add_argument("--interleave", type=int, default=0, metavar="N",
                    help="instead: stock and verishape (with --widen: widen) taking turns N times each in one "
                         "process per model; median compile CPU ratio (writes real_models_interleave.json)")
    ap.add_argument("--store", default="off",
                    help="VERISHAPE_PROOF_STORE for the children: off (default, cold compiles), a path, or 'default'")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda: models and inputs on that device")
    ap.add_argument("--caches", choices=("off", "on"), default="off",
                    help="off (default): torch's compile caches off, every sweep cold; on: torch's defaults, each "
                         "variant run twice on a cache folder of its own, cold then warm (a restart)")
    ap.add_argument("--json", type=Path, default=RESULTS / "real_models.json")
    ap.add_argument("--markdown", type=Path, default=RESULTS / "real_models.md")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        ap.error(f"--models: unknown model(s) {', '.join(unknown)}; choose among {', '.join(MODELS)}")
    if args.rounds < 1:
        ap.error(f"--rounds: got {args.rounds}; use 1 or more")
    sweeps = [s for s in args.sweeps.split(",") if s]
    if any(s not in SWEEPS for s in sweeps):
        ap.error(f"--sweeps: got {args.sweeps!r}; use a comma-separated subset of {', '.join(SWEEPS)}")
    if args.interleave < 0:
        ap.error(f"--interleave: got {args.interleave}; use 1 or more rounds (0: off)")
    if args.child:
        sys.path[:0] = [str(ROOT)]
        result = (interleaved(models[0], args.backend, sweeps, args.interleave, args.variant or "verishape",
                              args.device)
                  if args.interleave else child(models[0], args.variant, args.backend, sweeps, args.device))
        args.child.write_text(json.dumps(result))
        return 0
    if args.caches == "on" and (args.interleave or args.rounds != 1):
        ap.error("--caches on runs each variant cold then warm once: leave out --interleave and --rounds")
    if args.interleave:
        return _main_interleaved(args, models, sweeps)
    variants = ["stock", "verishape"] + (["widen"] if args.widen else [])
    rows = []
    start = time.perf_counter()
    for model, started in [(m, s) for m in models for s in (("cold", "warm") if args.caches == "on" else (None,))]:
        if started == "cold":
            folders = {v: tempfile.mkdtemp(prefix=f"real-models-{model}-{v}-") for v in variants}
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for r in range(args.rounds):
            # the variants take turns going first: drift in machine speed hits them alike
            for variant in variants[r % len(variants):] + variants[:r % len(variants)]:
                runs[variant].append(run_child(model, variant, args.backend, sweeps, args.store, device=args.device,
                                               cache_dir=folders[variant] if started else None))
        row = {"model": model, "variants": {v: combined(rs) for v, rs in runs.items()}}
        if started:
            row["start"] = started
            if started == "warm":
                for folder in folders.values():
                    shutil.rmtree(folder, ignore_errors=True)
        rows.append(row)
        for name, run in row["variants"].items():
            if "error" in run:
                print(f"{model:11} {name:9} error: {run['error']}", flush=True)
            for sweep, s in run.get("sweeps", {}).items():
                vs = s.get("verishape", {})
                print(f"{model:11} {started or '':4} {name:9} {sweep:5} compiles {s['compiles']} (calls "
                      f"{s['compiled_calls']}, lowered {s['lowered']}, from torch's caches {s['served_from_torch_caches']}) "
                      f"cpu {s['compile_cpu_s']:.2f}s guards {s['shape_guard_lines']} "
                      f"decided {vs.get('decided', '-')} undecided {vs.get('undecided', '-')} "
                      f"diff {s['max_abs_diff']:.1e}", flush=True)
        write_report(args, rows, {s: SWEEPS[s] for s in sweeps}, start)  # a stopped long run keeps what it measured
    report = write_report(args, rows, {s: SWEEPS[s] for s in sweeps}, start)
    print(markdown(rows))
    print(json.dumps(report["summary"]), f"wall {report['wall_s']:.0f} s")
    return 0


def _main_interleaved(args: argparse.Namespace, models: list[str], sweeps: list[str]) -> int:
    rows = []
    start = time.perf_counter()
    other = "widen" if args.widen else "verishape"
    path = args.json.with_name("real_models_interleave.json") if args.json == RESULTS / "real_models.json" else args.json
    path.parent.mkdir(parents=True, exist_ok=True)
    for model in models:
        row = run_child(model, other, args.backend, sweeps, args.store, interleave=args.interleave,
                        device=args.device)
        rows.append(row)
        if "error" in row:
            print(f"{model:11} error: {row['error']}", flush=True)
        for sweep, f in row.get("sweeps", {}).items():
            print(f"{model:11} {sweep:5} stock {f['median_s']['stock']:.2f}s {other} "
                  f"{f['median_s'][other]:.2f}s ratio {f['ratio']:.3f} (wall stock {f['median_wall_s']['stock']:.2f}s "
                  f"{other} {f['median_wall_s'][other]:.2f}s) compiles {f['compiles']} "
                  f"reused {f['reused_calls'][other]} size-1 call {f['size_1_call_cpu_s']['stock']:.2f}s -> "
                  f"{f['size_1_call_cpu_s'][other]:.2f}s diff {max(f['max_abs_diff'].values()):.1e} "
                  f"(rounds: stock {[round(x, 2) for x in f['compile_cpu_s']['stock']]}, "
                  f"{other} {[round(x, 2) for x in f['compile_cpu_s'][other]]})", flush=True)
        # after each model: a long run that is stopped keeps what it measured
        summary_ = write_interleave_report(path, args, rows, other, start)
    print(json.dumps(summary_))
    return 0


if __name__ == "__main__":
    sys.exit(main())
