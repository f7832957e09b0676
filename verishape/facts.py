"""Premises a ShapeEnv may assume at a given point, as sympy booleans.

Only facts the final artifact really checks are premises (soundness rule 2): installed
guards, runtime asserts that run no later than the assert being decided (rule 4), and
value ranges (which become range guards or come from those asserts).  Facts that share no
symbol with the goal, directly or through other facts, cannot matter and are left out, so
queries stay small and the solver cache sees the same question again.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import sympy
from torch.utils._sympy.numbers import IntInfinity, NegativeIntInfinity

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


def _finite(bound: object) -> bool:
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
        vr = ranges.get(s)
        if vr is None or getattr(vr, "is_bool", False):
            continue
        lower, upper = vr.lower, vr.upper
        if size_oblivious and s in size_like:
            lower = sympy.Max(2, lower) if _finite(lower) else sympy.Integer(2)
            capped = sympy.Integer(SIZE_OBLIVIOUS_MAX) if not _finite(upper) else sympy.Min(upper, SIZE_OBLIVIOUS_MAX)
            upper = capped - 1 if capped > lower else capped
        if _finite(lower):
            out.append(sympy.Le(lower, s))
        if _finite(upper):
            out.append(sympy.Le(s, upper))
    return out


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
        if isinstance(high, sympy.Symbol) and low.is_Number and _finite(low):
            out.add(high)
    return out


class PlainProver:
    """A prover front end that asks every question with symbols renamed by ``to_plain``
    (see :func:`plain_symbols`).  Names do not change, so counterexamples (keyed by
    name) read as before; results are the wrapped prover's, cache and statistics
    included.  The premises must state the renamed symbols' bounds in a form SymPy has
    not folded away (``Le(0, s, evaluate=False)``): ``0 <= s`` on a positive ``s`` is
    already ``True``."""

    def __init__(self, prover: Any, to_plain: Mapping[sympy.Symbol, sympy.Symbol]) -> None:
        self.prover = prover
        self.to_plain = dict(to_plain)

    def prove(self, goal: object, assumptions: Iterable[object] = (), **kwargs: Any) -> Any:
        rename = self.to_plain
        return self.prover.prove(sympy.sympify(goal).xreplace(rename),
                                 [sympy.sympify(a).xreplace(rename) for a in assumptions], **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.prover, name)
