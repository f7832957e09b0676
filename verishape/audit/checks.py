"""Findings built from one frame's own checks, against its declared space
(:class:`verishape.audit.declared.DeclaredSpace`): each shape guard and runtime assert is
implied by the space or not (then with a counterexample, isolated from the frame's other
guards where one exists); ``torch._check`` facts that contradict each other; proofs that
hold only vacuously; and the ``guard_or_*`` fallbacks and size-oblivious answers, each
proved sound for the whole space or flagged.  Functions of the space: they keep no state.
"""

from __future__ import annotations

from typing import Any

import sympy

import verishape.solvers as solvers
from verishape.solvers import concrete
from verishape.core.sources import symbol_sources

from .declared import DeclaredSpace
from .records import Check, Finding


def user_line(sloc: Any) -> str | None:
    """The user's line a guard was recorded at."""
    if sloc is None:
        return None
    return getattr(sloc, "maybe_user_loc", None) or str(sloc)


def check(space: DeclaredSpace, kind: str, expr: sympy.Basic, where: str | None, premises: list[sympy.Basic],
          others: list[sympy.Basic] | None = None, *, as_written: bool = False) -> Check:
    """Implied or not by ``premises`` (the declared space) alone.  When not, and
    ``others`` (the frame's other guards, :func:`other_guards`) are given, the
    counterexample is solved against them too, so that it breaks this guard only.
    ``as_written``: ask about ``expr`` itself, not rewritten with torch's replacements
    (a guard that made a replacement reads ``True`` once rewritten with it)."""
    goal = expr if as_written else space.env.replace(expr)
    result = space.prove(goal, premises)
    if result.status == solvers.REFUTED:
        result = space.small_refutation(goal, premises, result)
    status = {solvers.PROVED: "implied", solvers.REFUTED: "not_implied"}.get(result.status, "undecided")
    if result.status == solvers.PROVED and result.vacuous:
        status = "vacuous"  # the premises contradict each other: the proof says nothing
    cex = space.keyed(result.counterexample) if result.counterexample else None
    out = Check(kind, space.describe(goal), where, status, result, cex)
    if result.status == solvers.REFUTED and others is not None:
        isolate(space, out, goal, premises, others)
    return out


def isolate(space: DeclaredSpace, check: Check, goal: sympy.Basic, premises: list[sympy.Basic],
            others: list[sympy.Basic]) -> None:
    """Find an input of the declared space where every other guard of the frame is
    defined and true and this one is not; or say that none exists.  (A premise that
    raises at a point is not satisfied there, so a guard dividing by a size another
    guard keeps nonzero cannot be broken "alone" by making the divisor zero.)"""
    alone = space.prove(goal, premises + others)
    if alone.status == solvers.REFUTED:
        alone = space.small_refutation(goal, premises + others, alone)
    check.isolation_result = alone
    if alone.status == solvers.REFUTED and alone.counterexample:
        check.isolation, check.counterexample = "only_this_guard", space.keyed(alone.counterexample)
        return
    check.also_breaks = broken_at(space, others, check.result.counterexample or {})
    shown = f"; the counterexample shown also breaks {'; '.join(check.also_breaks)}" if check.also_breaks else ""
    if alone.status == solvers.PROVED:
        check.isolation = "also_breaks_others"
        why = ("the frame's other guards admit no input of the declared space" if alone.vacuous
               else "every input that breaks it also breaks another guard of the frame")
        check.isolation_note = f"no input in the declared space breaks this guard alone: {why}{shown}"
    else:
        check.isolation = "unknown"
        check.isolation_note = (f"the solver found no input that breaks this guard alone ({alone.status}"
                                f"{': ' + alone.reason if alone.reason else ''}){shown}")


def broken_at(space: DeclaredSpace, guards: list[sympy.Basic], values: dict[str, int | float]) -> list[str]:
    """The guards that are false or raise at ``values`` (symbol name -> value)."""
    out = []
    for g in guards:
        env = {s: values[str(s)] for s in g.free_symbols if str(s) in values}
        if len(env) < len(g.free_symbols):
            continue
        try:
            holds = concrete.evaluate(g, env) is True
        except concrete.Undefined:
            holds = False
        except concrete.Unevaluable:
            continue
        if not holds:
            out.append(space.describe(g))
    return out


def other_guards(space: DeclaredSpace, goal: sympy.Basic, *, as_written: bool = False) -> list[sympy.Basic]:
    """The frame's guards other than ``goal``, plus the ``2 <= size`` range checks of
    0/1 specialization: what an input must satisfy to break ``goal`` alone.

    These are the stock guards, not the minimized list: minimization may drop a guard
    because the installed range check, which torch narrows with that very guard
    (``y > 16`` makes it ``17 <= y``), implies it, so the minimized list alone would
    let a counterexample break that guard too.  An input satisfying every other stock
    guard satisfies every other installed check (the installed set is proved
    equivalent to the stock one, and its rewrites and folded ranges are made of stock
    guards)."""
    shape_guards = [g for g in space.env.guards if not is_value_guard(g.expr)]
    written = (g.expr if as_written else space.env.replace(g.expr) for g in shape_guards)
    others = [g for g in dict.fromkeys(written) if g != goal]
    symbols = goal.free_symbols.union(*(g.free_symbols for g in others))
    for sym, vr in space.env.var_to_range.items():
        lower = getattr(vr, "lower", None)
        if sym in symbols and space.sources.get(str(sym)) and lower is not None and lower >= 2:
            others.append(sympy.Le(2, sym, evaluate=False))
    return [part for g in others for part in sympy.And.make_args(g)]


def is_value_guard(expr: sympy.Basic) -> bool:
    """A guard on a Python float (a symbol that is not an integer): a module's ``eps``,
    a dropout ``p``, an attention scale, traced as a SymFloat and specialized back."""
    return any(not s.is_integer for s in expr.free_symbols)


def value_guards(space: DeclaredSpace) -> list[dict[str, Any]]:
    """Guards on float values, reported apart from shape guards and not audited: they
    are about the value of an attribute or argument (``eps == 1e-05``), not about the
    input shapes the declared space describes, so "implied by the declared space" has
    no meaning for them.  They are still installed guards (a new ``eps`` recompiles),
    so a deployment that skips guard evaluation must know them: listed, not dropped."""
    names = symbol_sources(space.env)
    out = []
    for g in space.env.guards:
        if is_value_guard(g.expr):
            srcs = sorted({src for sym in g.expr.free_symbols for src in names.get(str(sym), [])})
            out.append({"guard": space.describe(g.expr), "source_line": user_line(g.sloc), "sources": srcs})
    return out


def states_replacement(space: DeclaredSpace, expr: sympy.Basic) -> bool:
    """Whether ``expr`` is the equality of one input replacement (either side first)."""
    if not isinstance(expr, sympy.Eq):
        return False
    diff = sympy.expand(expr.lhs - expr.rhs)
    return any(sympy.expand(eq.lhs - eq.rhs) in (diff, -diff) for eq in space.tied_equalities())


def tied_checks(space: DeclaredSpace, facts: list[sympy.Basic]) -> list[Check]:
    """Each input replacement torch made without a guard that states it (its guard is
    checked as written in :func:`verishape.audit.analyze.audit_frame`): the installed guards check it as an equality of
    sources, so it is audited as a guard of its own."""
    written = [g.expr for g in space.env.guards]
    out = []
    for eq in space.tied_equalities():
        diff = sympy.expand(eq.lhs - eq.rhs)
        if any(isinstance(w, sympy.Eq) and sympy.expand(w.lhs - w.rhs) in (diff, -diff) for w in written):
            continue  # that guard is checked as written
        out.append(check(space, "guard", eq, "an equality of input sizes torch derived while tracing", facts,
                         other_guards(space, eq, as_written=True), as_written=True))
    return out


def contradictions(space: DeclaredSpace, facts: list[sympy.Basic], asserts: list[sympy.Basic]) -> list[Finding]:
    if not asserts:
        return []
    if space.empty(facts + asserts):
        text = " and ".join(map(str, asserts))
        return [Finding("contradictory_facts", space.frame.index, text, None, None,
                        detail="no input in the declared space satisfies these runtime asserts")]
    return []


def vacuous_findings(space: DeclaredSpace, checks: list[Check]) -> list[Finding]:
    """Proofs that hold only because their premises contradict each other: a runtime
    assert "implied" that way, and the vacuous proofs VeriShapeEnv refused while
    compiling (it then kept stock behaviour, but the contradiction means a premise or
    translation bug worth reporting).  Guards are reported where they are checked."""
    why = "proved only because the premises contradict each other: the proof says nothing"
    out = [Finding("vacuous_proof", space.frame.index, c.expr, c.source_line, None, detail=why)
           for c in checks if c.kind == "runtime_assert" and c.status == "vacuous"]
    for expr, where in getattr(space.env.verishape_log, "vacuous", ()):
        out.append(Finding("vacuous_proof", space.frame.index, space.describe(expr), where, None,
                           detail=f"while compiling: {why}; verishape refused it and kept stock behaviour"))
    return out


def refuted_checks(space: DeclaredSpace) -> list[Finding]:
    """A ``torch._check`` the solver proved false from earlier facts: the facts
    contradict each other, and tracing stopped there."""
    out = []
    for rec in space.env.verishape_log.records:
        if rec.obligation.kind == "assert_discharged" and rec.decided is False:
            facts = " and ".join(map(str, rec.obligation.premises))
            out.append(Finding("contradictory_facts", space.frame.index, str(sympy.Not(rec.obligation.goal)),
                               rec.obligation.source, None, detail=f"this torch._check is refuted by earlier facts: {facts}"))
    return out


def fallbacks(space: DeclaredSpace, premises: list[sympy.Basic], findings: list[Finding]) -> list[dict[str, Any]]:
    """``guard_or_*`` fallbacks and size-oblivious answers, each proved sound for the
    whole declared space or flagged with the values where it is wrong."""
    log = space.env.verishape_log
    taken = [(e, v, w, "fallback_unproved", "guard_or_* took its fallback; the general path was used")
             for e, v, w in log.fallbacks]
    taken += [(e, v, w, "size_oblivious_unproved", "decided assuming sizes >= 2 (size-oblivious)")
              for e, (v, w) in log.size_oblivious.items() if e.free_symbols]
    out = []
    for expr, value, where, kind, detail in taken:
        goal = expr if value else sympy.Not(expr)
        r = space.prove(goal, premises)
        vacuous = r.status == solvers.PROVED and r.vacuous  # premises contradict: proves nothing
        entry = {"expr": space.describe(expr), "assumed": value, "source_line": where,
                 "status": "vacuous" if vacuous else r.status, "kind": kind.replace("_unproved", ""),
                 "counterexample": space.keyed(r.counterexample) if r.counterexample else None}
        out.append(entry)
        if r.status != solvers.PROVED or vacuous:
            why = detail + ("; proved only vacuously (the premises contradict each other)" if vacuous else "")
            findings.append(Finding(kind, space.frame.index, f"{entry['expr']} assumed {value}", where,
                                    entry["counterexample"], detail=why))
    return out
