"""Audit one compiled frame against its declared input space.

For each shape guard and runtime assert: is it implied by the declared space (then the
artifact is valid for every declared input and the proof is kept), or not (then a small
counterexample inside the declared space, keyed by input sources, shows an input that
fails it)?  Plus the kinds stock torch adds on its own: 0/1 specialization and duck-size
equalities, reported only when the declared space admits the values they exclude;
contradictory ``torch._check`` facts; and ``guard_or_*`` fallbacks taken without proof.

The space is :class:`~verishape.audit.declared.DeclaredSpace`; the findings are built by
:mod:`~verishape.audit.checks` and :mod:`~verishape.audit.stock_findings`; this module
puts one frame's audit together.
"""

from __future__ import annotations

import sympy
from torch.utils._sympy import functions as tf

from . import checks as checks_mod
from . import stock_findings
from .declared import DeclaredSpace
from .frame import NOT_COMPILED
from .records import Check, Finding, FrameAudit

_MODS = (tf.Mod, tf.PythonMod, tf.ModularIndexing)


def audit_frame(space: DeclaredSpace) -> FrameAudit:
    """The audit of a compiled frame: its guards (each asked as installed, or as written
    where torch's replacements decide it), the equalities torch derived, its runtime
    asserts, and the findings of :mod:`~verishape.audit.checks` and
    :mod:`~verishape.audit.stock_findings`, with the frame's decisions summarized."""
    facts = space.facts()
    written_space = space.written_space()  # for guards asked as written
    checks: list[Check] = []
    findings: list[Finding] = []
    index = space.frame.index
    guards = [(g.expr, checks_mod.user_line(g.sloc)) for g in space.env.guards if not checks_mod.is_value_guard(g.expr)]
    for expr, where in guards:
        rewritten = space.env.replace(expr)
        if rewritten.is_Boolean and not rewritten.free_symbols and expr.free_symbols:
            # This guard made (or is decided by) a replacement of input sizes: ask it as
            # written, over the inputs' own symbols.  The guard that states a replacement
            # is asked without it; another one (``8*s92 % s52 == 0`` once ``s92 == s52``)
            # with the replacements as premises: each of those is checked on its own, so
            # "implied" here means implied wherever the equalities hold, as installed.
            premises = written_space if checks_mod.states_replacement(space, expr) else facts
            c = checks_mod.check(space, "guard", expr, where, premises,
                                 checks_mod.other_guards(space, expr, as_written=True), as_written=True)
        else:
            c = checks_mod.check(space, "guard", expr, where, facts, checks_mod.other_guards(space, rewritten))
        checks.append(c)
    checks += checks_mod.tied_checks(space, written_space)
    for c in checks:
        if c.status != "implied":
            kind = {"not_implied": "guard_not_implied", "vacuous": "vacuous_proof"}.get(c.status, "guard_undecided")
            findings.append(Finding(kind, index, c.expr, c.source_line, c.counterexample,
                                    detail=c.isolation_note, isolation=c.isolation, also_breaks=c.also_breaks,
                                    isolation_note=c.isolation_note))
    asserts = [ra.expr for ras in space.env.deferred_runtime_asserts.values() for ra in ras]
    for expr in asserts:
        checks.append(checks_mod.check(space, "runtime_assert", expr, None, facts))
    findings += checks_mod.contradictions(space, facts, asserts)
    findings += checks_mod.refuted_checks(space)
    findings += checks_mod.vacuous_findings(space, checks)
    findings += stock_findings.specializations(space)
    findings += stock_findings.duck_sizing(space)
    fallbacks = checks_mod.fallbacks(space, facts + asserts, findings)
    if space.frame.error and space.frame.error_kind != NOT_COMPILED:  # that one ran eagerly: nothing to flag
        findings.append(Finding(space.frame.error_kind or "compile_failed", index, space.frame.error, None, None,
                                detail="the frame did not compile"))
    if space.frame.recompile_limit:
        findings.append(Finding("recompile_limit", index, space.frame.recompile_limit, None, None,
                                detail="later calls of this code ran eagerly: never compiled, so not audited"))
    declared = space.declared_lines()
    log = space.env.verishape_log
    minimizations = [{
        "stock_guards": [space.describe(g) for g in m.stock],
        "installed_guards": [space.describe(g) for g in (m.kept if m.applied else m.stock)],
        "dropped": [{"guard": space.describe(r.obligation.goal),
                     "implied_by": [space.describe(p) for p in r.obligation.premises]} for r in m.dropped],
        "rewritten": [{"guard": space.describe(old), "as": space.describe(new)}
                      for old, new in (m.rewritten.items() if m.applied else ())],
        "tightened_ranges": [{"range": space.describe(sympy.And(*t.facts())),
                              "folded": [space.describe(g) for g in t.folded],
                              "proof": t.proof.to_json()} for t in (m.tightened if m.applied else [])],
        "equivalence": m.equivalence.to_json() if m.equivalence else None,
        "applied": m.applied,
    } for m in log.minimizations]
    # Divisibility facts the compiler relied on (Inductor's masks, tt.divisibility):
    # each is a proof record; a claim without one was never relied on.
    divisibility = [{"fact": space.describe(r.obligation.goal if r.decided else sympy.Not(r.obligation.goal)),
                     "value": r.decided, "status": r.result.status, "kind": r.obligation.kind}
                    for r in log.records if r.obligation.goal.atoms(sympy.Mod, *_MODS)]
    return FrameAudit(space.frame, space.sources, declared, checks, findings, list(log.records), fallbacks,
                      minimizations, divisibility, checks_mod.value_guards(space), stock_findings.widenings(space))
