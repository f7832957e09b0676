"""The prover's first tier: refute cheaply before asking Z3, at a few inputs near the real ones.

Most questions that reach the solver on real models cannot be proved: the real inputs
happen to answer them one way, other inputs the other way (``Eq(Mod(8*s1, s0), 0)`` at
``s0 = 24, s1 = 3``).  Z3 then spends from milliseconds to a third of a second (nonlinear
divisibility) finding a counterexample.  Moving one size of the current hints a little
usually finds one in microseconds, with the same reference semantics the solver's
counterexamples are checked against (:mod:`verishape.solvers.concrete`).

Why skipping the solver then changes no decision: the point satisfies every premise
(strict evaluation: defined and true) and the symbols' sign facts, and makes the
target false or undefined; so the premises do not imply the target, and no correct
solver can answer "proved".  :meth:`verishape.solvers.Prover.prove` runs this tier
whenever its caller passes a witness (the real sizes), and answers "refuted" with the
point, exactly as it would with the solver's own counterexample.
A point that cannot be evaluated exactly (an opaque function, a domain error in a
premise) refutes nothing.

A question without real values (Inductor's loop indices: ``x3 < 4`` asked with
``0 <= x3 <= 7`` while an index formula is simplified, every kernel of every compile)
starts from its premises' own bounds instead (:func:`from_bounds`): the same points
break it, and Z3 is not asked to find what a bound shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sympy

from . import concrete
from .symbols import Sort, UntranslatableSymbol, sign_facts, sort_of

#: Points tried per question at most: each costs one evaluation of the target (the
#: premises only where the target fails), far below one solver call.
MAX_POINTS = 48
#: Evaluations (target and premises) per question at most, so that a question with
#: hundreds of connected premises costs at most a few milliseconds here.
MAX_EVALUATIONS = 400

_SIGN = {">": lambda v: v > 0, ">=": lambda v: v >= 0, "<": lambda v: v < 0, "<=": lambda v: v <= 0,
         "!=": lambda v: v != 0}


def counterexample(target: sympy.Basic, premises: Sequence[sympy.Basic], witness: Mapping[sympy.Symbol, Any],
                   first: Mapping[sympy.Symbol, Sequence[int]] | None = None) -> dict[sympy.Symbol, Any] | None:
    """A point that differs from ``witness`` in one integer or float symbol of ``target``,
    satisfies every premise and breaks ``target``; None when none of the points tried does.
    ``first``: values tried first for a symbol (its bounds, :func:`from_bounds`)."""
    symbols = sorted((s for s in target.free_symbols if s in witness and (s.is_integer or _is_float(s))), key=str)
    hints = sorted({int(v) for v in witness.values() if isinstance(v, int) and not isinstance(v, bool)})
    tried = evaluations = 0
    for symbol in symbols:
        values = _values(int(witness[symbol]), hints) if symbol.is_integer else _float_values(float(witness[symbol]))
        if first and symbol in first:
            values = list(dict.fromkeys([*first[symbol], *values]))
        for value in values:
            if not all(_SIGN[op](value) for op in sign_facts(symbol)):
                continue
            tried += 1
            evaluations += 1
            if tried > MAX_POINTS or evaluations > MAX_EVALUATIONS:
                return None
            point = {**witness, symbol: value}
            if not _breaks(target, point):
                continue
            holds, used = _satisfies(premises, point)
            evaluations += used
            if holds:
                return point
    return None


def from_bounds(target: sympy.Basic, premises: Sequence[sympy.Basic]
                ) -> tuple[dict[sympy.Symbol, int], dict[sympy.Symbol, list[int]]] | None:
    """A starting point for :func:`counterexample` where the caller has no real values: each
    symbol at the least value its premises allow (the greatest, where only that is stated),
    and per symbol its bounds and their middle to try first.  Only premises of the form
    ``symbol <op> number`` are read, with each symbol's sign (``positive`` is ``>= 1``);
    None unless every symbol is an integer with a bound and the point keeps every sign
    (a symbol left where it starts is part of the counterexample: it must lie in its
    domain).  The point is a place to start looking, not an assumption: whatever it finds is checked
    against every premise like any other point."""
    low: dict[sympy.Symbol, int] = {}
    high: dict[sympy.Symbol, int] = {}
    for premise in premises:
        bound = _bound(premise)
        if bound is not None:
            symbol, lo, hi = bound
            if lo is not None:
                low[symbol] = max(lo, low.get(symbol, lo))
            if hi is not None:
                high[symbol] = min(hi, high.get(symbol, hi))
    symbols = target.free_symbols.union(*(p.free_symbols for p in premises))
    if not symbols or any(not s.is_integer or (s not in low and s not in high) for s in symbols):
        return None
    for s in symbols:  # a symbol's sign is an axiom of the query, as a premise is
        facts = sign_facts(s)
        if ">" in facts or ">=" in facts:
            low[s] = max(low.get(s, 0), 1 if ">" in facts else 0)
        if "<" in facts or "<=" in facts:
            high[s] = min(high.get(s, 0), -1 if "<" in facts else 0)
    start = {s: low.get(s, high.get(s)) for s in symbols}
    if any(s in low and s in high and low[s] > high[s] for s in symbols) or not all(
            _SIGN[op](start[s]) for s in symbols for op in sign_facts(s)):
        return None  # no point in the box (contradictory premises: the solver says so) or none in a sign
    first = {s: [v for v in (low.get(s), high.get(s)) if v is not None] for s in symbols}
    for s in symbols:
        if s in low and s in high:
            first[s] += [(low[s] + high[s]) // 2, low[s] + 1, high[s] - 1]
    return start, first


def _bound(premise: sympy.Basic) -> tuple[sympy.Symbol, int | None, int | None] | None:
    """``(symbol, least, greatest)`` stated by ``premise`` when it compares a symbol with an
    integer (``x < 8``: ``(x, None, 7)``; ``0 <= x``: ``(x, 0, None)``); None otherwise."""
    if not isinstance(premise, (sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge, sympy.Eq)):
        return None
    lhs, rhs, op = premise.lhs, premise.rhs, premise.rel_op
    if isinstance(lhs, sympy.Integer) and isinstance(rhs, sympy.Symbol):
        lhs, rhs, op = rhs, lhs, {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]
    if not (isinstance(lhs, sympy.Symbol) and isinstance(rhs, sympy.Integer)):
        return None
    n = int(rhs)
    return {"<": (lhs, None, n - 1), "<=": (lhs, None, n), ">": (lhs, n + 1, None), ">=": (lhs, n, None),
            "==": (lhs, n, n)}[op]


def _values(hint: int, hints: Iterable[int]) -> list[int]:
    """Values to try for a symbol whose real value is ``hint``: its neighbours, double and
    half, the small sizes torch specializes, large ones (past a constant bound, past
    int64: the solver's integers are unbounded too), and the other symbols' values
    (equalities between sizes)."""
    near = [hint + 1, hint - 1, 2 * hint, hint // 2, 0, 1, 2, 3, 64 * hint + 65, 2**64]
    for h in hints:
        near += [h, h + 1, h - 1]
    return [v for v in dict.fromkeys(near) if v != hint]


def _is_float(symbol: sympy.Symbol) -> bool:
    try:
        return sort_of(symbol) is Sort.FLOAT
    except UntranslatableSymbol:
        return False


def _float_values(hint: float) -> list[float]:
    """Values to try for a float-valued symbol (a Python float Dynamo did not specialize, a
    scale factor): zero, signs, halves and doubles.  Z3 decides such a question by
    bit-blasting IEEE doubles, tens of milliseconds even where it gives up
    (:mod:`verishape.solvers.classes`); a sign or a zero the premises allow usually breaks
    it in microseconds (``TruncToInt(zf * s) >= 0`` at ``zf = -1``)."""
    near = [0.0, -hint, -1.0, 1.0, hint / 2, 2 * hint, hint + 0.5, -0.5, 0.5]
    return [v for v in dict.fromkeys(near) if v != hint]


def _breaks(target: sympy.Basic, point: Mapping[sympy.Symbol, Any]) -> bool:
    try:
        return concrete.evaluate(target, point) is False
    except concrete.Undefined:
        return True  # the solver's goal is strict: undefined is not "true"
    except concrete.Unevaluable:
        return False


def _satisfies(premises: Sequence[sympy.Basic], point: Mapping[sympy.Symbol, Any]) -> tuple[bool, int]:
    """Whether every premise holds at ``point``, and how many were evaluated (it stops at
    the first that does not)."""
    broken = concrete.first_broken(premises, point)
    return broken is None, len(premises) if broken is None else broken + 1
