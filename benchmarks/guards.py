"""Shape guards: stock torch.compile against verishape.compile, side by side in one run.

For each program of ``benchmarks/programs.py`` (``dynamic=True``, same torch config for
both, backend ``aot_eager`` unless ``--backend``), over a fixed sweep of input shapes:

* shape guards installed: every line of the shape-guard code (guards, duck equalities,
  strides, ranges), summed over the frames compiled;
* warm guard-check time: a loop of many calls to the frame's guard manager ``check`` on the
  first input's locals, and the installed shape-guard function alone (Dynamo's epilogue
  lambda guard, as it runs inside ``check``).  Stock and verishape compile separate copies
  of the program's code object, so both guard managers live side by side and their
  timing loops alternate (best of 15 rounds each, the order flipping every round): machine drift hits both alike;
* compile time (calls that compiled) and verishape's solver share of it;
* recompiles (cache entries of the program's code beyond the first; graph breaks are not
  recompiles), and the max abs difference against eager over the sweep.

    python benchmarks/guards.py --out benchmarks/results/guards   # writes .json, .md, .png
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import torch  # noqa: E402
from torch._dynamo.backends.registry import lookup_backend  # noqa: E402
from torch._dynamo.eval_frame import _debug_get_cache_entry_list  # noqa: E402
from torch.fx.experimental.symbolic_shapes import ShapeEnv  # noqa: E402

import verishape  # noqa: E402
from programs import PROGRAMS, Program  # noqa: E402

_produced: list[list[str]] = []
_orig_produce = ShapeEnv.produce_guards_verbose


def _spy(self: Any, *a: Any, **k: Any) -> Any:
    out = _orig_produce(self, *a, **k)
    # out[0] is the python rendering; keep the list itself, so that verishape's pass over
    # the produced lines (repeats dropped in place) is counted as installed.
    _produced.append(out[0].exprs)
    return out


def _time_pair(fns: dict[str, Any], arg: Any, n: int, rounds: int = 15) -> dict[str, float]:
    """Microseconds per call of each function, best of ``rounds``; the loops alternate
    between the functions, in turn order reversed every round, so that drift in machine
    speed does not favour either."""
    best = dict.fromkeys(fns, float("inf"))
    order = list(fns.items())
    for r in range(rounds):
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            start = time.perf_counter()
            for _ in range(n):
                fn(arg)
            best[name] = min(best[name], (time.perf_counter() - start) / n)
    return {name: t * 1e6 for name, t in best.items()}


def _shape_guard_fn(manager: Any, exprs: list[str], fn_globals: dict[str, Any]) -> Any:
    """The shape-guard function as installed: Dynamo puts all shape guards into one
    epilogue lambda guard of the root guard manager."""
    epilogue = getattr(manager.root, "get_epilogue_lambda_guards", None)
    if epilogue is not None:
        guards = list(epilogue())
        if not guards:
            return lambda L: True
        if len(guards) == 1:
            return guards[0]
        return lambda L: all(g(L) for g in guards)
    if not exprs:  # an older torch without the accessor: evaluate torch's own guard text
        return lambda L: True
    return eval("lambda L: " + " and ".join(f"({e})" for e in exprs), {"G": fn_globals})  # noqa: S307


def _copy_of(fn: Any) -> Any:
    """The same function on its own code object, so Dynamo caches it separately.  The
    name differs too: Dynamo keys what it learned about a frame's dynamism by file, line
    and name, and the copy must not inherit that from the stock compile."""
    name = fn.__code__.co_name + "_verishape_copy"
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    out = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


def measure(program: Program, fn: Any, compile_fn: Any, backend: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compile ``fn`` over the program's sweep.  Returns the figures and the timing
    targets (guard manager check and shape-guard function) for the first input."""
    _produced.clear()
    inner = lookup_backend(backend)
    envs: list[Any] = []

    def counting(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        envs.append(torch._guards.TracingContext.try_get().fake_mode.shape_env)
        return inner(gm, example_inputs)

    cf = compile_fn(fn, backend=counting, dynamic=True)
    compile_s, max_diff = 0.0, 0.0
    for shape in program.shapes:
        args = program.inputs(shape)
        before = len(envs)
        start = time.perf_counter()
        got = cf(*args)
        elapsed = time.perf_counter() - start
        if len(envs) > before:
            compile_s += elapsed
        want = program.fn(*args)
        max_diff = max(max_diff, float((got - want).abs().max()) if got.numel() else 0.0)
    first = program.inputs(program.shapes[0])
    name = next(iter(inspect.signature(program.fn).parameters))
    local = {name: first[0]}
    entries = _debug_get_cache_entry_list(fn.__code__)
    entry = next(e for e in entries if e.guard_manager.check(local))
    first_exprs = list(_produced[0]) if _produced else []
    targets = {"check": entry.guard_manager.check,
               "shape": _shape_guard_fn(entry.guard_manager, first_exprs, program.fn.__globals__),
               "local": local}
    logs = [e.verishape_log for e in envs if hasattr(e, "verishape_log")]
    solver_s = sum(log.solver_time_s for log in logs) + sum(m.time_s for log in logs for m in log.minimizations)
    equivalences = [m.applied for log in logs for m in log.minimizations if m.dropped]
    figures = {
        "shape_guards": sum(len(p) for p in _produced[: len(envs)]) if envs else 0,
        "shape_guards_first_frame": len(first_exprs),
        "compile_s": compile_s,
        "solver_s": solver_s,
        "frames": len(envs),
        "recompiles": max(0, len(entries) - 1),
        "max_abs_diff": max_diff,
        "minimizations_proved_equivalent": sum(equivalences),
        "minimizations_failed": len(equivalences) - sum(equivalences),
        "ranges_tightened": sum(len(m.tightened) for log in logs for m in log.minimizations if m.applied),
    }
    return figures, targets


def run_program(program: Program, backend: str, checks: int) -> dict[str, Any]:
    # Each side compiles from a clean Dynamo state (nothing learned from the other).
    torch._dynamo.reset()
    stock, t_stock = measure(program, program.fn, torch.compile, backend)
    stock_alone = _time_pair({"check": t_stock["check"], "shape": t_stock["shape"]}, t_stock["local"], checks)
    torch._dynamo.reset()
    vs, t_vs = measure(program, _copy_of(program.fn), verishape.compile, backend)
    local = t_stock["local"]
    if t_stock["check"](local) and t_vs["check"](local):
        full = _time_pair({"stock": t_stock["check"], "verishape": t_vs["check"]}, local, checks)
        shape = _time_pair({"stock": t_stock["shape"], "verishape": t_vs["shape"]}, local, checks)
    else:
        # The reset took a global the stock guards read (Dynamo's injected builtins):
        # fall back to the stock figures taken right after its own compile.
        vs_alone = _time_pair({"check": t_vs["check"], "shape": t_vs["shape"]}, local, checks)
        full = {"stock": stock_alone["check"], "verishape": vs_alone["check"]}
        shape = {"stock": stock_alone["shape"], "verishape": vs_alone["shape"]}
    for side, figures in (("stock", stock), ("verishape", vs)):
        figures["guard_check_us"] = full[side]
        figures["shape_guard_fn_us"] = shape[side]
    return {"program": program.name, "shapes": len(program.shapes), "stock": stock, "verishape": vs}


def _markdown(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    out = ["| program | guards stock | guards verishape | check us stock | check us verishape | shape-fn us stock "
           "| shape-fn us verishape | compile s stock | compile s verishape | solver s | recompiles s/v | max diff s/v |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        s, v = r["stock"], r["verishape"]
        out.append(f"| {r['program']} | {s['shape_guards']} | {v['shape_guards']} | {s['guard_check_us']:.2f} | "
                   f"{v['guard_check_us']:.2f} | {s['shape_guard_fn_us']:.2f} | {v['shape_guard_fn_us']:.2f} | "
                   f"{s['compile_s']:.2f} | {v['compile_s']:.2f} | {v['solver_s']:.2f} | "
                   f"{s['recompiles']}/{v['recompiles']} | {s['max_abs_diff']:.1e}/{v['max_abs_diff']:.1e} |")
    out.append("")
    out += [f"- {k}: {v}" for k, v in summary.items()]
    return "\n".join(out) + "\n"


def _chart(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["program"] for r in rows]
    xs = range(len(rows))
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 5))
    a.bar([x - 0.2 for x in xs], [r["stock"]["shape_guards"] for r in rows], 0.4, label="torch.compile")
    a.bar([x + 0.2 for x in xs], [r["verishape"]["shape_guards"] for r in rows], 0.4, label="verishape.compile")
    a.set_title("shape guards installed (all frames)")
    b.bar([x - 0.2 for x in xs], [r["stock"]["shape_guard_fn_us"] for r in rows], 0.4, label="torch.compile")
    b.bar([x + 0.2 for x in xs], [r["verishape"]["shape_guard_fn_us"] for r in rows], 0.4, label="verishape.compile")
    b.set_title("shape-guard code, us per check")
    for ax in (a, b):
        ax.set_xticks(list(xs), names, rotation=60, ha="right")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "guards")
    ap.add_argument("--backend", default="aot_eager")
    ap.add_argument("--checks", type=int, default=5000, help="guard checks per timing loop")
    ap.add_argument("--programs", help="comma-separated subset")
    args = ap.parse_args()
    ShapeEnv.produce_guards_verbose = _spy  # type: ignore[method-assign]
    wanted = set(args.programs.split(",")) if args.programs else None
    rows = []
    for p in PROGRAMS:
        if wanted and p.name not in wanted:
            continue
        row = run_program(p, args.backend, args.checks)
        rows.append(row)
        stock, vs = row["stock"], row["verishape"]
        print(f"{p.name:18} guards {stock['shape_guards']:4} -> {vs['shape_guards']:4}   "
              f"check {stock['guard_check_us']:6.2f} -> {vs['guard_check_us']:6.2f} us   "
              f"shape fn {stock['shape_guard_fn_us']:6.2f} -> {vs['shape_guard_fn_us']:6.2f} us   "
              f"compile {stock['compile_s']:.2f} -> {vs['compile_s']:.2f} s (solver {vs['solver_s']:.2f})   "
              f"recompiles {stock['recompiles']}/{vs['recompiles']}", flush=True)
    tot = {k: sum(r[side][k] for r in rows) for side in ("stock",) for k in ("shape_guards", "compile_s")}
    tot_v = {k: sum(r["verishape"][k] for r in rows) for k in ("shape_guards", "compile_s", "solver_s")}
    heavy = [r for r in rows if r["stock"]["shape_guards_first_frame"] >= 10]
    summary = {
        "programs": len(rows),
        "shape_guards_stock": tot["shape_guards"],
        "shape_guards_verishape": tot_v["shape_guards"],
        "shape_guard_reduction": 1 - tot_v["shape_guards"] / tot["shape_guards"] if tot["shape_guards"] else None,
        "guard_heavy_programs": [r["program"] for r in heavy],
        "guard_check_ratio_heavy_median": statistics.median(
            r["verishape"]["guard_check_us"] / r["stock"]["guard_check_us"] for r in heavy) if heavy else None,
        "shape_guard_fn_ratio_heavy_median": statistics.median(
            r["verishape"]["shape_guard_fn_us"] / r["stock"]["shape_guard_fn_us"] for r in heavy) if heavy else None,
        "compile_time_ratio": tot_v["compile_s"] / tot["compile_s"] if tot["compile_s"] else None,
        "solver_share_of_verishape_compile": tot_v["solver_s"] / tot_v["compile_s"] if tot_v["compile_s"] else None,
        "recompiles_stock": sum(r["stock"]["recompiles"] for r in rows),
        "recompiles_verishape": sum(r["verishape"]["recompiles"] for r in rows),
        "max_abs_diff_verishape": max(r["verishape"]["max_abs_diff"] for r in rows),
        "minimizations_failed": sum(r["verishape"]["minimizations_failed"] for r in rows),
        "ranges_tightened": sum(r["verishape"]["ranges_tightened"] for r in rows),
        "backend": args.backend, "torch": torch.__version__, "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "guards", "summary": summary, "programs": rows}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(_markdown(rows, summary))
    _chart(rows, args.out.with_suffix(".png"))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
