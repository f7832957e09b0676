"""Findings, their runnable repros, and the JSON report.

Report schema::

    {"findings": [{"op", "variant", "kind", "class", "mode", "python_dispatcher", "where",
                   "message", "eager_error", "meta_error", "case", "point", "repro"}],
     "ops": [{"op", "variant", "status", "seeds", "examples", "findings", "notes"}],
     "summary": {"ops", "examples", "findings", "by_kind", "by_class", "excluded", ...}}

Everything except ``time_s`` fields is a function of the op list, the seed and the example
budget, so two runs with the same ``--seed`` give the same report whatever ``--jobs`` is.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from .check import Verdict
from .inputs import Case, case_source

#: Finding kinds grouped by what they mean for a compiler relying on the meta function.
CLASSES = {
    "shape_mismatch": "wrong_metadata",
    "stride_mismatch": "wrong_metadata",
    "storage_offset_mismatch": "wrong_metadata",
    "dtype_mismatch": "wrong_metadata",
    "output_structure_mismatch": "wrong_metadata",
    "meta_accepts_eager_rejects": "error_mismatch",
    "meta_rejects_eager_accepts": "error_mismatch",
    "symbolic_trace_error": "symbolic_gap",
    "unbacked_silent_shape_mismatch": "unbacked_unsound",
    "unbacked_unchecked_error": "unbacked_unchecked",
}


@dataclasses.dataclass
class Finding:
    op: str
    variant: str
    mode: str
    python_dispatcher: bool
    verdict: Verdict
    case: Case
    point: tuple[tuple[int, ...], ...] | None
    fn_source: str
    imports: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.verdict.kind

    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.variant, self.mode, self.kind)

    def repro(self) -> str:
        full = f"{self.op}.{self.variant}" if self.variant else self.op
        pyd = ", python dispatcher" if self.python_dispatcher else ""
        lines = [
            f"# verishape fuzz-meta repro: {full} ({self.mode}{pyd}): {self.kind} at {self.verdict.where}",
            f"# {self.verdict.message}",
            "import torch",
            *self.imports,
            "from verishape.fuzz.inputs import Case, T",
            "from verishape.fuzz.check import replay",
            "",
            f"fn = {self.fn_source}",
            f"case = {case_source(self.case)}",
            f"replay(fn, case, mode={self.mode!r}, python_dispatcher={self.python_dispatcher!r}, "
            f"point={self.point!r})",
        ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op, "variant": self.variant, "kind": self.kind,
            "class": CLASSES.get(self.kind, "other"), "mode": self.mode,
            "python_dispatcher": self.python_dispatcher, "where": self.verdict.where,
            "message": self.verdict.message, "eager_error": self.verdict.eager_error,
            "meta_error": self.verdict.meta_error, "case": case_source(self.case),
            "point": [list(s) for s in self.point] if self.point else None, "repro": self.repro(),
        }


def summarize(findings: Sequence[dict[str, Any]], ops: Sequence[dict[str, Any]]) -> dict[str, Any]:
    excluded: collections.Counter[str] = collections.Counter()
    notes: collections.Counter[str] = collections.Counter()
    for op in ops:
        for k, v in op.get("notes", {}).items():
            (excluded if k.startswith("excluded:") or k in ("zero_numel_strides", "insignificant_strides")
             else notes)[k.removeprefix("excluded:")] += v
    status = collections.Counter(op.get("status", "ok").split(":")[0] for op in ops)
    return {
        "ops": len(ops),
        "ops_with_findings": len({(f["op"], f["variant"]) for f in findings}),
        "examples": sum(op.get("examples", 0) for op in ops),
        "findings": len(findings),
        "by_kind": dict(sorted(collections.Counter(f["kind"] for f in findings).items())),
        "by_class": dict(sorted(collections.Counter(f["class"] for f in findings).items())),
        "by_mode": dict(sorted(collections.Counter(f["mode"] for f in findings).items())),
        "excluded": dict(sorted(excluded.items())),
        "notes": dict(sorted(notes.items())),
        "op_status": dict(sorted(status.items())),
    }


def build_report(op_results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Merge per-op results (each with its own ``findings`` list) into one report."""
    ops = sorted(op_results, key=lambda r: (r["op"], r["variant"]))
    findings = [f for op in ops for f in op.get("finding_records", [])]
    findings.sort(key=lambda f: (f["op"], f["variant"], f["mode"], f["kind"]))
    ops_out = [{k: v for k, v in op.items() if k != "finding_records"} for op in ops]
    return {"findings": findings, "ops": ops_out, "summary": summarize(findings, ops_out)}


def dump(report: dict[str, Any], path: str) -> None:
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1, sort_keys=False)
        fh.write("\n")


def text_summary(report: dict[str, Any]) -> str:
    s = report["summary"]
    lines = [f"fuzz-meta: {s['ops']} op entries, {s['examples']} examples, {s['findings']} findings"]
    for f in report["findings"]:
        full = f"{f['op']}.{f['variant']}" if f["variant"] else f["op"]
        lines.append(f"  [{f['kind']}] {full} ({f['mode']}{', pydispatch' if f['python_dispatcher'] else ''}, "
                     f"{f['where']}): {f['message']}")
    return "\n".join(lines)
