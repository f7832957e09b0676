"""Premises, and the one way verishape asks whether they imply a goal.

Only facts the final artifact really checks are premises (Note [Premises are what the artifact checks], docs/architecture.md): installed
guards, runtime asserts that run no later than the assert being decided (Note [Asserts see only the past]), and
value ranges (which become range guards or come from those asserts).  Facts that share no
symbol with the goal, directly or through other facts, cannot matter and are left out, so
queries stay small and the solver cache sees the same question again.

Every question verishape decides goes through :class:`Premises`: compile and export
(``VeriShapeEnv``), widening's size-1 proof, export's reasons and suggestions, guard
minimization and the audit.  It holds the facts, the plain symbols they are stated in
(:func:`plain_symbols`: a size's sign comes from its range, never from SymPy's
declaration) and a witness, the real sizes: with one the prover tries points near it
first (:mod:`verishape.solvers.refute`) and needs no solve to show the facts consistent.
:meth:`Premises.answer` says which of three it is (an :class:`Answer`): proved (with its
record), open (refuted, unknown: act as stock would), or contradictory (a vacuous proof: the
facts exclude every input, which real inputs disprove, so a verishape bug: act as stock and
say so); :meth:`Premises.ask` is its proof record or None.  The rule "proved and not vacuous"
is written here once.
:meth:`Premises.assuming` binds more facts for a block and takes them back after it, as
TVM's analyzer binds facts in scopes.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

import sympy
from torch.utils._sympy.numbers import IntInfinity, NegativeIntInfinity

import verishape.solvers as solvers
from verishape.proofs import Obligation, ProofRecord
from verishape.proofs.kinds import Decision

_UNBACKED = re.compile(r"^u(\d+)$")

#: Size-oblivious mode's assumption for size-like symbols, as stock torch applies it.
SIZE_OBLIVIOUS_MAX = 2**48


def unbacked_index(symbol: sympy.Symbol) -> int | None:
    """Creation order of an unbacked integer symbol (``u7`` -> 7), else None."""
    m = _UNBACKED.match(symbol.name)
    return int(m.group(1)) if m else None


def newest_unbacked(expr: sympy.Basic) -> int | None:
    """Index of the most recently created unbacked symbol in ``expr``: the point in the
    graph where a runtime assert on ``expr`` is emitted."""
    indices = [i for s in expr.free_symbols if (i := unbacked_index(s)) is not None]
    return max(indices) if indices else None


def witness_value(hint: Any) -> int | float:
    """A real input's value as a witness: an int, or a float for a float-valued symbol (a
    scale factor of 1.87 is not the point 1)."""
    if isinstance(hint, bool):
        return int(hint)
    if isinstance(hint, int) or getattr(hint, "is_integer", False):
        return int(hint)
    return float(hint)


def finite(bound: object) -> bool:
    return isinstance(bound, sympy.Integer) or (
        isinstance(bound, sympy.Number) and bound.is_finite and not isinstance(bound, (IntInfinity, NegativeIntInfinity))
    )


def range_facts(
    symbols: Iterable[sympy.Symbol],
    ranges: Mapping[sympy.Symbol, object],
    *,
    size_like: frozenset[sympy.Symbol] | set[sympy.Symbol] = frozenset(),
    size_oblivious: bool = False,
) -> list[sympy.Basic]:
    """``lower <= s <= upper`` for each symbol with a known finite bound.

    In size-oblivious mode a size-like symbol is assumed to be in ``[2, 2**48 - 1]``
    intersected with its range, exactly the assumption stock torch makes there.
    """
    out: list[sympy.Basic] = []
    for s in sorted(symbols, key=str):
        ends = symbol_bounds(s, ranges, size_like=size_like, size_oblivious=size_oblivious)
        if ends is None:
            continue
        lower, upper = ends
        if finite(lower):
            out.append(sympy.Le(lower, s))
        if finite(upper):
            out.append(sympy.Le(s, upper))
    return out


def symbol_bounds(s: sympy.Symbol, ranges: Mapping[sympy.Symbol, object], *,
                  size_like: Collection[sympy.Symbol] = frozenset(),
                  size_oblivious: bool = False) -> tuple[sympy.Basic, sympy.Basic] | None:
    """The least and greatest value a premise may assume of ``s`` (:func:`range_facts`' bounds,
    infinite ends included); None where ``s`` has no numeric range."""
    vr = ranges.get(s)
    if vr is None or getattr(vr, "is_bool", False):
        return None
    lower, upper = vr.lower, vr.upper
    if size_oblivious and s in size_like:
        lower = sympy.Max(2, lower) if finite(lower) else sympy.Integer(2)
        capped = sympy.Integer(SIZE_OBLIVIOUS_MAX) if not finite(upper) else sympy.Min(upper, SIZE_OBLIVIOUS_MAX)
        upper = capped - 1 if capped > lower else capped
    return lower, upper


def relevant(goal: sympy.Basic, pool: Iterable[sympy.Basic]) -> list[sympy.Basic]:
    """The facts of ``pool`` connected to ``goal`` through shared symbols."""
    facts = [f for f in dict.fromkeys(pool) if f.free_symbols and f is not sympy.true]
    wanted = set(goal.free_symbols)
    chosen: list[sympy.Basic] = []
    changed = True
    while changed:
        changed = False
        rest = []
        for f in facts:
            if f.free_symbols & wanted:
                chosen.append(f)
                wanted |= f.free_symbols
                changed = True
            else:
                rest.append(f)
        facts = rest
    return chosen


def plain_symbols(exprs: Iterable[sympy.Basic], ranged: Collection[sympy.Symbol] | None = None,
                  ) -> dict[sympy.Symbol, sympy.Symbol] | None:
    """Each integer symbol of ``exprs`` that SymPy declares positive or non-negative and
    whose range is known (in ``ranged``; ``None``: every such symbol) -> a plain integer
    symbol of the same name.  Queries asked over the plain symbols take a symbol's sign
    from the premises (its range facts), never from the SymPy declaration.

    Why: torch declares every backed size ``positive`` even where its range admits 0
    (``backed_size_oblivious``, a declared ``min=0``); read as a premise, that declaration
    "proves" ``s > 1`` from ``Ne(s, 1)`` and a guard that stock installs is lost.  Where
    no range is known the declaration stays: it is exactly what torch itself assumes of
    that symbol (SymPy already simplified every expression with it), so keeping it assumes
    nothing stock does not.  The names stay, so counterexamples and printed proofs still
    name the caller's symbols.

    Returns None when renaming would merge two different symbols (a plain symbol of that
    name already occurs): the caller must then not decide.
    """
    symbols: set[sympy.Symbol] = set()
    for e in exprs:
        symbols |= e.free_symbols
    mapping = {s: sympy.Symbol(s.name, integer=True) for s in sorted(symbols, key=str)
               if s.is_integer and (s.is_positive or s.is_nonnegative) and (ranged is None or s in ranged)}
    targets = list(mapping.values())
    if len(set(targets)) < len(targets) or any(t in symbols for t in targets):
        return None
    return mapping


def lower_bounded(premises: Iterable[sympy.Basic]) -> set[sympy.Symbol]:
    """The symbols that some premise bounds from below by a number (``c <= s``,
    ``s >= c``, ``c < s``, ``s > c``): their range, in the premises, is known."""
    out: set[sympy.Symbol] = set()
    for p in premises:
        if isinstance(p, (sympy.Le, sympy.Lt)):
            low, high = p.lhs, p.rhs
        elif isinstance(p, (sympy.Ge, sympy.Gt)):
            low, high = p.rhs, p.lhs
        else:
            continue
        if isinstance(high, sympy.Symbol) and low.is_Number and finite(low):
            out.add(high)
    return out


_prover: contextvars.ContextVar[solvers.Prover | None] = contextvars.ContextVar("verishape_prover", default=None)


def current_prover() -> solvers.Prover:
    """The prover questions go to: the one :func:`use_prover` set, else the process's."""
    return _prover.get() or solvers.default_prover()


@contextlib.contextmanager
def use_prover(prover: solvers.Prover) -> Iterator[None]:
    """Decide with ``prover`` inside this block (tests inject failing solvers here)."""
    token = _prover.set(prover)
    try:
        yield
    finally:
        _prover.reset(token)


class Verdict(enum.Enum):
    """What premises say of a goal."""

    PROVED = "proved"
    #: refuted or unknown: nothing is decided, stock decides (Note [Proof or stock])
    OPEN = "open"
    #: the proof was vacuous: the premises exclude every input, while real inputs satisfy
    #: them; a translation or premise bug, so nothing may be decided from them
    CONTRADICTORY = "contradictory"


@dataclasses.dataclass(frozen=True)
class Answer:
    """:meth:`Premises.answer`'s value: the verdict, the proof record when proved, and the
    solver's result (what it cost, why it is open)."""

    verdict: Verdict
    record: ProofRecord | None = None
    result: solvers.SolveResult | None = None


@dataclasses.dataclass
class Premises:
    """Facts over plain symbols, the renaming they are stated in, and the real sizes.

    ``facts`` are stated over the plain symbols (``to_plain``'s values); ``witness``
    (plain symbol -> value) satisfies them when given."""

    facts: list[sympy.Basic]
    to_plain: dict[sympy.Symbol, sympy.Symbol] = dataclasses.field(default_factory=dict)
    witness: dict[sympy.Symbol, Any] | None = None

    @classmethod
    def stated(cls, facts: Iterable[sympy.Basic], to_plain: Mapping[sympy.Symbol, sympy.Symbol] | None = None,
               witness: Mapping[sympy.Symbol, Any] | None = None) -> Premises:
        """Premises from facts (and a witness) over the caller's symbols, renamed by ``to_plain``."""
        rename = dict(to_plain or {})
        return cls([sympy.sympify(f).xreplace(rename) for f in facts], rename,
                   None if witness is None else {rename.get(s, s): v for s, v in witness.items()})

    @classmethod
    def of_trace(cls, env: Any, rename: Mapping[sympy.Symbol, sympy.Symbol],
                 goals: Iterable[sympy.Basic] = ()) -> Premises | None:
        """What a trace's cache entry checks, stated in another trace's symbols: its guards
        (as its replacements leave them) and the ranges of its symbols, each renamed by
        ``rename`` (widening states a new trace's entry in the kept compile's symbols), with
        its hints there as the witness; over plain symbols (:func:`plain_symbols`) that also
        cover every symbol of ``goals``, so that one renaming serves every question asked of
        them.  None when that renaming would merge two symbols (then nothing may be decided)."""
        facts = [env.replace(g.expr).xreplace(rename) for g in env.guards]
        ranges = {rename[s]: vr for s, vr in env.var_to_range.items() if s in rename}
        facts += range_facts(ranges.keys(), ranges)
        facts = [f for f in facts if f is not sympy.true]
        to_plain = plain_symbols([*goals, *facts], None)
        if to_plain is None:
            return None
        hints = {rename[s]: witness_value(v) for s, v in env.backed_var_to_val.items() if s in rename}
        return cls.stated(facts, to_plain, hints)

    @classmethod
    def gather(cls, goal: sympy.Basic, pool: Iterable[sympy.Basic], ranges: Mapping[sympy.Symbol, Any], *,
               size_like: Collection[sympy.Symbol] = frozenset(), size_oblivious: bool = False,
               hints: Mapping[sympy.Symbol, Any] | None = None, connected: bool = True) -> Premises | None:
        """The facts of ``pool`` connected to ``goal`` (all of them unless ``connected``) and
        the range facts of their symbols, over plain symbols: every symbol with a range
        entry is renamed (:func:`plain_symbols`), and its range facts are built over the
        plain symbol (SymPy would fold ``0 <= s`` to True for a positive ``s``).  The
        witness is ``hints`` when they cover every symbol.  None when the renaming would
        merge two symbols (then nothing may be decided)."""
        chosen = relevant(goal, pool) if connected else list(pool)
        symbols = set(goal.free_symbols).union(*(f.free_symbols for f in chosen))
        to_plain = plain_symbols([goal, *chosen], ranges.keys())
        if to_plain is None:
            return None
        plain_ranges = {to_plain.get(s, s): vr for s, vr in ranges.items() if s in symbols}
        ranged = range_facts(plain_ranges.keys(), plain_ranges, size_like={to_plain.get(s, s) for s in size_like},
                             size_oblivious=size_oblivious)
        renamed = [f.xreplace(to_plain) for f in chosen]
        witness = None
        if hints is not None and symbols <= hints.keys():
            witness = {to_plain.get(s, s): witness_value(hints[s]) for s in symbols}
        return cls(list(dict.fromkeys(f for f in renamed + ranged if f is not sympy.true)), to_plain, witness)

    @contextlib.contextmanager
    def assuming(self, *extra: sympy.Basic) -> Iterator[Premises]:
        """Inside the block, ``extra`` (over the caller's symbols) are premises too."""
        added = [sympy.sympify(e).xreplace(self.to_plain) for e in extra]
        self.facts.extend(added)
        try:
            yield self
        finally:
            del self.facts[len(self.facts) - len(added):]

    def decide(self, goal: object, kind: str, *, where: str | None = None, value: bool = True,
               prover: solvers.Prover | None = None) -> ProofRecord:
        """The record of asking whether these premises imply ``goal``, whatever the answer
        (the audit reports refutations with their counterexample)."""
        kind = Decision.checked(kind)
        target, result = self._prove(goal, prover)
        return ProofRecord(Obligation(target, tuple(self.facts), kind, where), result, value)

    def answer(self, goal: object, kind: str, *, where: str | Callable[[], str | None] | None = None,
               value: bool = True, prover: solvers.Prover | None = None) -> Answer:
        """Whether these premises imply ``goal``: proved (with the record), open (refuted,
        unknown) or contradictory (vacuous).  ``where`` may be a function, called only for
        a proof (finding the user's line walks the stack)."""
        kind = Decision.checked(kind)
        target, result = self._prove(goal, prover)
        if result.proved and result.vacuous:
            return Answer(Verdict.CONTRADICTORY, result=result)
        if not result.proved:
            return Answer(Verdict.OPEN, result=result)
        return Answer(Verdict.PROVED, ProofRecord(Obligation(target, tuple(self.facts), kind,
                                                             where() if callable(where) else where), result, value),
                      result)

    def ask(self, goal: object, kind: str, *, where: str | Callable[[], str | None] | None = None,
            value: bool = True, prover: solvers.Prover | None = None) -> ProofRecord | None:
        """The proof record when these premises imply ``goal`` (:meth:`answer` proved);
        None otherwise (open or contradictory: act as stock would)."""
        return self.answer(goal, kind, where=where, value=value, prover=prover).record

    def empty(self, *, prover: solvers.Prover | None = None) -> bool:
        """Whether no input satisfies these premises, proved (an empty declared space:
        the one question whose answer is a vacuous proof on purpose)."""
        return (prover or current_prover()).prove(sympy.false, self.facts).proved

    def _prove(self, goal: object, prover: solvers.Prover | None) -> tuple[sympy.Basic, solvers.SolveResult]:
        target = sympy.sympify(goal).xreplace(self.to_plain)
        return target, (prover or current_prover()).prove(target, self.facts, witness=self.witness)
