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

import solvers
from solvers.result import SolveResult
from verishape.sources import describe, symbol_sources

from .capture import Frame
from .space import DEFAULT_BACKED, DEFAULT_UNBACKED, Assumption, Bounds, bounds_from_assumption, declared_from_locals

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


@dataclasses.dataclass
class Finding:
    kind: str
    frame: int
    guard: str
    source_line: str | None
    counterexample: dict[str, int | float] | None
    detail: str = ""
    replay: dict[str, Any] | None = None


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
        self.sources = symbol_sources(self.env)
        self.symbol_of_source = {src: sym for sym in self.env.var_to_range
                                 for src in self.sources.get(str(sym), [])}
        self.declared_bounds = self._declared_bounds(assumptions)
        self.assumptions = [f for a in assumptions if (f := a.for_frame(self.symbol_of_source)) is not None]

    # ------------------------------------------------------------ declared space

    def _declared_bounds(self, assumptions: Sequence[Assumption]) -> dict[str, Bounds]:
        """Declarations intersect; an undeclared dimension gets stock torch's [2, oo)."""
        marked = declared_from_locals(self.frame.local_scope)
        out: dict[str, Bounds | None] = {src: marked.get(src) for src in self.symbol_of_source}
        for a in assumptions:
            for src, (lo, hi) in bounds_from_assumption(a).items():
                if src not in out:
                    continue
                old = out[src]
                if old is None:
                    out[src] = Bounds(lo, hi, f"--assume {a.text!r}")
                    continue
                lows = [v for v in (old.lower, lo) if v is not None]
                highs = [v for v in (old.upper, hi) if v is not None]
                out[src] = Bounds(max(lows) if lows else None, min(highs) if highs else None,
                                  f"{old.origin} and --assume {a.text!r}")
        return {src: b if b is not None else DEFAULT_BACKED for src, b in out.items()}

    def space_facts(self) -> list[sympy.Basic]:
        facts: list[sympy.Basic] = []
        for src, b in self.declared_bounds.items():
            sym = self.symbol_of_source[src]
            if b.lower is not None:
                facts.append(sympy.Le(b.lower, sym))
            if b.upper is not None:
                facts.append(sympy.Le(sym, b.upper))
        for sym in self.env.var_to_range:
            # A data-dependent size (no input source) that torch knows is a size.
            if str(sym) not in self.sources and self._is_size(sym):
                facts.append(sympy.Le(DEFAULT_UNBACKED.lower, sym))
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

    def check(self, kind: str, expr: sympy.Basic, where: str | None, premises: list[sympy.Basic]) -> Check:
        goal = self.env.replace(expr)
        result = self.prover.prove(goal, premises)
        if result.status == solvers.REFUTED:
            result = self.small_refutation(goal, premises, result)
        status = {solvers.PROVED: "implied", solvers.REFUTED: "not_implied"}.get(result.status, "undecided")
        cex = self.keyed(result.counterexample) if result.counterexample else None
        return Check(kind, describe(goal, self.env), where, status, result, cex)

    def run(self) -> FrameAudit:
        space = self.space_facts()
        checks: list[Check] = []
        findings: list[Finding] = []
        index = self.frame.index
        for g in self.env.guards:
            c = self.check("guard", g.expr, _where(g.sloc), space)
            checks.append(c)
            if c.status != "implied":
                kind = "guard_not_implied" if c.status == "not_implied" else "guard_undecided"
                findings.append(Finding(kind, index, c.expr, c.source_line, c.counterexample))
        asserts = [ra.expr for ras in self.env.deferred_runtime_asserts.values() for ra in ras]
        for expr in asserts:
            checks.append(self.check("runtime_assert", expr, None, space))
        findings += self._contradictions(space, asserts)
        findings += self._refuted_checks()
        findings += self._specializations()
        findings += self._duck_sizing()
        fallbacks = self._fallbacks(space + asserts, findings)
        if self.frame.error:
            findings.append(Finding(self.frame.error_kind or "compile_failed", index, self.frame.error, None, None,
                                    detail="the frame did not compile"))
        declared = [b.describe(src) for src, b in sorted(self.declared_bounds.items())]
        declared += [f"{describe(a, self.env)}  (--assume)" for a in self.assumptions
                     if len(a.free_symbols) > 1 or not isinstance(a, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt))]
        log = self.env.verishape_log
        minimizations = [{
            "stock_guards": [describe(g, self.env) for g in m.stock],
            "installed_guards": [describe(g, self.env) for g in (m.kept if m.applied else m.stock)],
            "dropped": [{"guard": describe(r.obligation.goal, self.env),
                         "implied_by": [describe(p, self.env) for p in r.obligation.premises]} for r in m.dropped],
            "rewritten": [{"guard": describe(old, self.env), "as": describe(new, self.env)}
                          for old, new in (m.rewritten.items() if m.applied else ())],
            "tightened_ranges": [{"range": describe(sympy.And(*t.facts()), self.env),
                                  "folded": [describe(g, self.env) for g in t.folded],
                                  "proof": t.proof.to_json()} for t in (m.tightened if m.applied else [])],
            "equivalence": m.equivalence.to_json() if m.equivalence else None,
            "applied": m.applied,
        } for m in log.minimizations]
        # Divisibility facts the compiler relied on (Inductor's masks, tt.divisibility):
        # each is a proof record; a claim without one was never relied on.
        divisibility = [{"fact": describe(r.obligation.goal if r.decided else sympy.Not(r.obligation.goal), self.env),
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
            entry = {"expr": describe(expr, self.env), "assumed": value, "source_line": where,
                     "status": r.status, "kind": kind.replace("_unproved", ""),
                     "counterexample": self.keyed(r.counterexample) if r.counterexample else None}
            out.append(entry)
            if r.status != solvers.PROVED:
                findings.append(Finding(kind, self.frame.index, f"{entry['expr']} assumed {value}", where,
                                        entry["counterexample"], detail=detail))
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
