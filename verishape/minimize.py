"""Guard minimization: drop every shape guard implied by the guards that remain.

Premises are only what the installed guard function really checks (soundness rule 2):
the guards we keep and the range checks torch emits for every input symbol.  Guards are
tried most expensive first, so implied expensive guards go and cheap ones stay.  Each
removal is proved from the set that remains at that moment; since every guard removed
later is itself implied by the final set, the final set implies all of them.  The result
is then proved equivalent to the stock list in one more query, and installed only if
that proof succeeds: a failed or unknown step leaves the stock list.

A guard that constrains a symbol used as a divisor elsewhere is never dropped (rule 3):
the guard function evaluates guards in order, and a guard that raises is a failed guard,
so the protector must stay in front of the guard that divides.

Range tightening (:func:`tighten`) then folds the guards that mention one input symbol
only into that symbol's range check, when together they allow exactly an interval:
``2 <= s`` with ``(s // 2) != 1`` is ``4 <= s``; ``s % 4 == 0`` with ``s // 4 == 1`` is
``s == 4``.  torch prints one range line per input symbol anyway, so each folded guard is
a line less and the range line is no dearer to check.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import sympy
from torch.utils._sympy import functions as tf

import solvers
from proofs import Obligation, ProofRecord

from solvers import concrete

from . import facts

#: How far past a symbol's lower bound (and past the start of the interval) tightening
#: looks for the interval's ends by concrete evaluation; the solver then proves them.
_SCAN = 64

_DIVIDING = (tf.FloorDiv, tf.CleanDiv, tf.Mod, tf.PythonMod, sympy.Mod, tf.ModularIndexing, tf.IntTrueDiv,
             tf.FloatTrueDiv)


@dataclasses.dataclass(frozen=True)
class Tightening:
    """``symbol``'s range check becomes ``lower <= symbol <= upper`` (``upper`` None:
    unbounded), replacing ``folded`` guards; ``proof`` shows the new range follows from
    the old range and the folded guards, and each folded guard's drop record in
    :attr:`Minimization.dropped` shows it follows from the new range."""

    symbol: sympy.Symbol
    lower: int
    upper: int | None
    folded: tuple[sympy.Basic, ...]
    proof: ProofRecord

    def facts(self) -> list[sympy.Basic]:
        return _interval(self.symbol, self.lower, self.upper)


@dataclasses.dataclass
class Minimization:
    stock: list[sympy.Basic]
    kept: list[sympy.Basic]
    dropped: list[ProofRecord]
    equivalence: ProofRecord | None
    time_s: float
    tightened: list[Tightening] = dataclasses.field(default_factory=list)

    @property
    def applied(self) -> bool:
        return self.equivalence is not None and self.equivalence.result.status == solvers.PROVED


def cost(expr: sympy.Basic) -> int:
    """How expensive a guard is to check: operations, with division and modulo
    counted heavier (they compile to Python calls)."""
    return int(sympy.count_ops(expr)) + 4 * sum(1 for _ in expr.atoms(*_DIVIDING))


def divisor_symbols(exprs: Sequence[sympy.Basic], prover: solvers.Prover) -> set[sympy.Symbol]:
    """Symbols of divisors that might be zero.  A divisor that is nonzero by its
    symbols' own assumptions (``s0`` is positive) needs no guard in front of it."""
    out: set[sympy.Symbol] = set()
    for e in exprs:
        for node in e.atoms(*_DIVIDING):
            for divisor in node.args[1:]:
                if divisor.free_symbols and prover.prove(sympy.Ne(divisor, 0)).status != solvers.PROVED:
                    out |= divisor.free_symbols
    return out


def minimize(guards: Sequence[sympy.Basic], ranges: dict[sympy.Symbol, object],
             prover: solvers.Prover, *, size_like: set[sympy.Symbol] | frozenset[sympy.Symbol] = frozenset(),
             witness: dict[sympy.Symbol, int] | None = None, tighten_ranges: bool = False) -> Minimization:
    """``ranges``: the range of every input symbol, each installed as a range check.
    ``witness``: values satisfying every guard (the size hints), sparing vacuity solves.
    ``tighten_ranges``: also fold single-symbol guards into range checks (:func:`tighten`)."""
    start = time.perf_counter()
    originals = list(dict.fromkeys(guards))
    protectors_orig = divisor_symbols(originals, prover)
    # Work on plain integers: a size symbol is declared positive, but the guard function
    # also runs on inputs its range check admits, and that check may admit 0 (for
    # example under backed_size_oblivious).  The installed range checks are premises.
    to_plain = _plain_symbols(originals)
    stock = [g.xreplace(to_plain) for g in originals]
    if len(set(stock)) < len(stock):  # two guards differing only by assumptions: keep them apart
        to_plain, stock = {}, list(originals)
    back = {v: k for k, v in to_plain.items()}
    original_of = dict(zip(stock, originals))
    ranges = {to_plain.get(s, s): r for s, r in ranges.items()}
    witness = {to_plain.get(s, s): v for s, v in witness.items()} if witness else witness
    protectors = {to_plain.get(s, s) for s in protectors_orig}
    kept = list(stock)
    dropped: list[ProofRecord] = []

    def range_premises(exprs: Sequence[sympy.Basic]) -> list[sympy.Basic]:
        symbols = set().union(*(e.free_symbols for e in exprs)) if exprs else set()
        return facts.range_facts(symbols, ranges, size_like=size_like)

    for g in sorted(stock, key=cost, reverse=True):
        if g.free_symbols & protectors:
            continue
        rest = [k for k in kept if k is not g]
        premises = facts.relevant(g, rest)
        if not premises:
            continue
        premises = premises + range_premises([g, *premises])
        result = prover.prove(g, premises, witness=witness)
        if result.status == solvers.PROVED and not result.vacuous:
            dropped.append(ProofRecord(Obligation(g, tuple(premises), "guard_dropped"), result, True))
            kept = rest
    tightened: list[Tightening] = []
    if tighten_ranges:
        kept, tightened, folded = tighten(kept, ranges, prover, protectors=protectors)
        dropped.extend(folded)
    equivalence = None
    if dropped:
        # The installed function checks the kept guards and every input symbol's range
        # (tightened where folded); it must accept exactly what the stock one accepts.
        old_ranges = range_premises(stock)
        new_by_symbol = {t.symbol: t for t in tightened}
        new_ranges = [f for f in old_ranges if not (f.free_symbols & new_by_symbol.keys())]
        new_ranges += [f for t in tightened for f in t.facts()]
        goal = sympy.And(*stock, *old_ranges)
        premises = kept + new_ranges
        result = prover.prove(goal, premises, witness=witness)
        equivalence = ProofRecord(Obligation(goal, tuple(premises), "guard_set_equivalence"), result, True)
        if result.status != solvers.PROVED or result.vacuous:
            kept, tightened = list(stock), []
    # Report in the caller's symbols; the proof records keep what was really proved.
    kept_orig = [original_of[g] for g in kept]
    tightened_orig = [dataclasses.replace(t, symbol=back.get(t.symbol, t.symbol),
                                          folded=tuple(original_of[g] for g in t.folded)) for t in tightened]
    return Minimization(originals, kept_orig, dropped, equivalence, time.perf_counter() - start, tightened_orig)


def _plain_symbols(exprs: Sequence[sympy.Basic]) -> dict[sympy.Symbol, sympy.Symbol]:
    """Each integer symbol declared positive or non-negative -> a plain integer symbol of
    the same name (the solver then assumes nothing the range checks do not say)."""
    symbols = set().union(*(e.free_symbols for e in exprs)) if exprs else set()
    return {s: sympy.Symbol(s.name, integer=True) for s in sorted(symbols, key=str)
            if s.is_integer and (s.is_positive or s.is_nonnegative)}


def tighten(kept: Sequence[sympy.Basic], ranges: dict[sympy.Symbol, object], prover: solvers.Prover, *,
            protectors: set[sympy.Symbol] | frozenset[sympy.Symbol] = frozenset(),
            ) -> tuple[list[sympy.Basic], list[Tightening], list[ProofRecord]]:
    """Fold the guards over one input symbol into its range check where they allow
    exactly an interval.  Returns the guards left, the tightenings and a drop record
    for every folded guard.

    The interval's ends are found by evaluating the guards on concrete values near the
    range's lower bound (cheap, and exact: a guard that raises rejects the value, as it
    does at run time), then the solver proves, on an unconstrained integer standing for
    the symbol, that the old range with the folded guards and the new range accept the
    same values.  Anything unproved leaves the symbol alone.
    """
    by_symbol: dict[sympy.Symbol, list[sympy.Basic]] = {}
    for g in kept:
        if len(g.free_symbols) == 1:
            (sym,) = g.free_symbols
            by_symbol.setdefault(sym, []).append(g)
    out = list(kept)
    tightenings: list[Tightening] = []
    records: list[ProofRecord] = []
    for sym, group in sorted(by_symbol.items(), key=lambda kv: str(kv[0])):
        vr = ranges.get(sym)
        if vr is None or not sym.is_integer or sym in protectors or not facts._finite(getattr(vr, "lower", None)):
            continue
        t = _tighten_one(sym, group, vr, prover)
        if t is None:
            continue
        folded_records = []
        for g in group:
            r = prover.prove(g, t.facts())
            if r.status != solvers.PROVED or r.vacuous:
                break
            folded_records.append(ProofRecord(Obligation(g, tuple(t.facts()), "guard_dropped"), r, True))
        else:
            tightenings.append(t)
            records.extend(folded_records)
            out = [g for g in out if g not in group]
    return out, tightenings, records


def _accepts(group: Sequence[sympy.Basic], sym: sympy.Symbol, value: int) -> bool:
    try:
        return all(concrete.evaluate(g, {sym: value}) is True for g in group)
    except concrete.Undefined:
        return False  # the guard function raises: the value is rejected


def _tighten_one(sym: sympy.Symbol, group: Sequence[sympy.Basic], vr: object,
                 prover: solvers.Prover) -> Tightening | None:
    old_lower = int(vr.lower)  # type: ignore[attr-defined]
    old_upper = int(vr.upper) if facts._finite(vr.upper) else None  # type: ignore[attr-defined]
    stop = old_lower + _SCAN if old_upper is None else min(old_upper, old_lower + _SCAN)
    try:
        lower = next((v for v in range(old_lower, stop + 1) if _accepts(group, sym, v)), None)
        if lower is None:
            return None
        end = lower + _SCAN if old_upper is None else min(old_upper, lower + _SCAN)
        upper = next((v - 1 for v in range(lower + 1, end + 1) if not _accepts(group, sym, v)), old_upper)
    except concrete.Unevaluable:
        return None
    if lower == old_lower and upper == old_upper:
        return None  # the guards cut holes, or nothing: no interval to fold into
    # Prove it on an unconstrained integer: no size assumption is needed, because both
    # sides bound the value from below.
    x = sympy.Symbol(f"{sym.name}_t", integer=True)
    old = _interval(x, old_lower, old_upper)
    new = _interval(x, lower, upper)
    group_x = [g.xreplace({sym: x}) for g in group]
    forward = prover.prove(sympy.And(*new), old + group_x)
    if forward.status != solvers.PROVED or forward.vacuous:
        return None
    backward = prover.prove(sympy.And(*old, *group_x), new)
    if backward.status != solvers.PROVED or backward.vacuous:
        return None
    proof = ProofRecord(Obligation(sympy.And(*new), tuple(old + group_x), "range_tightened"), forward, True)
    return Tightening(sym, lower, upper, tuple(group), proof)


def _interval(x: sympy.Symbol, lower: int, upper: int | None) -> list[sympy.Basic]:
    return [sympy.Le(lower, x)] + ([sympy.Le(x, upper)] if upper is not None else [])
