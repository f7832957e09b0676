"""Findings, their runnable repros, and the JSON report.

Report schema::

    {"findings": [{"op", "variant", "kind", "class", "mode", "python_dispatcher", "where",
                   "message", "eager_error", "meta_error", "documented", "case", "point", "repro",
                   "fn_source", "imports"}],
     "ops": [{"op", "variant", "status", "seeds", "examples", "findings", "notes"}],
     "summary": {"ops", "examples", "findings", "meta_bugs", "documented_divergences", "by_kind",
                 "by_class", "excluded", "excluded_reasons", ...}}

``documented`` is None for a meta bug, else one sentence on the torch behaviour that makes
the divergence expected; the summary counts the two apart so neither hides the other.

Everything except ``time_s`` fields is a function of the op list, the seed and the example
budget, so two runs with the same ``--seed`` give the same report whatever ``--jobs`` is.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from . import rootcause
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
    "shape_determined_permissive": "error_mismatch",
    "compiled_rejects_unbacked_assert": "compiled_rejects",
    "compiled_rejects_specialization": "compiled_rejects",
}

#: Why each kind of case is excluded from the findings (keys of ``summary.excluded``; a key
#: ``value_dependent_error:GROUP`` is explained by its prefix's entry plus the group name).
EXCLUDED_REASONS = {
    "value_dependent_error": "eager's error matches a value pattern (group after the colon) and eager accepts the "
                             "same sizes with other values (or the group's values cannot be filled generically)",
    "data_dependent_values": "the fake run read tensor values into sizes (item(), nonzero), so eager's error may be "
                             "about values meta cannot see",
    "zero_numel_strides": "strides/offset of an empty output differ; no memory is read through them",
    "insignificant_strides": "strides of size-1 dims differ; never used to address memory",
    "unbacked_layout_differs": "unbacked sizes make torch pick the general layout on purpose; compiled code "
                               "produces exactly that layout",
    "needs_python_dispatcher": "the trace failed without the python dispatcher and passed with it (every torch "
                               "tracer enables it); the retried trace was checked",
    "meta_unsupported": "fake tensors cannot run the case (reason after the colon: data-dependent output, no fake "
                        "kernel, guard on an unbacked size); nothing to compare",
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
    #: The first Python meta/reference/decomposition function the fake run entered ("": C++).
    meta_fn: str = ""

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
            "meta_error": self.verdict.meta_error, "documented": self.verdict.documented,
            "case": case_source(self.case),
            "point": [list(s) for s in self.point] if self.point else None, "repro": self.repro(),
            # how to get the callable back: lets repro.write_repros work from a saved report
            "fn_source": self.fn_source, "imports": list(self.imports),
            "blame": self.verdict.blame, "evidence": list(self.verdict.evidence),
            "meta_site": self.verdict.site, "meta_function": self.meta_fn,
            "settings": settings(self.mode, self.python_dispatcher),
        }


def settings(mode: str, python_dispatcher: bool) -> dict[str, Any]:
    """Every setting the fuzzer traced a finding under: a repro that drops one of them tests
    something else (the python dispatcher changes which decompositions run)."""
    return {"mode": mode, "python_dispatcher": python_dispatcher, "duck_shape": False,
            "specialize_zero_one": True, "fake_mode": "FakeTensorMode(allow_non_fake_inputs=False)",
            "unbacked_inputs": "create_unbacked_symint() with torch._check(s >= 0)" if mode == "unbacked" else None,
            "torch": torch.__version__}


def _exclusion(key: str) -> str | None:
    """The excluded-reason key a per-op note counts under, or None for a plain note."""
    name = key.removeprefix("excluded:")
    return name if key.startswith("excluded:") or name.split(":")[0] in EXCLUDED_REASONS else None


def summarize(findings: Sequence[dict[str, Any]], ops: Sequence[dict[str, Any]]) -> dict[str, Any]:
    excluded: collections.Counter[str] = collections.Counter()
    notes: collections.Counter[str] = collections.Counter()
    for op in ops:
        for k, v in op.get("notes", {}).items():
            reason = _exclusion(k)
            if reason is None:
                notes[k] += v
            else:
                excluded[reason] += v
    status = collections.Counter(op.get("status", "ok").split(":")[0] for op in ops)
    blames = collections.Counter(blame_of(f) for f in findings)
    return {
        "ops": len(ops),
        "ops_with_findings": len({(f["op"], f["variant"]) for f in findings}),
        "examples": sum(op.get("examples", 0) for op in ops),
        "findings": len(findings),
        "meta_bugs": blames["meta"],
        "eager_bugs": blames["eager"],
        "private_paths": blames["private"],
        "documented_divergences": blames["documented"],
        "by_blame": dict(sorted(blames.items())),
        "by_kind": dict(sorted(collections.Counter(f["kind"] for f in findings).items())),
        "by_class": dict(sorted(collections.Counter(f["class"] for f in findings).items())),
        "by_mode": dict(sorted(collections.Counter(f["mode"] for f in findings).items())),
        "excluded": dict(sorted(excluded.items())),
        "excluded_reasons": {r: EXCLUDED_REASONS[r] for r in sorted({k.split(":")[0] for k in excluded})
                             if r in EXCLUDED_REASONS},
        "notes": dict(sorted(notes.items())),
        "op_status": dict(sorted(status.items())),
    }


def blame_of(f: dict[str, Any]) -> str:
    """A record's blame (records saved before triage existed: documented or meta)."""
    return f.get("blame") or ("documented" if f.get("documented") else "meta")


def build_report(op_results: Iterable[dict[str, Any]], known: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Merge per-op results (each with its own ``findings`` list) into one report.
    ``known``: the user's known upstream issues (:func:`rootcause.load_known`)."""
    ops = sorted(op_results, key=lambda r: (r["op"], r["variant"]))
    findings = [f for op in ops for f in op.get("finding_records", [])]
    findings.sort(key=lambda f: (f["op"], f["variant"], f["mode"], f["kind"]))
    ops_out = [{k: v for k, v in op.items() if k != "finding_records"} for op in ops]
    report = {"findings": findings, "ops": ops_out, "summary": summarize(findings, ops_out)}
    regroup(report, known)
    return report


def regroup(report: dict[str, Any], known: Sequence[dict[str, Any]] = ()) -> None:
    """(Re)compute the report's root causes, e.g. for a saved report and a known-issues file."""
    causes = rootcause.group(report["findings"], known)
    ids = {(w["op"], w["variant"], w["mode"], w["kind"]): c["id"] for c in causes for w in c["witnesses"]}
    for f in report["findings"]:
        f["root_cause"] = ids[(f["op"], f["variant"], f["mode"], f["kind"])]
    report["root_causes"] = causes
    report["summary"]["root_causes"] = rootcause.summary(causes)


def dump(report: dict[str, Any], path: str) -> None:
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1, sort_keys=False)
        fh.write("\n")


def _finding_line(f: dict[str, Any]) -> str:
    full = f"{f['op']}.{f['variant']}" if f["variant"] else f["op"]
    return (f"  [{f['kind']}] {full} ({f['mode']}{', pydispatch' if f['python_dispatcher'] else ''}, "
            f"{f['where']}): {f['message']}")


_SECTIONS = (("meta", "meta bugs"), ("eager", "eager bugs (the aten kernel lacks a check its public API makes)"),
             ("private", "private or unchecked-by-contract paths (not meta bugs)"))


def text_summary(report: dict[str, Any]) -> str:
    """Findings by blame (meta, eager, private, documented), root causes, then what was excluded."""
    s = report["summary"]
    by = collections.defaultdict(list)
    for f in report["findings"]:
        by[blame_of(f)].append(f)
    documented = by["documented"]
    lines = [f"fuzz-meta: {s['ops']} op entries, {s['examples']} examples, {s['findings']} findings "
             f"({len(by['meta'])} meta bugs, {len(by['eager'])} eager bugs, {len(by['private'])} private paths, "
             f"{len(documented)} documented divergences)"]
    causes = report.get("root_causes")
    if causes is not None:
        rc = rootcause.summary(causes)
        lines.append(f"root causes: {rc['total']} ({', '.join(f'{k} {v}' for k, v in rc['by_blame'].items())}); "
                     f"known upstream: {sum(rc['known_upstream_by_blame'].values())}")
    for blame, title in _SECTIONS:
        if by[blame]:
            lines.append(f"{title} ({len(by[blame])}):")
            for f in by[blame]:
                lines.append(_finding_line(f))
                lines += [f"      evidence: {e}" for e in f.get("evidence", [])]
    if documented:
        lines.append(f"documented divergences ({len(documented)}; expected from torch's documented behaviour):")
        for f in documented:
            lines += [_finding_line(f), f"      documented: {f['documented']}"]
    if s.get("excluded"):
        lines.append("excluded (not findings): " + ", ".join(f"{k} {v}" for k, v in s["excluded"].items()))
    return "\n".join(lines)
