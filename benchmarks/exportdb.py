"""ExportDB parity: stock ``torch.export.export`` against ``verishape.export`` on PyTorch's own examples.

For each example of ``torch._export.db.examples`` and two configurations, ``own`` (the
example's ``dynamic_shapes``, None when it has none) and ``auto`` (``Dim.AUTO`` on every
dimension of every tensor input), each exporter's outcome: ``exported`` or the exception
type and the first line of its message; when exported, whether ``ep.module()`` on the
example inputs equals eager.  A row has parity when both sides land in the same outcome
class: both export and match eager, or both fail with the same exception type.  Each
export gets a deep copy of the model and of the inputs, after ``torch._dynamo.reset()``.
Non-strict by default; ``--strict`` exports strict.  The ``_assert_scalar`` checks that
``verishape.export`` adds for declared ``Dim`` bounds are counted, not a difference.

    python benchmarks/exportdb.py [--strict] [--json benchmarks/results/exportdb.json]
                                  [--markdown benchmarks/results/exportdb.md] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import platform
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import torch  # noqa: E402
from torch._export.db.case import ExportCase  # noqa: E402
from torch._export.db.examples import all_examples  # noqa: E402
from torch.export import Dim  # noqa: E402

import verishape  # noqa: E402

CONFIGS = ("own", "auto")
EXPORTERS: dict[str, Callable[..., Any]] = {"stock": torch.export.export, "verishape": verishape.export}


def auto_spec(value: Any) -> Any:
    """``Dim.AUTO`` on every dimension of every tensor in ``value``, in its structure."""
    if isinstance(value, torch.Tensor):
        return {d: Dim.AUTO for d in range(value.dim())}
    if isinstance(value, (tuple, list)):
        return type(value)(auto_spec(v) for v in value)
    if isinstance(value, Mapping):
        return {k: auto_spec(v) for k, v in value.items()}
    return None


def dynamic_shapes_for(case: ExportCase, config: str) -> Any:
    if config == "own":
        return case.dynamic_shapes
    # Keyed by the forward's parameter names, as torch binds them (``*args`` -> a tuple,
    # ``**kwargs`` -> a dict).
    bound = inspect.signature(case.model.forward).bind(*case.example_args, **case.example_kwargs)
    return {name: auto_spec(value) for name, value in bound.arguments.items()}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return bool(a == b)


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def inputs(case: ExportCase) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Fresh copies of the example inputs (some examples mutate them)."""
    return copy.deepcopy(case.example_args), copy.deepcopy(case.example_kwargs)


def eager(case: ExportCase) -> Any:
    args, kwargs = inputs(case)
    return copy.deepcopy(case.model)(*args, **kwargs)


def run_side(exporter: Callable[..., Any], case: ExportCase, dynamic_shapes: Any, strict: bool,
             expected: Any) -> dict[str, Any]:
    torch._dynamo.reset()
    args, kwargs = inputs(case)
    start = time.perf_counter()
    try:
        ep = exporter(copy.deepcopy(case.model), args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
    except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
        return {"outcome": first_line(exc), "error_type": type(exc).__name__,
                "export_s": time.perf_counter() - start}
    entry: dict[str, Any] = {"outcome": "exported", "export_s": time.perf_counter() - start,
                             "assert_nodes": sum(1 for n in ep.graph.nodes
                                                 if n.target is torch.ops.aten._assert_scalar.default)}
    args, kwargs = inputs(case)
    try:
        entry["matches_eager"] = same(ep.module()(*args, **kwargs), expected)
    except Exception as exc:  # noqa: BLE001 - a program that fails on its own example is a mismatch
        entry["matches_eager"] = False
        entry["run_error"] = first_line(exc)
    return entry


def outcome_class(entry: dict[str, Any]) -> str:
    if entry["outcome"] == "exported":
        return "exported" if entry["matches_eager"] else "mismatch"
    return entry["error_type"]


def measure(case: ExportCase, config: str, strict: bool = False) -> dict[str, Any]:
    """One row: ``case`` under ``config``, both exporters, and whether they agree."""
    dynamic_shapes = dynamic_shapes_for(case, config)
    expected = eager(case)
    row: dict[str, Any] = {"example": case.name, "config": config, "support": case.support_level.name,
                           "dynamic_shapes": None if dynamic_shapes is None else repr(dynamic_shapes)}
    for side, exporter in EXPORTERS.items():
        row[side] = run_side(exporter, case, dynamic_shapes, strict, expected)
    classes = {outcome_class(row[side]) for side in EXPORTERS}
    row["parity"] = len(classes) == 1 and classes != {"mismatch"}
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def exported(r: dict[str, Any], side: str) -> bool:
        return r[side]["outcome"] == "exported"

    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "rows": len(rs),
            "parity": sum(r["parity"] for r in rs),
            "verishape_exports_stock_fails": sum(exported(r, "verishape") and not exported(r, "stock") for r in rs),
            "stock_exports_verishape_fails": sum(exported(r, "stock") and not exported(r, "verishape") for r in rs),
            "both_export": sum(exported(r, "stock") and exported(r, "verishape") for r in rs),
            "both_fail_same_type": sum(not exported(r, "stock") and r["parity"] for r in rs),
            "output_mismatches": {s: sum(exported(r, s) and not r[s]["matches_eager"] for r in rs) for s in EXPORTERS},
            "assert_nodes_where_both_export": {s: sum(r[s]["assert_nodes"] for r in rs
                                                      if exported(r, "stock") and exported(r, "verishape"))
                                               for s in EXPORTERS},
        }

    return {**block(rows), "by_config": {c: block([r for r in rows if r["config"] == c]) for c in CONFIGS}}


def cell(e: dict[str, Any]) -> str:
    if e["outcome"] != "exported":
        return e["outcome"].replace("|", "\\|").replace("\n", " ")
    run = "matches eager" if e["matches_eager"] else f"MISMATCH {e.get('run_error', '')}".strip()
    return f"exported, {run}, {e['assert_nodes']} asserts"


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any], strict: bool) -> str:
    lines = [f"ExportDB, {'strict' if strict else 'non-strict'} export, torch {torch.__version__}.", "",
             "| example | config | support | stock | verishape | parity |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['example']}` | {r['config']} | {r['support']} | {cell(r['stock'])} | "
                     f"{cell(r['verishape'])} | {'yes' if r['parity'] else '**no**'} |")
    s = summary
    lines += ["", f"Rows: {s['rows']}; parity: {s['parity']}; verishape exports where stock fails: "
              f"{s['verishape_exports_stock_fails']}; stock exports where verishape fails: "
              f"{s['stock_exports_verishape_fails']}; output mismatches: stock {s['output_mismatches']['stock']}, "
              f"verishape {s['output_mismatches']['verishape']}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true", help="strict export (default: non-strict)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--only", nargs="*", help="example names (default: all)")
    args = ap.parse_args()
    cases = [c for name, c in sorted(all_examples().items()) if not args.only or name in args.only]
    start = time.perf_counter()
    rows = []
    for case in cases:
        for config in CONFIGS:
            row = measure(case, config, args.strict)
            rows.append(row)
            s, v = row["stock"], row["verishape"]
            print(f"{case.name:32} {config:4} {'parity' if row['parity'] else 'DIFFER':6} "
                  f"stock {outcome_class(s):24} verishape {outcome_class(v):24} "
                  f"{s['export_s']:.2f}s {v['export_s']:.2f}s", flush=True)
    summary = {**summarize(rows), "wall_s": round(time.perf_counter() - start, 1)}
    report = {"benchmark": "exportdb", "torch": torch.__version__, "python": platform.python_version(),
              "strict": args.strict, "summary": summary, "rows": rows}
    print(json.dumps({k: v for k, v in summary.items() if k != "by_config"}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(rows, summary, args.strict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
