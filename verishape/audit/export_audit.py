"""The audit of one ``torch.export`` call: :class:`FrameAuditor` with the program's inputs
as sources, ``Dim`` ranges as the declared space, and the exported program's own checks
(range constraints, shape guards, runtime asserts) checked against that space."""

from __future__ import annotations

from typing import Any

import sympy

from .analyze import FrameAuditor, user_line
from .records import Check, Finding, FrameAudit
from .exports import ExportFrame, is_range_guard, program_sources, program_range_facts, runtime_asserts
from .space import Bounds


class ExportAuditor(FrameAuditor):
    """:class:`FrameAuditor` for an export: sources from the program's inputs, the declared
    space from ``Dim`` ranges, and the program's own checks (range constraints, shape
    guards, runtime asserts) against that space."""

    frame: ExportFrame

    def __init__(self, frame: ExportFrame, assumptions: Any, prover: Any) -> None:
        if frame.env is None:
            raise RuntimeError("internal error (a verishape bug): an audited export has no ShapeEnv")
        super().__init__(frame, assumptions, prover)

    def _symbol_sources(self) -> dict[str, list[str]]:
        return program_sources(self.frame)

    def describe(self, expr: sympy.Basic) -> str:
        """With the program's input names (a strict export's ShapeEnv calls them
        ``L['flat_args'][0]``)."""
        mapping = {s: sympy.Symbol(self.sources[str(s)][0]) for s in expr.free_symbols if str(s) in self.sources}
        return str(expr.xreplace(mapping)) if mapping else str(expr)

    def _marked(self) -> dict[str, Bounds]:
        return dict(self.frame.declared)

    def _specializations(self) -> list[Finding]:
        # A declared size the program does not accept (0 or 1 included) breaks one of its
        # range constraints, checked (and replayed) there.
        return []

    def _duck_sizing(self) -> list[Finding]:
        """Two inputs declared with one named ``Dim`` share a symbol on purpose."""
        return [f for f in super()._duck_sizing() if not self._same_dim(f.counterexample or {})]

    def _same_dim(self, pair: dict[str, Any]) -> bool:
        origins = {self.frame.declared[s].origin if s in self.frame.declared else None for s in pair}
        return len(origins) == 1 and None not in origins and "undeclared" not in next(iter(origins))

    def run(self) -> FrameAudit:
        space = self.space_facts()
        index = self.frame.index
        checks: list[Check] = []
        findings: list[Finding] = []
        ep = self.frame.program
        if ep is not None:
            for _sym, fact in program_range_facts(ep, self.sources):
                c = self.check("range_constraint", fact, None, space)
                checks.append(c)
                findings += self._finding("range_not_implied", c,
                                          "the exported program rejects these declared inputs (range_constraints)")
        for g in self.env.guards:
            expr = self.env.replace(g.expr)
            if expr is sympy.true or (is_range_guard(expr) and ep is not None):
                continue  # folded into range_constraints, checked above
            c = self.check("guard", g.expr, user_line(g.sloc), space, self.other_guards(expr))
            checks.append(c)
            findings += self._finding("guard_not_implied", c, c.isolation_note or
                                      "the exported program checks this guard and rejects these declared inputs")
        asserts = runtime_asserts(ep) if ep is not None else [
            ra.expr for ras in self.env.deferred_runtime_asserts.values() for ra in ras]
        for expr in asserts:
            c = self.check("runtime_assert", expr, None, space)
            checks.append(c)
            if ep is not None and all(str(s) in self.sources for s in expr.free_symbols):
                # On input sizes only: the program refuses declared inputs.  (An assert on a
                # data-dependent value checks data, the user's torch._check: reported above.)
                findings += self._finding("runtime_assert_not_implied", c,
                                          "the exported program asserts this at run time and rejects these "
                                          "declared inputs")
        findings += self._contradictions(space, asserts)
        findings += self._refuted_checks()
        findings += self._vacuous_findings(checks)
        findings += self._duck_sizing()
        fallbacks = self._fallbacks(space + asserts, findings)
        if self.frame.error:
            findings.append(Finding(self.frame.error_kind or "compile_failed", index, self.frame.error, None, None,
                                    detail="the export failed"))
        log = self.env.verishape_log
        return FrameAudit(self.frame, self.sources, self.declared_lines(), checks, findings, list(log.records),
                          fallbacks)

    def _finding(self, kind: str, c: Check, detail: str) -> list[Finding]:
        if c.status == "implied":
            return []
        if c.status == "vacuous":
            kind = "vacuous_proof"
        elif c.status != "not_implied":
            kind = kind.replace("_not_implied", "_undecided")
        return [Finding(kind, self.frame.index, c.expr, c.source_line, c.counterexample, detail=detail,
                        isolation=c.isolation, also_breaks=c.also_breaks, isolation_note=c.isolation_note)]
