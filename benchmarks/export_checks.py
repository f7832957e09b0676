"""Export input checks: stock ``torch.export.export`` against ``verishape.export``, in one process,
on input sizes outside the space a program was exported for, and what verishape's checks cost.

1. Out-of-range inputs.  For each program both export (non-strict; ``tests/export_corpus.py``
   and the small programs below), each input dimension whose ``dynamic_shapes`` entry has a
   minimum of 1 or more, or that a verishape premise check bounds, is set to 0 and to 1 where
   that size is below the minimum or breaks the premise (other inputs kept, ``.item()`` data
   made consistent where simple), then run eagerly and through both ``ep.module()``.  Sizes the
   declared space allows but the trace excluded (stock's range starts at 2) are counted apart.
2. Per-call cost of ``ep.module()(*first example input)``, stock and verishape alternating
   (which goes first flips each round), median of ``--rounds`` rounds of ``--calls`` calls on one
   intra-op thread, where verishape added input checks.  ``--aoti``: AOTInductor packages of three
   programs (about 10 s to build each): every out-of-range input of each, and the timing.

    python benchmarks/export_checks.py [--json benchmarks/results/export_checks.json]
                                       [--markdown benchmarks/results/export_checks.md] [--aoti]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
from torch.export import Dim  # noqa: E402

import verishape  # noqa: E402
from export_corpus import PROGRAMS, Program, i, v  # noqa: E402
from verishape.compiler.export import checks as export_checks  # noqa: E402
from verishape.compiler.export.program import export_program_checks  # noqa: E402

CHECK_MESSAGE = "verishape: input check failed"


class CenterRows(torch.nn.Module):
    """Centers a batch; a single row is returned as it is (traced at 4 rows: the branch is gone)."""

    def forward(self, x):
        if x.shape[0] > 1:
            return x - x.mean(0)
        return x


class EmptySafeMean(torch.nn.Module):
    """The mean row, zeros for an empty batch (traced at 4 rows: the mean, NaN at size 0)."""

    def forward(self, x):
        if x.shape[0] == 0:
            return x.new_zeros(x.shape[1:])
        return x.mean(0)


class TrainNorm(torch.nn.BatchNorm1d):
    """Batch norm in training mode: eager refuses one row per channel; the traced check is gone."""

    def __init__(self):
        super().__init__(3)


class CappedRows(torch.nn.Module):
    """k * s <= 12 decides k <= 6 only for s >= 2: a premise verishape checks (stock: a DDE)."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k * x.shape[0] <= 12)
        if k <= 6:
            return torch.ones(6)[:k] + x.sum()
        return x


#: the programs also built as AOTInductor packages (--aoti): declared minimums of 1 and 2
AOTI_PROGRAMS = ("center_rows", "empty_safe_mean", "train_norm")

OWN: tuple[Program, ...] = (
    Program("center_rows", CenterRows, ((v(4, 3),),), {"x": {0: Dim("b", min=2, max=64)}},
            "size 1 takes the traced (> 1) branch", "own"),
    Program("center_rows_auto", CenterRows, ((v(4, 3),),), {"x": {0: Dim.AUTO}},
            "as center_rows, Dim.AUTO (no declared bound)", "own"),
    Program("empty_safe_mean", EmptySafeMean, ((v(4, 3),),), {"x": {0: Dim.DYNAMIC(min=1)}},
            "size 0 takes the traced (non-empty) branch", "own"),
    Program("train_norm", TrainNorm, ((v(4, 3),),), ({0: Dim("b", min=2)},),
            "BatchNorm's batch-size check ran at trace time", "own"),
    Program("capped_rows", CappedRows, ((v(4), i(2)),), {"x": {0: Dim.AUTO}, "n": None},
            "k*s <= 12, s >= 2 -> k <= 6 (premise)", "own"),
)

#: program -> (args, resized input positions, size) -> args whose data fits the new size
FIXUPS = {"repeat_counts": lambda a, pos, n: (a[0], torch.tensor([n])) if pos == [0] else a}


def export(exporter: Any, program: Program) -> tuple[Any, str | None]:
    torch._dynamo.reset()
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # a failing export prints its graph there
            return exporter(program.module(), program.inputs[0], dynamic_shapes=program.dynamic_shapes,
                            strict=False), None
    except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
        return None, words(exc)


def words(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def run(fn: Any, args: tuple[Any, ...]) -> tuple[Any, str | None]:
    try:
        with torch.no_grad():
            return fn(*args), None
    except Exception as exc:  # noqa: BLE001 - raising is an outcome
        return None, words(exc)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def shape(out: Any) -> str:
    if isinstance(out, torch.Tensor):
        return f"{tuple(out.shape)}" + (" NaN" if out.is_floating_point() and out.isnan().any() else "")
    return "(" + ", ".join(shape(o) for o in out) + ")" if isinstance(out, (tuple, list)) else repr(out)


def declared_dims(program: Program) -> list[tuple[list[tuple[int, int]], int | None, str]]:
    """Each declared input dimension (dims sharing one named Dim grouped): positions, min, label."""
    names = list(inspect.signature(program.module.forward).parameters)[1:]
    spec = program.dynamic_shapes
    per_arg = [spec.get(n) for n in names] if isinstance(spec, dict) else list(spec)
    groups: dict[Any, tuple[list[tuple[int, int]], int | None, str]] = {}
    for a, entry in enumerate(per_arg):
        items = entry.items() if isinstance(entry, dict) else enumerate(entry or ())
        for d, dim in items:
            if isinstance(dim, Dim):
                groups.setdefault(dim.__name__, ([], dim.min, f"Dim {dim.__name__!r} min={dim.min}"))[0].append((a, d))
            elif dim is not None:
                label = f"Dim.{dim.type.name}" + (f" min={dim.min}" if dim.min is not None else "")
                groups[(a, d)] = ([(a, d)], dim.min, label)
    return list(groups.values())


def size_symbol(ep: Any, a: int, d: int) -> Any:
    node = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == ep.graph_signature.user_inputs[a])
    size = node.meta["val"].shape[d]
    return size.node.expr if isinstance(size, torch.SymInt) else None


def probes(program: Program, stock: Any, ours: Any) -> list[dict[str, Any]]:
    """Sizes 0 and 1 of each declared dimension: below its min, breaking a premise check, or
    inside the declared space but below the traced range (counted apart)."""
    premises = [c for c in export_program_checks(ours) if c.origin == "premise"]
    dims = export_checks.input_dims(ours)
    example = {s: program.inputs[0][a].shape[d] for s, (node, d) in dims.items()
               for a in [list(ours.graph_signature.user_inputs).index(node.name)]}
    out = []
    for positions, low, label in declared_dims(program):
        ours_syms = {size_symbol(ours, a, d) for a, d in positions}
        traced = stock.range_constraints.get(size_symbol(stock, *positions[0])) if stock is not None else None
        for n in (0, 1):
            at_n = {s: n if s in ours_syms else example[s] for s in dims}
            broken = [c for c in premises if c.fact.free_symbols & ours_syms and not bool(c.fact.xreplace(at_n))]
            if low is not None and n < low:
                kind, why = "out_of_range", f"below declared {label}"
            elif broken:
                kind, why = "out_of_range", f"breaks premise {export_checks.describe(broken[0].fact, dims)}"
            elif traced is not None and n < int(traced.lower):
                kind, why = "traced_only", f"{label or 'declared'}; traced for >= {traced.lower}"
            else:
                continue
            args = list(program.inputs[0])
            for a, d in positions:
                args[a] = args[a].narrow(d, 0, n).clone()
            args = tuple(FIXUPS.get(program.name, lambda x, p, m: x)(tuple(args), sorted({a for a, _ in positions}), n))
            where = ", ".join(f"{ours.graph_signature.user_inputs[a]}.size({d})" for a, d in positions)
            out.append({"input": where, "size": n, "kind": kind, "why": why, "args": args})
    return out


def try_input(program: Program, probe: dict[str, Any], sides: dict[str, Any]) -> dict[str, Any]:
    args = probe["args"]
    eager, eager_err = run(program.module(), args)
    row = {k: probe[k] for k in ("input", "size", "kind", "why")}
    row["eager"] = {"raises": eager_err} if eager_err else {"returns": shape(eager)}
    for side, module in sides.items():
        out, err = run(module, args) if module is not None else (None, None)
        if module is None:
            row[side] = {"exported": False}
        elif err:
            row[side] = {"accepted": False, "raises": err, "by_verishape_check": CHECK_MESSAGE in err}
        else:
            equal = eager_err is None and same(out, eager)
            row[side] = {"accepted": True, "returns": shape(out), "equal_eager": equal, "different": not equal}
    return row


def check_nodes(ep: Any) -> list[str]:
    return [str(n.args[1]) for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]


def cost_row(stock_fn: Any, ours_fn: Any, args: tuple[Any, ...], rounds: int, calls: int) -> dict[str, Any]:
    """Median per-call time of each side, the sides alternating (which goes first flips each round)."""
    fns = {"stock": stock_fn, "verishape": ours_fn}
    times: dict[str, list[float]] = {k: [] for k in fns}
    with torch.no_grad():
        for _ in range(20):
            stock_fn(*args), ours_fn(*args)
        for r in range(rounds):
            for side in (list(fns) if r % 2 == 0 else list(reversed(fns))):
                start = time.perf_counter()
                for _ in range(calls):
                    fns[side](*args)
                times[side].append((time.perf_counter() - start) / calls)
    t = {k: statistics.median(v) for k, v in times.items()}
    return {"stock_us": t["stock"] * 1e6, "verishape_us": t["verishape"] * 1e6,
            "diff_us": (t["verishape"] - t["stock"]) * 1e6, "ratio": t["verishape"] / t["stock"]}


def measure(program: Program, source: str, rounds: int, calls: int) -> dict[str, Any]:
    (stock, stock_err), (ours, ours_err) = export(torch.export.export, program), export(verishape.export, program)
    row: dict[str, Any] = {"program": program.name, "source": source, "facts": program.facts,
                           "stock_export": stock_err or "exported", "verishape_export": ours_err or "exported"}
    if ours is None or (stock is None and source == "corpus"):
        return row
    row["verishape_checks"] = [{"fact": export_checks.describe(c.fact, export_checks.input_dims(ours)),
                                "origin": c.origin, "why": c.why} for c in export_program_checks(ours)]
    sides = {"stock": stock.module() if stock is not None else None, "verishape": ours.module()}
    row["inputs"] = [try_input(program, p, sides) for p in probes(program, stock, ours)]
    added = sum(CHECK_MESSAGE in m for m in check_nodes(ours))
    if stock is not None and added:
        row["cost"] = {"checks_added": added, "assert_nodes": {"stock": len(check_nodes(stock)),
                                                              "verishape": len(check_nodes(ours))},
                       **cost_row(sides["stock"], sides["verishape"], program.inputs[0], rounds, calls)}
    return row


def aoti(program: Program, rounds: int, calls: int) -> dict[str, Any]:
    """Both programs as AOTInductor packages: every out-of-range input, and per-call time."""
    folder = Path(tempfile.mkdtemp(prefix="export_checks_aoti_"))
    runners, compile_s, eps = {}, {}, {}
    for side, exporter in (("stock", torch.export.export), ("verishape", verishape.export)):
        ep = eps[side] = export(exporter, program)[0]
        start = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            path = torch._inductor.aoti_compile_and_package(ep, package_path=str(folder / f"{side}.pt2"))
        compile_s[side] = time.perf_counter() - start
        runners[side] = torch._inductor.aoti_load_package(path)
    tried = [try_input(program, p, runners) for p in probes(program, eps["stock"], eps["verishape"])
             if p["kind"] == "out_of_range"]
    return {"program": program.name, "compile_s": compile_s, "inputs": tried,
            "cost": cost_row(runners["stock"], runners["verishape"], program.inputs[0], rounds, calls)}


def aoti_summary(packages: list[dict[str, Any]]) -> dict[str, int]:
    """Out-of-range inputs run through the packages: how many each side accepted."""
    tried = [r for a in packages for r in a["inputs"]]
    return {"inputs": len(tried), "stock_accepted": sum(r["stock"].get("accepted", False) for r in tried),
            "verishape_accepted": sum(r["verishape"].get("accepted", False) for r in tried),
            "verishape_rejected_by_its_check": sum(r["verishape"].get("by_verishape_check", False) for r in tried)}


def summarize(rows: list[dict[str, Any]], source: str, kind: str) -> dict[str, int]:
    tried = [r for row in rows if row["source"] == source and row["stock_export"] == "exported"
             for r in row.get("inputs", ()) if r["kind"] == kind]
    silent = [r for r in tried if r["stock"]["accepted"]]
    return {"inputs": len(tried), "eager_raises": sum("raises" in r["eager"] for r in tried),
            "stock_accepted": len(silent),
            "stock_accepted_different_from_eager": sum(r["stock"]["different"] for r in silent),
            "verishape_rejected": sum(not r["verishape"]["accepted"] for r in tried),
            "verishape_rejected_by_its_check": sum(r["verishape"].get("by_verishape_check", False) for r in tried)}


def markdown(report: dict[str, Any]) -> str:
    def cell(e: dict[str, Any]) -> str:
        if e.get("exported") is False:
            return "not exported"
        if not e.get("accepted", True) or "raises" in e:
            return f"raises `{e['raises'][:90]}`"
        return f"{e['returns']}" + ("" if "different" not in e else " **differs**" if e["different"] else " same")

    lines = [f"torch {report['torch']}, {report['threads']} intra-op thread(s), per-call times: median of "
             f"{report['rounds']} rounds of {report['calls']} calls; run {report['run_s']:.0f} s.", "",
             "| program | input | size | why | eager | stock | verishape |", "|---|---|---|---|---|---|---|"]
    for row in report["programs"]:
        for r in row.get("inputs", ()):
            lines.append(f"| `{row['program']}` | {r['input']} | {r['size']} | {r['why']} | {cell(r['eager'])} | "
                         f"{cell(r['stock'])} | {cell(r['verishape'])} |")
    inputs = {k: s for k, s in report["summary"].items() if k != "per_call"}
    keys = list(next(iter(inputs.values())))
    lines += ["", "| summary | " + " | ".join(keys) + " |", "|---" * (1 + len(keys)) + "|"]
    lines += [f"| {k} | " + " | ".join(str(x) for x in s.values()) + " |" for k, s in inputs.items()]
    c = report["summary"]["per_call"]
    lines += ["", f"Per call, {c['programs']} programs, {c['checks_added']} checks added: median difference "
              f"{c['median_diff_us']:+.1f} µs, median ratio {c['median_ratio']:.2f}x."]
    lines += ["", "| program | checks added | assert nodes stock/verishape | stock µs/call | verishape µs/call | "
              "diff µs | ratio |", "|---|---|---|---|---|---|---|"]
    for row in report["programs"]:
        if "cost" in row:
            c = row["cost"]
            lines.append(f"| `{row['program']}` | {c['checks_added']} | {c['assert_nodes']['stock']}/"
                         f"{c['assert_nodes']['verishape']} | {c['stock_us']:.1f} | {c['verishape_us']:.1f} | "
                         f"{c['diff_us']:+.1f} | {c['ratio']:.2f}x |")
    if report.get("aoti"):
        lines += ["", f"AOTInductor packages, out-of-range inputs: {report['aoti_summary']}", "",
                  "| package | input | size | why | eager | stock package | verishape package |",
                  "|---|---|---|---|---|---|---|"]
    for a in report.get("aoti", ()):
        lines += [f"| `{a['program']}` | {r['input']} | {r['size']} | {r['why']} | {cell(r['eager'])} | "
                  f"{cell(r['stock'])} | {cell(r['verishape'])} |" for r in a["inputs"]]
    for a in report.get("aoti", ()):
        lines += ["", f"AOTInductor `{a['program']}`: per call {a['cost']['stock_us']:.1f} µs vs "
                  f"{a['cost']['verishape_us']:.1f} µs ({a['cost']['ratio']:.2f}x); compile "
                  f"{a['compile_s']['stock']:.1f} s / {a['compile_s']['verishape']:.1f} s."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (2 make timings erratic)")
    ap.add_argument("--aoti", action="store_true",
                    help=f"also AOTInductor packages of {', '.join(AOTI_PROGRAMS)}: every out-of-range input")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    rows = []
    for program, source in [*((p, "corpus") for p in PROGRAMS), *((p, "own") for p in OWN)]:
        row = measure(program, source, args.rounds, args.calls)
        rows.append(row)
        c = row.get("cost")
        print(f"{program.name:20} {source:6} stock {row['stock_export'][:20]:20} inputs {len(row.get('inputs', ())):2}"
              + (f"  {c['stock_us']:.1f} vs {c['verishape_us']:.1f} us/call" if c else ""), flush=True)
    summary = {f"{source} {kind}": summarize(rows, source, kind)
               for source in ("corpus", "own") for kind in ("out_of_range", "traced_only")}
    costs = [r["cost"] for r in rows if "cost" in r]
    summary["per_call"] = {"programs": len(costs), "checks_added": sum(c["checks_added"] for c in costs),
                           **{f"median_{k}": statistics.median(c[k] for c in costs) for k in ("diff_us", "ratio")}}
    report: dict[str, Any] = {"benchmark": "export_checks", "torch": torch.__version__,
                              "python": platform.python_version(), "rounds": args.rounds, "calls": args.calls,
                              "threads": args.threads, "summary": summary, "programs": rows}
    if args.aoti:
        own = {p.name: p for p in OWN}
        report["aoti"] = [aoti(own[name], args.rounds, args.calls // 3) for name in AOTI_PROGRAMS]
        report["aoti_summary"] = aoti_summary(report["aoti"])
        print("AOTInductor packages, out-of-range inputs:", report["aoti_summary"])
    report["run_s"] = time.perf_counter() - start
    print(json.dumps(summary, indent=2), f"\nrun {report['run_s']:.1f} s")
    for path, text in ((args.json, json.dumps(report, indent=2) + "\n"), (args.markdown, markdown(report))):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
