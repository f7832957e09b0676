"""The audit of one ``torch.export`` call: its :class:`~verishape.audit.declared.DeclaredSpace`
(:func:`~verishape.audit.declared.for_export`: the program's inputs as sources, ``Dim``
ranges as the declared bounds) and the exported program's own checks (range constraints,
shape guards, runtime asserts) checked against it."""

from __future__ import annotations

from typing import Any

import sympy

from . import checks, stock_findings
from .declared import DeclaredSpace
from .records import Check, Finding, FrameAudit
from .exports import is_range_guard, program_range_facts, runtime_asserts


def audit_export(space: DeclaredSpace) -> FrameAudit:
    """The audit of an export call (see the module docstring)."""
    facts = space.facts()
    index = space.frame.index
    found: list[Check] = []
    findings: list[Finding] = []
    ep = space.frame.program
    if ep is not None:
        for _sym, fact in program_range_facts(ep, space.sources):
            c = checks.check(space, "range_constraint", fact, None, facts)
            found.append(c)
            findings += _finding(space, "range_not_implied", c,
                                      "the exported program rejects these declared inputs (range_constraints)")
    for g in space.env.guards:
        expr = space.env.replace(g.expr)
        if expr is sympy.true or (is_range_guard(expr) and ep is not None):
            continue  # folded into range_constraints, checked above
        c = checks.check(space, "guard", g.expr, checks.user_line(g.sloc), facts, checks.other_guards(space, expr))
        found.append(c)
        findings += _finding(space, "guard_not_implied", c, c.isolation_note or
                                  "the exported program checks this guard and rejects these declared inputs")
    asserts = runtime_asserts(ep) if ep is not None else [
        ra.expr for ras in space.env.deferred_runtime_asserts.values() for ra in ras]
    for expr in asserts:
        c = checks.check(space, "runtime_assert", expr, None, facts)
        found.append(c)
        if ep is not None and all(str(s) in space.sources for s in expr.free_symbols):
            # On input sizes only: the program refuses declared inputs.  (An assert on a
            # data-dependent value checks data, the user's torch._check: reported above.)
            findings += _finding(space, "runtime_assert_not_implied", c,
                                      "the exported program asserts this at run time and rejects these "
                                      "declared inputs")
    findings += checks.contradictions(space, facts, asserts)
    findings += checks.refuted_checks(space)
    findings += checks.vacuous_findings(space, found)
    # two inputs declared with one named Dim share a symbol on purpose; a declared size the
    # program does not accept (0 or 1 included) breaks one of its range constraints, checked above
    findings += [f for f in stock_findings.duck_sizing(space) if not _same_dim(space, f.counterexample or {})]
    fallbacks = checks.fallbacks(space, facts + asserts, findings)
    if space.frame.error:
        findings.append(Finding(space.frame.error_kind or "compile_failed", index, space.frame.error, None, None,
                                detail="the export failed"))
    log = space.env.verishape_log
    return FrameAudit(space.frame, space.sources, space.declared_lines(), found, findings, list(log.records),
                      fallbacks)


def _same_dim(space: DeclaredSpace, pair: dict[str, Any]) -> bool:
    origins = {space.frame.declared[s].origin if s in space.frame.declared else None for s in pair}
    return len(origins) == 1 and None not in origins and "undeclared" not in next(iter(origins))


def _finding(space: DeclaredSpace, kind: str, c: Check, detail: str) -> list[Finding]:
    if c.status == "implied":
        return []
    if c.status == "vacuous":
        kind = "vacuous_proof"
    elif c.status != "not_implied":
        kind = kind.replace("_not_implied", "_undecided")
    return [Finding(kind, space.frame.index, c.expr, c.source_line, c.counterexample, detail=detail,
                    isolation=c.isolation, also_breaks=c.also_breaks, isolation_note=c.isolation_note)]
