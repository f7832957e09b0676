"""Audit one compiled frame against the declared input space.

For each shape guard and runtime assert: is it implied by the declared space (then the
artifact is valid for every declared input and the proof is kept), or not (then a small
counterexample inside the declared space, keyed by input sources, shows an input that
fails it)?  Plus the kinds stock torch adds on its own: 0/1 specialization and duck-size
equalities, reported only when the declared space admits the values they exclude;
contradictory ``torch._check`` facts; and ``guard_or_*`` fallbacks taken without proof.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy
from torch.utils._sympy import functions as tf

from verishape import solvers
from verishape.solvers import concrete
from verishape.proofs.result import SolveResult
from verishape import facts as facts_mod
from verishape.cli_errors import UsageError
from verishape.sources import describe, symbol_sources

from .frame import NOT_COMPILED, Frame

from .space import (DEFAULT_BACKED, DEFAULT_UNBACKED, Assumption, Bounds, bounds_from_assumption, contradiction,
                    declared_from_locals, linear_bound, short)

_MODS = (tf.Mod, tf.PythonMod, tf.ModularIndexing)

#: Bounds tried in turn to find a counterexample small enough for real tensors.
SMALL_BOUNDS = (8, 16, 64, 256, 1024, 4096)


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


def _where(sloc: Any) -> str | None:
    if sloc is None:
        return None
    return getattr(sloc, "maybe_user_loc", None) or str(sloc)


class FrameAuditor:
    def __init__(self, frame: Frame, assumptions: Sequence[Assumption], prover: solvers.Prover) -> None:
        self.frame = frame
        self.env = frame.env
        self.prover = prover
        self.sources = self._symbol_sources()
        self.symbol_of_source = {src: sym for sym in self.env.var_to_range
                                 for src in self.sources.get(str(sym), [])}
        self.declared_bounds = self._declared_bounds(assumptions)
        #: each --assume that names only this frame's inputs, with its fact in the frame's symbols
        self.frame_assumptions = [(a, f) for a in assumptions if (f := a.for_frame(self.symbol_of_source)) is not None]
        self.assumptions = [f for _, f in self.frame_assumptions]
        self.prover = self._plain_prover(prover)

    def _plain_prover(self, prover: solvers.Prover) -> facts_mod.PlainProver:
        """The audit's axioms: a size's sign comes from the declared space, never from
        SymPy's ``positive``, which torch keeps on backed sizes whose range admits 0
        (``backed_size_oblivious``, a declared ``min=0``).  Every symbol the space bounds
        from below is asked about as a plain integer; others keep torch's declaration."""
        lower_bounded = facts_mod.lower_bounded(self.space_facts())
        to_plain = facts_mod.plain_symbols(list(self.env.var_to_range), lower_bounded)
        if to_plain is None:
            raise RuntimeError("internal error (a verishape bug): two symbols of one frame share a name")
        return facts_mod.PlainProver(prover, to_plain)

    # ------------------------------------------------------------ declared space

    def _declared_bounds(self, assumptions: Sequence[Assumption]) -> dict[str, Bounds]:
        """Declarations intersect (``mark_dynamic``/``mark_unbacked`` and every ``--assume``,
        in any order and form).  An undeclared dimension keeps stock torch's [2, oo) unless
        an ``--assume`` gives it a lower bound (declaring sizes 0 or 1 on purpose widens the
        default); an upper bound alone never moves the default lower bound."""
        marked = self._marked()
        stated: dict[str, tuple[list[int], list[int], list[str]]] = {}
        for a in assumptions:
            for src, (lo, hi) in bounds_from_assumption(a).items():
                if src in self.symbol_of_source:
                    lows, highs, texts = stated.setdefault(src, ([], [], []))
                    lows += [lo] if lo is not None else []
                    highs += [hi] if hi is not None else []
                    texts.append(f"--assume {short(a.text)!r}")
        out: dict[str, Bounds] = {}
        for src in self.symbol_of_source:
            base, (lows, highs, texts) = marked.get(src), stated.get(src, ([], [], []))
            if not texts:
                out[src] = base or DEFAULT_BACKED
                continue
            if base is None:
                # Undeclared: the default lower bound stays unless a fact states another.
                base = Bounds(None if lows else DEFAULT_BACKED.lower, None, "stock torch's lower bound 2")
            lows += [base.lower] if base.lower is not None else []
            highs += [base.upper] if base.upper is not None else []
            origin = " and ".join(([base.origin] if base.lower is not None or base.upper is not None else []) + texts)
            out[src] = Bounds(max(lows) if lows else None, min(highs) if highs else None, origin)
        return out

    def describe(self, expr: sympy.Basic) -> str:
        """``expr`` in the words of the report: each sized symbol as its input source."""
        return describe(expr, self.env)

    def _symbol_sources(self) -> dict[str, list[str]]:
        """Symbol -> the input sizes it stands for (an export names them its own way)."""
        return symbol_sources(self.env)

    def _marked(self) -> dict[str, Bounds]:
        """Bounds the script declared on the frame's inputs (``mark_dynamic``, ...)."""
        return declared_from_locals(self.frame.local_scope)

    def labelled_space(self) -> list[tuple[str, sympy.Basic]]:
        """The declared space's facts about input sizes, each with the words that name it
        for the user (a bound with its origin, an ``--assume`` with its text)."""
        out: list[tuple[str, sympy.Basic]] = []
        for src, b in sorted(self.declared_bounds.items()):
            sym = self.symbol_of_source[src]
            if b.lower is not None:
                out.append((f"{b.lower} <= {src} ({b.origin})", sympy.Le(b.lower, sym, evaluate=False)))
            if b.upper is not None:
                out.append((f"{src} <= {b.upper} ({b.origin})", sympy.Le(sym, b.upper, evaluate=False)))
        out += [(f"--assume {short(a.text)!r}", f) for a, f in self.frame_assumptions]
        return out

    def require_space(self) -> None:
        """The declared space must hold at least one input, and every ``--assume`` must have
        a value on all of it: over an empty space every guard would be "implied" and the
        audit would say "no findings" about nothing.  Raises UsageError naming the facts."""
        where = f"frame {self.frame.index} ({self.frame.name}, {self.frame.location})"
        labelled = self.labelled_space()
        core = contradiction(labelled, self.prover.prove)
        if core is not None:
            raise UsageError(f"the declared input space of {where} is empty: no input satisfies "
                             f"{' and '.join(dict.fromkeys(core))}")
        # A divisor is proved nonzero from the bounds and the facts that cannot raise: a fact
        # with a zero divisor reads as false there, so it would exclude its own bad points.
        safe = [f for (a, f) in self.frame_assumptions if not a.divisors]
        premises = [f for label, f in labelled if not label.startswith("--assume")] + safe
        for a, _ in self.frame_assumptions:
            for d in a.divisors_for_frame(self.symbol_of_source):
                r = self.prover.prove(sympy.Ne(d, 0), premises)
                if r.status != solvers.PROVED:
                    at = f" (e.g. at {self.keyed(r.counterexample)})" if r.counterexample else ""
                    raise UsageError(f"--assume {short(a.text)!r} may divide by zero in {where}: "
                                     f"{self.describe(d)} can be 0 in the declared space{at}, where the "
                                     f"fact has no value")

    def declared_lines(self) -> list[str]:
        """The declared space as the report shows it: one line per bounded size, then the
        facts that are not simple bounds (a bound written another way shows as the bound)."""
        lines = [b.describe(src) for src, b in sorted(self.declared_bounds.items())]
        for _, fact in self.frame_assumptions:
            lines += [f"{self.describe(part)}  (--assume)" for part in sympy.And.make_args(fact)
                      if part is not sympy.true and linear_bound(part) is None]
        return list(dict.fromkeys(lines))

    def space_facts(self) -> list[sympy.Basic]:
        facts: list[sympy.Basic] = []
        for src, b in self.declared_bounds.items():
            sym = self.symbol_of_source[src]
            # Unevaluated: SymPy would fold 0 <= s to True for a positive s (see _plain_prover).
            if b.lower is not None:
                facts.append(sympy.Le(b.lower, sym, evaluate=False))
            if b.upper is not None:
                facts.append(sympy.Le(sym, b.upper, evaluate=False))
        for sym in self.env.var_to_range:
            # A data-dependent size (no input source) that torch knows is a size.
            if str(sym) not in self.sources and self._is_size(sym):
                facts.append(sympy.Le(DEFAULT_UNBACKED.lower, sym, evaluate=False))
        return [f for f in facts if f is not sympy.true] + self.assumptions

    def _is_size(self, sym: sympy.Symbol) -> bool:
        return sym in getattr(self.env, "size_like", set())

    # ------------------------------------------------------------ counterexamples

    def keyed(self, cex: dict[str, int | float]) -> dict[str, int | float]:
        """Symbol values as input-source values (every source of a duck-sized symbol)."""
        out: dict[str, int | float] = {}
        for name, value in cex.items():
            for src in self.sources.get(name, [name]):
                out[src] = value
        return out

    def small_refutation(self, goal: sympy.Basic, premises: list[sympy.Basic], result: SolveResult) -> SolveResult:
        symbols = sorted(goal.free_symbols.union(*(p.free_symbols for p in premises)), key=str)
        for bound in SMALL_BOUNDS:
            capped = premises + [sympy.Le(s, bound) for s in symbols] + [sympy.Ge(s, -bound) for s in symbols]
            r = self.prover.prove(goal, capped)
            if r.status == solvers.REFUTED:
                return r
        return result

    # ------------------------------------------------------------ the audit

    def check(self, kind: str, expr: sympy.Basic, where: str | None, premises: list[sympy.Basic],
              others: list[sympy.Basic] | None = None) -> Check:
        """Implied or not by ``premises`` (the declared space) alone.  When not, and
        ``others`` (the frame's other guards, :meth:`other_guards`) are given, the
        counterexample is solved against them too, so that it breaks this guard only."""
        goal = self.env.replace(expr)
        result = self.prover.prove(goal, premises)
        if result.status == solvers.REFUTED:
            result = self.small_refutation(goal, premises, result)
        status = {solvers.PROVED: "implied", solvers.REFUTED: "not_implied"}.get(result.status, "undecided")
        if result.status == solvers.PROVED and result.vacuous:
            status = "vacuous"  # the premises contradict each other: the proof says nothing
        cex = self.keyed(result.counterexample) if result.counterexample else None
        check = Check(kind, self.describe(goal), where, status, result, cex)
        if result.status == solvers.REFUTED and others is not None:
            self._isolate(check, goal, premises, others)
        return check

    def _isolate(self, check: Check, goal: sympy.Basic, premises: list[sympy.Basic],
                 others: list[sympy.Basic]) -> None:
        """Find an input of the declared space where every other guard of the frame is
        defined and true and this one is not; or say that none exists.  (A premise that
        raises at a point is not satisfied there, so a guard dividing by a size another
        guard keeps nonzero cannot be broken "alone" by making the divisor zero.)"""
        alone = self.prover.prove(goal, premises + others)
        if alone.status == solvers.REFUTED:
            alone = self.small_refutation(goal, premises + others, alone)
        check.isolation_result = alone
        if alone.status == solvers.REFUTED and alone.counterexample:
            check.isolation, check.counterexample = "only_this_guard", self.keyed(alone.counterexample)
            return
        check.also_breaks = self._broken_at(others, check.result.counterexample or {})
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

    def _broken_at(self, guards: list[sympy.Basic], values: dict[str, int | float]) -> list[str]:
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
                out.append(self.describe(g))
        return out

    def other_guards(self, goal: sympy.Basic) -> list[sympy.Basic]:
        """The frame's guards other than ``goal``, plus the ``2 <= size`` range checks of
        0/1 specialization: what an input must satisfy to break ``goal`` alone.

        These are the stock guards, not the minimized list: minimization may drop a guard
        because the installed range check, which torch narrows with that very guard
        (``y > 16`` makes it ``17 <= y``), implies it, so the minimized list alone would
        let a counterexample break that guard too.  An input satisfying every other stock
        guard satisfies every other installed check (the installed set is proved
        equivalent to the stock one, and its rewrites and folded ranges are made of stock
        guards)."""
        others = [g for g in dict.fromkeys(self.env.replace(g.expr) for g in self.env.guards) if g != goal]
        symbols = goal.free_symbols.union(*(g.free_symbols for g in others))
        for sym, vr in self.env.var_to_range.items():
            lower = getattr(vr, "lower", None)
            if sym in symbols and self.sources.get(str(sym)) and lower is not None and lower >= 2:
                others.append(sympy.Le(2, sym, evaluate=False))
        return [part for g in others for part in sympy.And.make_args(g)]

    def run(self) -> FrameAudit:
        space = self.space_facts()
        checks: list[Check] = []
        findings: list[Finding] = []
        index = self.frame.index
        for g in self.env.guards:
            c = self.check("guard", g.expr, _where(g.sloc), space, self.other_guards(self.env.replace(g.expr)))
            checks.append(c)
            if c.status != "implied":
                kind = {"not_implied": "guard_not_implied", "vacuous": "vacuous_proof"}.get(c.status, "guard_undecided")
                findings.append(Finding(kind, index, c.expr, c.source_line, c.counterexample,
                                        detail=c.isolation_note, isolation=c.isolation, also_breaks=c.also_breaks,
                                        isolation_note=c.isolation_note))
        asserts = [ra.expr for ras in self.env.deferred_runtime_asserts.values() for ra in ras]
        for expr in asserts:
            checks.append(self.check("runtime_assert", expr, None, space))
        findings += self._contradictions(space, asserts)
        findings += self._refuted_checks()
        findings += self._vacuous_findings(checks)
        findings += self._specializations()
        findings += self._duck_sizing()
        fallbacks = self._fallbacks(space + asserts, findings)
        if self.frame.error and self.frame.error_kind != NOT_COMPILED:  # that one ran eagerly: nothing to flag
            findings.append(Finding(self.frame.error_kind or "compile_failed", index, self.frame.error, None, None,
                                    detail="the frame did not compile"))
        if self.frame.recompile_limit:
            findings.append(Finding("recompile_limit", index, self.frame.recompile_limit, None, None,
                                    detail="later calls of this code ran eagerly: never compiled, so not audited"))
        declared = self.declared_lines()
        log = self.env.verishape_log
        minimizations = [{
            "stock_guards": [self.describe(g) for g in m.stock],
            "installed_guards": [self.describe(g) for g in (m.kept if m.applied else m.stock)],
            "dropped": [{"guard": self.describe(r.obligation.goal),
                         "implied_by": [self.describe(p) for p in r.obligation.premises]} for r in m.dropped],
            "rewritten": [{"guard": self.describe(old), "as": self.describe(new)}
                          for old, new in (m.rewritten.items() if m.applied else ())],
            "tightened_ranges": [{"range": self.describe(sympy.And(*t.facts())),
                                  "folded": [self.describe(g) for g in t.folded],
                                  "proof": t.proof.to_json()} for t in (m.tightened if m.applied else [])],
            "equivalence": m.equivalence.to_json() if m.equivalence else None,
            "applied": m.applied,
        } for m in log.minimizations]
        # Divisibility facts the compiler relied on (Inductor's masks, tt.divisibility):
        # each is a proof record; a claim without one was never relied on.
        divisibility = [{"fact": self.describe(r.obligation.goal if r.decided else sympy.Not(r.obligation.goal)),
                         "value": r.decided, "status": r.result.status, "kind": r.obligation.kind}
                        for r in log.records if r.obligation.goal.atoms(sympy.Mod, *_MODS)]
        return FrameAudit(self.frame, self.sources, declared, checks, findings, list(log.records), fallbacks,
                          minimizations, divisibility)

    def _contradictions(self, space: list[sympy.Basic], asserts: list[sympy.Basic]) -> list[Finding]:
        if not asserts:
            return []
        r = self.prover.prove(sympy.false, space + asserts)
        if r.status == solvers.PROVED:
            text = " and ".join(map(str, asserts))
            return [Finding("contradictory_facts", self.frame.index, text, None, None,
                            detail="no input in the declared space satisfies these runtime asserts")]
        return []

    def _vacuous_findings(self, checks: list[Check]) -> list[Finding]:
        """Proofs that hold only because their premises contradict each other: a runtime
        assert "implied" that way, and the vacuous proofs VeriShapeEnv refused while
        compiling (it then kept stock behaviour, but the contradiction means a premise or
        translation bug worth reporting).  Guards are reported where they are checked."""
        why = "proved only because the premises contradict each other: the proof says nothing"
        out = [Finding("vacuous_proof", self.frame.index, c.expr, c.source_line, None, detail=why)
               for c in checks if c.kind == "runtime_assert" and c.status == "vacuous"]
        for expr, where in getattr(self.env.verishape_log, "vacuous", ()):
            out.append(Finding("vacuous_proof", self.frame.index, self.describe(expr), where, None,
                               detail=f"while compiling: {why}; verishape refused it and kept stock behaviour"))
        return out

    def _refuted_checks(self) -> list[Finding]:
        """A ``torch._check`` the solver proved false from earlier facts: the facts
        contradict each other, and tracing stopped there."""
        out = []
        for rec in self.env.verishape_log.records:
            if rec.obligation.kind == "assert_discharged" and rec.decided is False:
                facts = " and ".join(map(str, rec.obligation.premises))
                out.append(Finding("contradictory_facts", self.frame.index, str(sympy.Not(rec.obligation.goal)),
                                   rec.obligation.source, None, detail=f"this torch._check is refuted by earlier facts: {facts}"))
        return out

    def _specializations(self) -> list[Finding]:
        out = []
        for src, b in self.declared_bounds.items():
            sym = self.symbol_of_source[src]
            vr = self.env.var_to_range.get(sym)
            lowest = b.lower if b.lower is not None else 0
            if vr is not None and lowest < 2 <= int(vr.lower) and (b.upper is None or b.upper >= lowest):
                out.append(Finding("specialization_01", self.frame.index, f"2 <= {src}", None, {src: lowest},
                                   detail="sizes 0 and 1 are specialized: this artifact requires >= 2"))
        return out

    def _duck_sizing(self) -> list[Finding]:
        out = []
        for srcs in self.sources.values():
            first, *rest = srcs
            for other in rest:
                pair = _distinct_values(self.declared_bounds.get(first, DEFAULT_BACKED),
                                        self.declared_bounds.get(other, DEFAULT_BACKED))
                if pair is not None:
                    out.append(Finding("duck_sizing", self.frame.index, f"Eq({first}, {other})", None,
                                       {first: pair[0], other: pair[1]},
                                       detail="equal at trace time, so the artifact requires them equal"))
        return out

    def _fallbacks(self, premises: list[sympy.Basic], findings: list[Finding]) -> list[dict[str, Any]]:
        """``guard_or_*`` fallbacks and size-oblivious answers, each proved sound for the
        whole declared space or flagged with the values where it is wrong."""
        log = self.env.verishape_log
        taken = [(e, v, w, "fallback_unproved", "guard_or_* took its fallback; the general path was used")
                 for e, v, w in log.fallbacks]
        taken += [(e, v, w, "size_oblivious_unproved", "decided assuming sizes >= 2 (size-oblivious)")
                  for e, (v, w) in log.size_oblivious.items() if e.free_symbols]
        out = []
        for expr, value, where, kind, detail in taken:
            goal = expr if value else sympy.Not(expr)
            r = self.prover.prove(goal, premises)
            vacuous = r.status == solvers.PROVED and r.vacuous  # premises contradict: proves nothing
            entry = {"expr": self.describe(expr), "assumed": value, "source_line": where,
                     "status": "vacuous" if vacuous else r.status, "kind": kind.replace("_unproved", ""),
                     "counterexample": self.keyed(r.counterexample) if r.counterexample else None}
            out.append(entry)
            if r.status != solvers.PROVED or vacuous:
                why = detail + ("; proved only vacuously (the premises contradict each other)" if vacuous else "")
                findings.append(Finding(kind, self.frame.index, f"{entry['expr']} assumed {value}", where,
                                        entry["counterexample"], detail=why))
        return out


def _distinct_values(a: Bounds, b: Bounds) -> tuple[int, int] | None:
    """Two different values, one in each declared range, if any exist."""
    va = a.lower if a.lower is not None else 2
    if a.upper is not None and va > a.upper:
        return None
    base = b.lower if b.lower is not None else 2
    for vb in (base, base + 1):
        if vb != va and (b.upper is None or vb <= b.upper):
            return va, vb
    return None
