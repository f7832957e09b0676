"""The declared input space of one audited frame: what the audit proves the frame's
guards, asserts and stock choices against.

The space is the intersection of every declaration (``mark_dynamic``/``mark_unbacked``
bounds, an export's ``Dim`` ranges, each ``--assume`` that names this frame's inputs,
torch's default ``[2, oo)`` for an undeclared backed size), stated over the frame's symbols
with the replacements torch made while tracing as premises.  It also holds the frame's
words for the user (input sources for symbols) and its one way to ask: :meth:`prove`,
through :class:`verishape.core.premises.Premises`.  The findings are built from it by
:mod:`verishape.audit.checks` (guards, asserts, facts, fallbacks) and
:mod:`verishape.audit.stock_findings` (0/1 specialization, duck sizing, widening).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sympy

import verishape.solvers as solvers
from verishape.solvers import concrete
from verishape.proofs.result import SolveResult
from verishape.core import premises as premises_mod
from verishape.compiler import declared as declared_sizes
from verishape.core.errors import UsageError
from verishape.core.sources import describe, source_name, symbol_sources
from verishape.proofs.kinds import Decision

from .space import (DEFAULT_BACKED, DEFAULT_UNBACKED, Assumption, Bounds, bounds_from_assumption, contradiction,
                    declared_from_locals, linear_bound, short)

#: Bounds tried in turn to find a counterexample small enough for real tensors.
SMALL_BOUNDS = (8, 16, 64, 256, 1024, 4096)


class DeclaredSpace:
    """One frame's declared input space (see the module docstring); built by
    :func:`for_frame` (a compiled frame) or :func:`for_export` (an export call)."""

    def __init__(self, frame: Any, assumptions: Sequence[Assumption], prover: solvers.Prover, *,
                 sources: dict[str, list[str]], marked: Mapping[str, Bounds], names_by_source: bool) -> None:
        self.frame = frame
        self.env = frame.env
        self.solver = prover
        #: symbol name -> the input sizes it stands for
        self.sources = sources
        #: bounds the program declared on its inputs (``mark_dynamic``, ``Dim``)
        self.marked = dict(marked)
        self._names_by_source = names_by_source
        self.symbol_of_source = {src: sym for sym in self.env.var_to_range
                                 for src in self.sources.get(str(sym), [])}
        self.declared_bounds = self._declared_bounds(assumptions)
        #: each --assume that names only this frame's inputs, with its fact in the frame's symbols
        self.frame_assumptions = [(a, f) for a in assumptions if (f := a.for_frame(self.symbol_of_source)) is not None]
        self.assumptions = [f for _, f in self.frame_assumptions]
        self.to_plain = self._plain_symbols()

    def describe(self, expr: sympy.Basic) -> str:
        """``expr`` in the words of the report: each sized symbol as its input source (an
        export's by the program's input names: a strict export's ShapeEnv calls them
        ``L['flat_args'][0]``)."""
        if not self._names_by_source:
            return describe(expr, self.env)
        mapping = {s: sympy.Symbol(self.sources[str(s)][0]) for s in expr.free_symbols if str(s) in self.sources}
        return str(expr.xreplace(mapping)) if mapping else str(expr)

    def _plain_symbols(self) -> dict[sympy.Symbol, sympy.Symbol]:
        """The audit's axioms: a size's sign comes from the declared space, never from
        SymPy's ``positive``, which torch keeps on backed sizes whose range admits 0
        (``backed_size_oblivious``, a declared ``min=0``).  Every symbol the space bounds
        from below is asked about as a plain integer; others keep torch's declaration."""
        to_plain = premises_mod.plain_symbols(list(self.env.var_to_range), premises_mod.lower_bounded(self.facts()))
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
        marked = self.marked
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
        checked against the declared space (a guard of the frame, :func:`verishape.audit.checks.tied_checks`), so
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

    def facts(self) -> list[sympy.Basic]:
        facts: list[sympy.Basic] = []
        for src, b in self.declared_bounds.items():
            facts += b.facts(self.symbol_of_source[src])  # see _plain_symbols
        for sym in self.env.var_to_range:
            # A data-dependent size (no input source) that torch knows is a size.
            if str(sym) not in self.sources and self.is_size(sym):
                facts.append(sympy.Le(DEFAULT_UNBACKED.lower, sym, evaluate=False))
        return [f for f in facts if f is not sympy.true] + self.assumptions + self.tied_equalities()

    def written_space(self) -> list[sympy.Basic]:
        """The declared space without the replacement equalities (for a guard asked as
        written).  An ``--assume`` fact equal to one of them stays: it is the user's."""
        return self.facts()[:-len(self.tied_equalities()) or None]

    def is_size(self, sym: sympy.Symbol) -> bool:
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


def for_frame(frame: Any, assumptions: Sequence[Assumption], prover: solvers.Prover) -> DeclaredSpace:
    """The space of a compiled frame: its symbols' input sources (integer symbols only: a
    float symbol, a module's ``eps`` traced as a SymFloat, is a value, not a size) and the
    bounds the script declared on the frame's inputs."""
    integer = {str(s) for s in frame.env.var_to_range if s.is_integer}
    sources = {name: srcs for name, srcs in symbol_sources(frame.env).items() if name in integer}
    for sym, srcs in getattr(frame, "unbacked_inputs", {}).items():
        if str(sym) in integer:  # (an unbacked input size: torch records no source for it)
            sources.setdefault(str(sym), []).extend(source_name(s) for s in srcs)
    marked = {**declared_from_locals(frame.local_scope), **declared_by_spec(frame)}
    return DeclaredSpace(frame, assumptions, prover, sources=sources, marked=marked, names_by_source=False)


def declared_by_spec(frame: Any) -> dict[str, Bounds]:
    """The bounds the frame's ``shapes_spec`` declares (``verishape.compile(shapes_spec=...)``,
    :mod:`verishape.compiler.declared`), by input source: a declared tensor dimension or int,
    with the declared range, 0 and 1 included where declared (what a server sends, not what
    the compile assumed)."""
    from torch._dynamo.source import TensorProperty

    if frame.declared is None or frame.env is None:
        return {}
    out: dict[str, Bounds] = {}
    for sources in (*frame.env.var_to_sources.values(), *getattr(frame, "unbacked_inputs", {}).values()):
        for src in sources:
            if getattr(src, "prop", None) is TensorProperty.SIZE:
                leaf = frame.declared.leaf(src.base, frame.code)
                dim = leaf[src.idx] if isinstance(leaf, tuple) and src.idx is not None and src.idx < len(leaf) else None
            else:
                dim = frame.declared.leaf(src, frame.code)
            if isinstance(dim, declared_sizes.Dim):
                out[src.name] = Bounds(dim.low, dim.high, f"shapes_spec {dim.name} ({dim.low}..{dim.high})")
    return out


def for_export(frame: Any, assumptions: Sequence[Assumption], prover: solvers.Prover) -> DeclaredSpace:
    """The space of an export call: the program's inputs as sources, ``Dim`` ranges as
    the declared bounds."""
    from .exports import program_sources

    if frame.env is None:
        raise RuntimeError("internal error (a verishape bug): an audited export has no ShapeEnv")
    return DeclaredSpace(frame, assumptions, prover, sources=program_sources(frame), marked=frame.declared,
                         names_by_source=True)
