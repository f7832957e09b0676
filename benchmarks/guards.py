"""Shape guards: stock torch.compile against verishape.compile, side by side in one run.

For each program of ``benchmarks/programs.py`` (``dynamic=True``, same torch config for
both, backend ``aot_eager`` unless ``--backend``), over a fixed sweep of input shapes:

* shape guards installed: every line of the shape-guard code (guards, duck equalities,
  strides, ranges), summed over the frames compiled;
* warm guard-check time: a loop of many calls to the frame's guard manager ``check`` on the
  first input's locals, and the shape-guard code alone (evaluated as one function);
* compile time (calls that compiled) and verishape's solver share of it;
* recompiles, and the max abs difference against eager over the sweep.

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
    _produced.append(list(out[0].exprs))  # out[0] is the python rendering
    return out


def _time_loop(fn: Any, arg: Any, n: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn(arg)
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6  # microseconds per check


def _shape_guard_fn(exprs: list[str], fn_globals: dict[str, Any]) -> Any:
    if not exprs:
        return lambda L: True
    # torch's own guard text; L is the frame's locals and G its globals, as in Dynamo.
    return eval("lambda L: " + " and ".join(f"({e})" for e in exprs), {"G": fn_globals})  # noqa: S307


def measure(program: Program, compile_fn: Any, backend: str, checks: int) -> dict[str, Any]:
    torch._dynamo.reset()
    _produced.clear()
    inner = lookup_backend(backend)
    envs: list[Any] = []

    def counting(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        envs.append(torch._guards.TracingContext.try_get().fake_mode.shape_env)
        return inner(gm, example_inputs)

    cf = compile_fn(program.fn, backend=counting, dynamic=True)
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
    entry = next(e for e in _debug_get_cache_entry_list(program.fn.__code__) if e.guard_manager.check(local))
    full_us = _time_loop(entry.guard_manager.check, local, checks)
    first_exprs = _produced[0] if _produced else []
    shape_us = _time_loop(_shape_guard_fn(first_exprs, program.fn.__globals__), local, checks)
    logs = [e.verishape_log for e in envs if hasattr(e, "verishape_log")]
    solver_s = sum(log.solver_time_s for log in logs) + sum(m.time_s for log in logs for m in log.minimizations)
    equivalences = [m.applied for log in logs for m in log.minimizations if m.dropped]
    return {
        "shape_guards": sum(len(p) for p in _produced[: len(envs)]) if envs else 0,
        "shape_guards_first_frame": len(first_exprs),
        "guard_check_us": full_us,
        "shape_guard_fn_us": shape_us,
        "compile_s": compile_s,
        "solver_s": solver_s,
        "frames": len(envs),
        "recompiles": max(0, len(envs) - 1),
        "max_abs_diff": max_diff,
        "minimizations_proved_equivalent": sum(equivalences),
        "minimizations_failed": len(equivalences) - sum(equivalences),
    }


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
        stock = measure(p, torch.compile, args.backend, args.checks)
        vs = measure(p, verishape.compile, args.backend, args.checks)
        rows.append({"program": p.name, "shapes": len(p.shapes), "stock": stock, "verishape": vs})
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
