"""Premises a ShapeEnv may assume at a given point, as sympy booleans.

Only facts the final artifact really checks are premises (soundness rule 2): installed
guards, runtime asserts that run no later than the assert being decided (rule 4), and
value ranges (which become range guards or come from those asserts).  Facts that share no
symbol with the goal, directly or through other facts, cannot matter and are left out, so
queries stay small and the solver cache sees the same question again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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
