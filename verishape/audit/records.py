"""What an audit reports about one frame: a check of each guard and runtime assert
(:class:`Check`), the findings of what stock torch added on its own (:class:`Finding`), and
the frame's whole audit (:class:`FrameAudit`).  Plain records, shared by the analysis, the
export audit and the report."""

from __future__ import annotations

import dataclasses
from typing import Any

from verishape.proofs.result import SolveResult

from .frame import Frame


@dataclasses.dataclass
class Check:
    kind: str  # "guard" or "runtime_assert"
    expr: str
    source_line: str | None
    status: str  # "implied", "not_implied", "undecided"
    result: SolveResult
    counterexample: dict[str, int | float] | None = None
    #: For a guard the declared space does not imply, whether its counterexample breaks it
    #: alone (see :data:`ISOLATIONS`); None for implied guards and runtime asserts.
    isolation: str | None = None
    #: the other installed guards the shown counterexample breaks too (when not alone)
    also_breaks: list[str] = dataclasses.field(default_factory=list)
    isolation_note: str = ""
    #: the solver's answer to "does every input that breaks this guard break another one?"
    isolation_result: SolveResult | None = None


#: ``only_this_guard``: the counterexample satisfies the frame's other installed guards
#: (each defined and true there), so its replay shows what this guard alone protects;
#: ``also_breaks_others``: no input of the declared space breaks this guard alone (proved);
#: ``unknown``: the solver found no such input and could not prove there is none.
ISOLATIONS = ("only_this_guard", "also_breaks_others", "unknown")


@dataclasses.dataclass
class Finding:
    kind: str
    frame: int
    guard: str
    source_line: str | None
    counterexample: dict[str, int | float] | None
    detail: str = ""
    replay: dict[str, Any] | None = None
    isolation: str | None = None
    also_breaks: list[str] = dataclasses.field(default_factory=list)
    isolation_note: str = ""


@dataclasses.dataclass
class FrameAudit:
    frame: Frame
    symbols: dict[str, list[str]]
    declared: list[str]
    checks: list[Check]
    findings: list[Finding]
    decisions: list[Any]
    fallbacks: list[dict[str, Any]]
    minimizations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    divisibility: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: guards on Python float values (a LayerNorm ``eps``, a dropout ``p``, an attention
    #: scale), kept apart from shape guards: see :func:`verishape.audit.checks.value_guards`
    value_guards: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: 0/1 specializations the compile widened on a proof of specialization equivalence
    #: (``compiler/widen/reuse.py``), with their evidence: see :func:`verishape.audit.stock_findings.widenings`
    widenings: list[dict[str, Any]] = dataclasses.field(default_factory=list)
