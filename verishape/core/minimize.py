"""Guard minimization: drop every shape guard implied by the guards that remain.

Premises are only what the installed guard function really checks (Note [Premises are what the artifact checks], docs/architecture.md):
the guards we keep and the range checks torch emits for every input symbol.  Guards are
tried most expensive first, so implied expensive guards go and cheap ones stay.  Each
removal is proved from the set that remains at that moment; since every guard removed
later is itself implied by the final set, the final set implies all of them.  The result
is then proved equivalent to the stock list in one more query, and installed only if
that proof succeeds: a failed or unknown step leaves the stock list.

A guard that constrains a symbol used as a divisor elsewhere is never dropped (Note [Divisor guards first]):
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
from collections.abc import Callable, Sequence
from typing import Any

import sympy
from torch.fx.experimental.symbolic_shapes import StrictMinMaxConstraint
from torch.utils._sympy import functions as tf

import verishape.solvers as solvers
from verishape.proofs.kinds import Asker, Decision
from verishape.proofs import ProofRecord
from verishape.solvers import concrete

from .premises import Premises, finite, plain_symbols, range_facts, relevant

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
    #: stock guard -> the cheaper equivalent installed in its place (see :func:`cancel`)
    rewritten: dict[sympy.Basic, sympy.Basic] = dataclasses.field(default_factory=dict)
    rewrites: list[ProofRecord] = dataclasses.field(default_factory=list)

    @property
    def applied(self) -> bool:
        return self.equivalence is not None and self.equivalence.result.proved


def cost(expr: sympy.Basic) -> int:
    """How expensive a guard is to check: operations, with division and modulo
    counted heavier (they compile to Python calls)."""
    return int(sympy.count_ops(expr)) + 4 * sum(1 for _ in expr.atoms(*_DIVIDING))


def divisor_symbols(exprs: Sequence[sympy.Basic], prover: solvers.Prover,
                    ranges: dict[sympy.Symbol, object] | None = None, *,
                    size_like: set[sympy.Symbol] | frozenset[sympy.Symbol] = frozenset()) -> set[sympy.Symbol]:
    """Symbols of divisors that might be zero.  A divisor that the installed range
    checks (``ranges``) and its symbols' own assumptions keep nonzero needs no guard in
    front of it; callers pass plain symbols (:func:`verishape.core.premises.plain_symbols`) wherever the
    range check may admit 0."""
    out: set[sympy.Symbol] = set()
    for e in exprs:
        for node in e.atoms(*_DIVIDING):
            for divisor in node.args[1:]:
                if not divisor.free_symbols:
                    continue
                premises = Premises(range_facts(divisor.free_symbols, ranges or {}, size_like=size_like))
                if premises.ask(sympy.Ne(divisor, 0), Decision.DIVISOR_NONZERO, prover=prover) is None:
                    out |= divisor.free_symbols
    return out


@solvers.asked_by(Asker.MINIMIZE)  # the proof store records who asked
def minimize(guards: Sequence[sympy.Basic], ranges: dict[sympy.Symbol, object],
             prover: solvers.Prover, *, size_like: set[sympy.Symbol] | frozenset[sympy.Symbol] = frozenset(),
             witness: dict[sympy.Symbol, int] | None = None, tighten_ranges: bool = False) -> Minimization:
    """``ranges``: the range of every input symbol, each installed as a range check.
    ``witness``: values satisfying every guard (the size hints), sparing vacuity solves.
    ``tighten_ranges``: also fold single-symbol guards into range checks (:func:`tighten`)."""
    start = time.perf_counter()
    originals = list(dict.fromkeys(guards))
    # Work on plain integers: a size symbol is declared positive, but the guard function
    # also runs on inputs its range check admits, and that check may admit 0 (for
    # example under backed_size_oblivious).  The installed range checks are premises.
    to_plain = plain_symbols(originals)
    if to_plain is None:  # a plain twin of a size symbol already occurs: drop nothing
        return Minimization(originals, originals, [], None, time.perf_counter() - start)
    stock = [g.xreplace(to_plain) for g in originals]
    if len(set(stock)) < len(stock):  # two guards differing only by assumptions: keep them apart
        to_plain, stock = {}, list(originals)
    back = {v: k for k, v in to_plain.items()}
    original_of = dict(zip(stock, originals))
    ranges = {to_plain.get(s, s): r for s, r in ranges.items()}
    witness = {to_plain.get(s, s): v for s, v in witness.items()} if witness else witness
    protectors = divisor_symbols(stock, prover, ranges, size_like={to_plain.get(s, s) for s in size_like})
    dropped: list[ProofRecord] = []

    def range_premises(exprs: Sequence[sympy.Basic]) -> list[sympy.Basic]:
        symbols = set().union(*(e.free_symbols for e in exprs)) if exprs else set()
        return range_facts(symbols, ranges, size_like=size_like)

    # Cheaper equivalents first, so that the drop pass and tightening see them.
    kept, rewritten, rewrites = _rewrite_pass(stock, ranges, prover, witness, range_premises)
    kept = _drop_pass(kept, protectors, prover, witness, range_premises, dropped)
    tightened: list[Tightening] = []
    if tighten_ranges:
        tight_kept, tight, folded = tighten(kept, ranges, prover, protectors=protectors)
        # Stock prints each range bound on the caller's symbol; a bound that SymPy's
        # declaration folds to False (``s <= 0`` for a positive ``s``, reachable under
        # backed_size_oblivious) cannot be printed: keep the guards then.
        if not any(_folds_to_false(back.get(t.symbol, t.symbol), t.lower, t.upper) for t in tight):
            kept, tightened = tight_kept, tight
            dropped.extend(folded)
    equivalence = None
    if dropped or rewritten:
        equivalence = _equivalence(stock, kept, tightened, bool(rewritten), prover, witness, range_premises)
        if not equivalence.result.proved or equivalence.result.vacuous:
            kept, tightened = list(stock), []
    # Report in the caller's symbols; the proof records keep what was really proved.
    applied = equivalence is not None and equivalence.result.proved
    to_orig = {v: k for k, v in to_plain.items()}
    rewritten_of = {new: old for old, new in rewritten.items()} if applied else {}

    def orig(g: sympy.Basic) -> sympy.Basic:
        return original_of[g] if g in original_of else g.xreplace(to_orig)

    kept_orig = [orig(g) for g in kept]
    tightened_orig = [dataclasses.replace(t, symbol=back.get(t.symbol, t.symbol),
                                          folded=tuple(orig(rewritten_of.get(g, g)) for g in t.folded))
                      for t in tightened]
    rewritten_orig = {original_of[old]: new.xreplace(to_orig) for old, new in rewritten.items()
                      if new in kept} if applied else {}
    return Minimization(originals, kept_orig, dropped, equivalence, time.perf_counter() - start, tightened_orig,
                        rewritten_orig, rewrites if applied else [])


RangePremises = Callable[[Sequence[sympy.Basic]], list[sympy.Basic]]


def _rewrite_pass(stock: list[sympy.Basic], ranges: dict[sympy.Symbol, object], prover: solvers.Prover,
                  witness: dict[sympy.Symbol, int] | None, range_premises: RangePremises
                  ) -> tuple[list[sympy.Basic], dict[sympy.Basic, sympy.Basic], list[ProofRecord]]:
    """Each guard replaced by its cheaper equivalent (:func:`cancel`) where both directions
    are proved; returns the guards, old -> new, and the proofs (both directions each)."""
    rewritten: dict[sympy.Basic, sympy.Basic] = {}
    rewrites: list[ProofRecord] = []
    kept: list[sympy.Basic] = []
    for g in stock:
        # A rewrite keeps the guard's place and raises exactly when the guard does (only
        # symbols and constants are cancelled), so divisor protection is unaffected.
        new = cancel(g, ranges)
        if new is not None and new not in kept and new not in stock:
            premises = range_premises([g])
            there = Premises([g, *premises], witness=witness).ask(new, Decision.GUARD_REWRITTEN, prover=prover)
            back = there and Premises([new, *premises], witness=witness).ask(g, Decision.GUARD_REWRITTEN, prover=prover)
            if there and back:
                rewritten[g] = new
                rewrites += [there, back]  # both directions, each exactly as proved (and re-checkable)
                g = new
        kept.append(g)
    return kept, rewritten, rewrites


def _drop_pass(kept: list[sympy.Basic], protectors: set[sympy.Symbol], prover: solvers.Prover,
               witness: dict[sympy.Symbol, int] | None, range_premises: RangePremises,
               dropped: list[ProofRecord]) -> list[sympy.Basic]:
    """Drop, most expensive first, every guard the remaining ones and the range checks
    imply (not one that keeps a divisor nonzero); the proofs go to ``dropped``."""
    for g in sorted(kept, key=cost, reverse=True):
        if g.free_symbols & protectors:
            continue
        rest = [k for k in kept if k is not g]
        premises = relevant(g, rest)
        if not premises:
            continue
        record = Premises(premises + range_premises([g, *premises]), witness=witness).ask(g, Decision.GUARD_DROPPED,
                                                                                        prover=prover)
        if record is not None:
            dropped.append(record)
            kept = rest
    return kept


def _equivalence(stock: list[sympy.Basic], kept: list[sympy.Basic], tightened: list[Tightening],
                 rewritten: bool, prover: solvers.Prover, witness: dict[sympy.Symbol, int] | None,
                 range_premises: RangePremises) -> ProofRecord:
    """The installed function checks the kept guards and every input symbol's range
    (tightened where folded); it must accept exactly what the stock one accepts."""
    old_ranges = range_premises(stock)
    new_by_symbol = {t.symbol: t for t in tightened}
    new_ranges = [f for f in old_ranges if not (f.free_symbols & new_by_symbol.keys())]
    new_ranges += [f for t in tightened for f in t.facts()]
    record = Premises(kept + new_ranges, witness=witness).decide(sympy.And(*stock, *old_ranges),
                                                                 Decision.GUARD_SET_EQUIVALENCE, prover=prover)
    if record.result.proved and not record.result.vacuous and (rewritten or tightened):
        # Installed facts that are not stock's own must follow from stock's too.
        converse = Premises([*stock, *old_ranges], witness=witness).decide(
            sympy.And(*kept, *new_ranges), Decision.GUARD_SET_EQUIVALENCE, prover=prover)
        if not converse.result.proved or converse.result.vacuous:
            record = dataclasses.replace(record, result=converse.result)
    return record


def cancel(g: sympy.Basic, ranges: dict[sympy.Symbol, object]) -> sympy.Basic | None:
    """``a*b*X == a*b*Y`` as ``X == Y`` when every cancelled factor is a nonzero constant
    or a power of a symbol whose range excludes 0 (view and reshape guards multiply
    every size in: ``s0*s1*s2 == 4*s0*s1*(s2 // 4)`` says ``s2 == 4*(s2 // 4)``).
    None when nothing cancels.  The caller proves the two equivalent."""
    if not isinstance(g, (sympy.Eq, sympy.Ne)):
        return None
    diff = sympy.factor_terms(g.lhs - g.rhs)
    if not isinstance(diff, sympy.Mul):
        return None
    rest, cancelled = [], False
    for f in diff.args:
        base = f.base if isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp > 0 else f
        if f.is_Number and f != 0 or isinstance(base, sympy.Symbol) and _excludes_zero(ranges.get(base)):
            cancelled = True
        else:
            rest.append(f)
    if not cancelled or not rest:
        return None
    terms = sympy.Add.make_args(sympy.expand(sympy.Mul(*rest)))
    lhs = sympy.Add(*(t for t in terms if not t.could_extract_minus_sign()))
    rhs = sympy.Add(*(-t for t in terms if t.could_extract_minus_sign()))
    new = type(g)(lhs, rhs)
    if new in (sympy.true, sympy.false) or cost(new) >= cost(g):
        return None
    return new


def _excludes_zero(vr: object) -> bool:
    lower, upper = getattr(vr, "lower", None), getattr(vr, "upper", None)
    return (finite(lower) and lower > 0) or (finite(upper) and upper < 0)


def tighten(kept: Sequence[sympy.Basic], ranges: dict[sympy.Symbol, object], prover: solvers.Prover, *,
            protectors: set[sympy.Symbol] | frozenset[sympy.Symbol] = frozenset(),
            ) -> tuple[list[sympy.Basic], list[Tightening], list[ProofRecord]]:
    """Tighten an input symbol's range check to what its single-symbol guards allow,
    and fold into it every such guard the tighter range (with the guards left) implies.
    Returns the guards left, the tightenings and a drop record for every folded guard.

    The new bounds are found by evaluating the guards on concrete values near the old
    lower bound (cheap, and exact: a guard that raises rejects the value, as it does at
    run time); the solver then proves, on an unconstrained integer standing for the
    symbol, that the old range with the guards implies the new range, and proves each
    folded guard.  Anything unproved leaves the symbol alone.
    """
    by_symbol: dict[sympy.Symbol, list[sympy.Basic]] = {}
    kept = list(dict.fromkeys(kept))
    for g in kept:
        if len(g.free_symbols) == 1:
            (sym,) = g.free_symbols
            by_symbol.setdefault(sym, []).append(g)
    out = list(kept)
    tightenings: list[Tightening] = []
    records: list[ProofRecord] = []
    for sym, group in sorted(by_symbol.items(), key=lambda kv: str(kv[0])):
        vr = ranges.get(sym)
        if vr is None or not sym.is_integer or sym in protectors or not finite(getattr(vr, "lower", None)):
            continue
        bounds = _tighter_range(sym, group, vr, prover)
        if bounds is None:
            continue
        lower, upper, proof = bounds
        new = _interval(sym, lower, upper)
        remaining = list(group)
        folded: list[sympy.Basic] = []
        folded_records: list[ProofRecord] = []
        for g in sorted(group, key=cost, reverse=True):
            others = [h for h in remaining if h != g]
            record = Premises(new + others).ask(g, Decision.GUARD_DROPPED, prover=prover)
            if record is not None:
                folded.append(g)
                remaining = others
                folded_records.append(record)
        if not folded:
            continue  # a tighter range alone saves no line: print stock's
        tightenings.append(Tightening(sym, lower, upper, tuple(folded), proof))
        records.extend(folded_records)
        out = [g for g in out if g not in folded]
    return out, tightenings, records


def _accepts(group: Sequence[sympy.Basic], sym: sympy.Symbol, value: int) -> bool:
    try:
        return all(concrete.evaluate(g, {sym: value}) is True for g in group)
    except concrete.Undefined:
        return False  # the guard function raises: the value is rejected


def _tighter_range(sym: sympy.Symbol, group: Sequence[sympy.Basic], vr: object,
                   prover: solvers.Prover) -> tuple[int, int | None, ProofRecord] | None:
    """The tightest range found for ``sym`` under its guards, proved implied by the old
    range and the guards: first the run of accepted values starting at the smallest
    one (an exact interval, as for ``s % 4 == 0`` with ``s // 4 == 1``), else from the
    smallest accepted value up to the old upper bound."""
    old_lower = int(vr.lower)  # type: ignore[attr-defined]
    old_upper = int(vr.upper) if finite(vr.upper) else None  # type: ignore[attr-defined]
    stop = old_lower + _SCAN if old_upper is None else min(old_upper, old_lower + _SCAN)
    try:
        lower = next((v for v in range(old_lower, stop + 1) if _accepts(group, sym, v)), None)
        if lower is None:
            return None
        end = lower + _SCAN if old_upper is None else min(old_upper, lower + _SCAN)
        run_end = next((v - 1 for v in range(lower + 1, end + 1) if not _accepts(group, sym, v)), old_upper)
    except concrete.Unevaluable:
        return None
    # Prove it on an unconstrained integer: no size assumption is needed, because both
    # ranges bound the value from below.
    x = sympy.Symbol(f"{sym.name}_t", integer=True)
    premises = _interval(x, old_lower, old_upper) + [g.xreplace({sym: x}) for g in group]
    for upper in dict.fromkeys([run_end, old_upper]):
        if lower == old_lower and upper == old_upper:
            return None  # nothing tighter to say
        record = Premises(premises).ask(sympy.And(*_interval(x, lower, upper)), Decision.RANGE_TIGHTENED, prover=prover)
        if record is not None:
            return lower, upper, record
    return None


def _interval(x: sympy.Symbol, lower: int, upper: int | None) -> list[sympy.Basic]:
    """``lower <= x <= upper``, unevaluated: SymPy would fold ``1 <= s`` to True for a
    positive ``s``, and a reported tightened range must still say what it is."""
    return [sympy.Le(lower, x, evaluate=False)] + ([sympy.Le(x, upper, evaluate=False)] if upper is not None else [])


def _folds_to_false(x: sympy.Symbol, lower: int, upper: int | None) -> bool:
    """Whether SymPy's declaration of ``x`` contradicts a bound of ``lower..upper``."""
    return sympy.Le(lower, x) is sympy.false or (upper is not None and sympy.Le(x, upper) is sympy.false)


def has_strict_constraints(input_contexts: Any) -> bool:
    """Whether some input carries a min/max constraint (``mark_dynamic(min=, max=)``,
    export's ``Dim``): stock checks those against the printed ranges and reports
    violations, so ranges stay exactly stock's there."""
    for ctx in input_contexts or ():
        for c in getattr(ctx, "constraint_sizes", None) or ():
            if isinstance(c, StrictMinMaxConstraint):
                return True
    return False


def without_repeated_lines(helpers: Any) -> Any:
    """Drop a guard line that repeats an earlier one word for word (torch prints a
    specialized float global once per use).  Evaluating the same pure expression twice
    cannot change the verdict.  The language renderings are parallel lists, so a line is
    dropped from all of them or from none."""
    if not isinstance(helpers, list) or not helpers:
        return helpers
    lists = [getattr(h, "exprs", None) for h in helpers]
    if any(not isinstance(e, list) for e in lists) or len({len(e) for e in lists}) != 1:
        return helpers
    seen: set[str] = set()
    repeats = []
    for i, line in enumerate(lists[0]):
        if line in seen:
            repeats.append(i)
        seen.add(line)
    for i in reversed(repeats):
        for e in lists:
            del e[i]
    return helpers
