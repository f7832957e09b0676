"""Audit one compiled frame against the declared input space.

For each shape guard and runtime assert: is it implied by the declared space (then the
artifact is valid for every declared input and the proof is kept), or not (then a small
counterexample inside the declared space, keyed by input sources, shows an input that
fails it)?  Plus the kinds stock torch adds on its own: 0/1 specialization and duck-size
equalities, reported only when the declared space admits the values they exclude;
contradictory ``torch._check`` facts; and ``guard_or_*`` fallbacks taken without proof.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
from torch.utils._sympy import functions as tf

import verishape.solvers as solvers
from verishape.solvers import concrete
from verishape.proofs.result import SolveResult
from verishape.core import premises as premises_mod
from verishape.core.errors import UsageError
from verishape.core.sources import describe, symbol_sources
from verishape.proofs.kinds import Decision

from .frame import NOT_COMPILED, Frame
from .records import Check, Finding, FrameAudit
from .stock_findings import StockFindings

from .space import (DEFAULT_BACKED, DEFAULT_UNBACKED, Assumption, Bounds, bounds_from_assumption, contradiction,
                    declared_from_locals, linear_bound, short)

_MODS = (tf.Mod, tf.PythonMod, tf.ModularIndexing)

#: Bounds tried in turn to find a counterexample small enough for real tensors.
SMALL_BOUNDS = (8, 16, 64, 256, 1024, 4096)


def user_line(sloc: Any) -> str | None:
    """The user's line a guard was recorded at."""
    if sloc is None:
        return None
    return getattr(sloc, "maybe_user_loc", None) or str(sloc)


class FrameAuditor(StockFindings):
    def __init__(self, frame: Frame, assumptions: Sequence[Assumption], prover: solvers.Prover) -> None:
        self.frame = frame
        self.env = frame.env
        self.solver = prover
        self.sources = self._symbol_sources()
        self.symbol_of_source = {src: sym for sym in self.env.var_to_range
                                 for src in self.sources.get(str(sym), [])}
        self.declared_bounds = self._declared_bounds(assumptions)
        #: each --assume that names only this frame's inputs, with its fact in the frame's symbols
        self.frame_assumptions = [(a, f) for a in assumptions if (f := a.for_frame(self.symbol_of_source)) is not None]
        self.assumptions = [f for _, f in self.frame_assumptions]
        self.to_plain = self._plain_symbols()

    def _plain_symbols(self) -> dict[sympy.Symbol, sympy.Symbol]:
        """The audit's axioms: a size's sign comes from the declared space, never from
        SymPy's ``positive``, which torch keeps on backed sizes whose range admits 0
        (``backed_size_oblivious``, a declared ``min=0``).  Every symbol the space bounds
        from below is asked about as a plain integer; others keep torch's declaration."""
        to_plain = premises_mod.plain_symbols(list(self.env.var_to_range), premises_mod.lower_bounded(self.space_facts()))
        if to_plain is None:
            raise RuntimeError("internal error (a verishape bug): two symbols of one frame share a name")
        return to_plain

    def prove(self, goal: object, premises: Sequence[object] = ()) -> solvers.SolveResult:
        """Whether ``premises`` imply ``goal``, over the audit's plain symbols (any answer:
        a refutation's counterexample is a finding)."""
        return premises_mod.Premises.stated(premises, self.to_plain).decide(goal, Decision.AUDIT, prover=self.solver).result

    def empty(self, facts: Sequence[object]) -> bool:
        """Whether no input satisfies ``facts`` (over the audit's plain symbols), proved."""
        return premises_mod.Premises.stated(facts, self.to_plain).empty(prover=self.solver)

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
        return self._share_declarations(out, marked, stated)

    def _share_declarations(self, bounds: dict[str, Bounds], marked: dict[str, Bounds],
                            stated: dict[str, Any]) -> dict[str, Bounds]:
        """A declaration on one source of a size the artifact ties to others (duck sizing,
        ``shape_id``, a replacement by a plain symbol) declares that size: an undeclared
        source of the same group takes it instead of stock torch's default ``[2, oo)``.
        (Else ``mark_dynamic(input_ids, 0, min=1)`` would be cancelled by the default of an
        undeclared ``attention_mask`` that must have the same batch.)"""
        for group in self.size_groups():
            declared = [src for src in group if src in marked or src in stated]
            if not declared:
                continue
            first = bounds[declared[0]]
            for src in group:
                if src not in marked and src not in stated:
                    bounds[src] = Bounds(first.lower, first.upper, f"the same size as {declared[0]}: {first.origin}")
        return bounds

    def describe(self, expr: sympy.Basic) -> str:
        """``expr`` in the words of the report: each sized symbol as its input source."""
        return describe(expr, self.env)

    def _symbol_sources(self) -> dict[str, list[str]]:
        """Symbol -> the input sizes it stands for (an export names them its own way).
        Only integer symbols: a float symbol (a module's ``eps`` traced as a SymFloat) is
        a value, not a size, and has no place in the declared space of shapes."""
        integer = {str(s) for s in self.env.var_to_range if s.is_integer}
        return {name: srcs for name, srcs in symbol_sources(self.env).items() if name in integer}

    # ------------------------------------------------------------ sizes the artifact ties together

    def input_replacements(self) -> dict[sympy.Symbol, sympy.Expr]:
        """Input sizes torch replaced while tracing (``s92 -> s52`` once a ``view`` proved
        ``attention_mask.size(0) == input_ids.size(0)``; ``s3 -> s0 + 1``; ``s1 -> 8``):
        the installed guards check each as an equality of sources.  Only integer
        replacements of sized symbols; an unbacked or float one is not an input size."""
        out: dict[sympy.Symbol, sympy.Expr] = {}
        for sym, repl in self.env.replacements.items():
            if str(sym) not in self.sources or not sym.is_integer or repl == sym:
                continue
            if all(str(f) in self.sources for f in repl.free_symbols) and (repl.is_integer or repl.is_Integer):
                out[sym] = repl
        return out

    def tied_equalities(self) -> list[sympy.Basic]:
        """``Eq(s, r)`` for each input replacement: the premises under which the frame's
        guards, written over the replacing symbols, speak of the inputs.  Each is itself
        checked against the declared space (a guard of the frame, :meth:`tied_checks`), so
        a guard implied by the space and these is implied by the space alone when they are."""
        return [sympy.Eq(sym, repl, evaluate=False) for sym, repl in self.input_replacements().items()]

    def size_groups(self) -> list[list[str]]:
        """Sources the artifact treats as one size: those of one symbol (duck sizing,
        ``shape_id``) with those of the symbols replaced by that plain symbol."""
        groups: dict[str, list[str]] = {name: list(srcs) for name, srcs in self.sources.items()}
        for sym, repl in self.input_replacements().items():
            if isinstance(repl, sympy.Symbol) and str(repl) in groups and str(sym) in groups:
                groups[str(repl)] += groups.pop(str(sym))
        return [g for g in groups.values() if g]

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
        core = contradiction(labelled, self.empty)
        if core is not None:
            raise UsageError(f"the declared input space of {where} is empty: no input satisfies "
                             f"{' and '.join(dict.fromkeys(core))}")
        # A divisor is proved nonzero from the bounds and the facts that cannot raise: a fact
        # with a zero divisor reads as false there, so it would exclude its own bad points.
        safe = [f for (a, f) in self.frame_assumptions if not a.divisors]
        premises = [f for label, f in labelled if not label.startswith("--assume")] + safe
        for a, _ in self.frame_assumptions:
            for d in a.divisors_for_frame(self.symbol_of_source):
                r = self.prove(sympy.Ne(d, 0), premises)
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
            facts += b.facts(self.symbol_of_source[src])  # see _plain_symbols
        for sym in self.env.var_to_range:
            # A data-dependent size (no input source) that torch knows is a size.
            if str(sym) not in self.sources and self._is_size(sym):
                facts.append(sympy.Le(DEFAULT_UNBACKED.lower, sym, evaluate=False))
        return [f for f in facts if f is not sympy.true] + self.assumptions + self.tied_equalities()

    def written_space(self) -> list[sympy.Basic]:
        """The declared space without the replacement equalities (for a guard asked as
        written).  An ``--assume`` fact equal to one of them stays: it is the user's."""
        return self.space_facts()[:-len(self.tied_equalities()) or None]

    def _is_size(self, sym: sympy.Symbol) -> bool:
        return sym in getattr(self.env, "size_like", set())

    # ------------------------------------------------------------ counterexamples

    def keyed(self, cex: dict[str, int | float]) -> dict[str, int | float]:
        """Symbol values as input-source values: every source of each symbol (duck sizing,
        ``shape_id``: ``input_ids`` and ``attention_mask`` share the batch), and every
        source of a symbol torch replaced by an expression of assigned ones, evaluated
        there (``s92 -> s52``, ``s3 -> s0 + 1``).  A replacement that has no integer value
        at that point leaves its sources out: the replay keeps their captured sizes."""
        cex = dict(cex)
        pending = {sym: repl for sym, repl in self.input_replacements().items() if str(sym) not in cex}
        while pending:
            ready = {sym: repl for sym, repl in pending.items() if all(str(f) in cex for f in repl.free_symbols)}
            if not ready:
                break
            for sym, repl in ready.items():
                del pending[sym]
                try:
                    value = concrete.evaluate(repl, {f: cex[str(f)] for f in repl.free_symbols})
                except (concrete.Undefined, concrete.Unevaluable):
                    continue
                if isinstance(value, int) or (hasattr(value, "denominator") and value.denominator == 1):
                    cex[str(sym)] = int(value)
        out: dict[str, int | float] = {}
        for name, value in cex.items():
            for src in self.sources.get(name, [name]):
                out[src] = value
        return out

    def small_refutation(self, goal: sympy.Basic, premises: list[sympy.Basic], result: SolveResult) -> SolveResult:
        symbols = sorted(goal.free_symbols.union(*(p.free_symbols for p in premises)), key=str)
        for bound in SMALL_BOUNDS:
            capped = premises + [sympy.Le(s, bound) for s in symbols] + [sympy.Ge(s, -bound) for s in symbols]
            r = self.prove(goal, capped)
            if r.status == solvers.REFUTED:
                return r
        return result

    # ------------------------------------------------------------ the audit

    def check(self, kind: str, expr: sympy.Basic, where: str | None, premises: list[sympy.Basic],
              others: list[sympy.Basic] | None = None, *, as_written: bool = False) -> Check:
        """Implied or not by ``premises`` (the declared space) alone.  When not, and
        ``others`` (the frame's other guards, :meth:`other_guards`) are given, the
        counterexample is solved against them too, so that it breaks this guard only.
        ``as_written``: ask about ``expr`` itself, not rewritten with torch's replacements
        (a guard that made a replacement reads ``True`` once rewritten with it)."""
        goal = expr if as_written else self.env.replace(expr)
        result = self.prove(goal, premises)
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
        alone = self.prove(goal, premises + others)
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

    def other_guards(self, goal: sympy.Basic, *, as_written: bool = False) -> list[sympy.Basic]:
        """The frame's guards other than ``goal``, plus the ``2 <= size`` range checks of
        0/1 specialization: what an input must satisfy to break ``goal`` alone.

        These are the stock guards, not the minimized list: minimization may drop a guard
        because the installed range check, which torch narrows with that very guard
        (``y > 16`` makes it ``17 <= y``), implies it, so the minimized list alone would
        let a counterexample break that guard too.  An input satisfying every other stock
        guard satisfies every other installed check (the installed set is proved
        equivalent to the stock one, and its rewrites and folded ranges are made of stock
        guards)."""
        shape_guards = [g for g in self.env.guards if not self.is_value_guard(g.expr)]
        written = (g.expr if as_written else self.env.replace(g.expr) for g in shape_guards)
        others = [g for g in dict.fromkeys(written) if g != goal]
        symbols = goal.free_symbols.union(*(g.free_symbols for g in others))
        for sym, vr in self.env.var_to_range.items():
            lower = getattr(vr, "lower", None)
            if sym in symbols and self.sources.get(str(sym)) and lower is not None and lower >= 2:
                others.append(sympy.Le(2, sym, evaluate=False))
        return [part for g in others for part in sympy.And.make_args(g)]

    def is_value_guard(self, expr: sympy.Basic) -> bool:
        """A guard on a Python float (a symbol that is not an integer): a module's ``eps``,
        a dropout ``p``, an attention scale, traced as a SymFloat and specialized back."""
        return any(not s.is_integer for s in expr.free_symbols)

    def value_guards(self) -> list[dict[str, Any]]:
        """Guards on float values, reported apart from shape guards and not audited: they
        are about the value of an attribute or argument (``eps == 1e-05``), not about the
        input shapes the declared space describes, so "implied by the declared space" has
        no meaning for them.  They are still installed guards (a new ``eps`` recompiles),
        so a deployment that skips guard evaluation must know them: listed, not dropped."""
        names = symbol_sources(self.env)
        out = []
        for g in self.env.guards:
            if self.is_value_guard(g.expr):
                srcs = sorted({src for sym in g.expr.free_symbols for src in names.get(str(sym), [])})
                out.append({"guard": self.describe(g.expr), "source_line": user_line(g.sloc), "sources": srcs})
        return out

    def _states_replacement(self, expr: sympy.Basic) -> bool:
        """Whether ``expr`` is the equality of one input replacement (either side first)."""
        if not isinstance(expr, sympy.Eq):
            return False
        diff = sympy.expand(expr.lhs - expr.rhs)
        return any(sympy.expand(eq.lhs - eq.rhs) in (diff, -diff) for eq in self.tied_equalities())

    def tied_checks(self, space: list[sympy.Basic]) -> list[Check]:
        """Each input replacement torch made without a guard that states it (its guard is
        checked as written in :meth:`run`): the installed guards check it as an equality of
        sources, so it is audited as a guard of its own."""
        written = [g.expr for g in self.env.guards]
        out = []
        for eq in self.tied_equalities():
            diff = sympy.expand(eq.lhs - eq.rhs)
            if any(isinstance(w, sympy.Eq) and sympy.expand(w.lhs - w.rhs) in (diff, -diff) for w in written):
                continue  # that guard is checked as written
            out.append(self.check("guard", eq, "an equality of input sizes torch derived while tracing", space,
                                  self.other_guards(eq, as_written=True), as_written=True))
        return out

    def run(self) -> FrameAudit:
        space = self.space_facts()
        written_space = self.written_space()  # for guards asked as written
        checks: list[Check] = []
        findings: list[Finding] = []
        index = self.frame.index
        guards = [(g.expr, user_line(g.sloc)) for g in self.env.guards if not self.is_value_guard(g.expr)]
        for expr, where in guards:
            rewritten = self.env.replace(expr)
            if rewritten.is_Boolean and not rewritten.free_symbols and expr.free_symbols:
                # This guard made (or is decided by) a replacement of input sizes: ask it as
                # written, over the inputs' own symbols.  The guard that states a replacement
                # is asked without it; another one (``8*s92 % s52 == 0`` once ``s92 == s52``)
                # with the replacements as premises: each of those is checked on its own, so
                # "implied" here means implied wherever the equalities hold, as installed.
                premises = written_space if self._states_replacement(expr) else space
                c = self.check("guard", expr, where, premises, self.other_guards(expr, as_written=True),
                               as_written=True)
            else:
                c = self.check("guard", expr, where, space, self.other_guards(rewritten))
            checks.append(c)
        checks += self.tied_checks(written_space)
        for c in checks:
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
                          minimizations, divisibility, self.value_guards(), self.widenings())

    def _contradictions(self, space: list[sympy.Basic], asserts: list[sympy.Basic]) -> list[Finding]:
        if not asserts:
            return []
        if self.empty(space + asserts):
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
            r = self.prove(goal, premises)
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
