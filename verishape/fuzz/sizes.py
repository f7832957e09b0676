"""Pick concrete input sizes inside (or just outside) a trace's recorded conditions.

The solver (``verishape.solvers.point``: any point that satisfies the assumptions) does the
picking, so points respect every guard, runtime assert
and range exactly, including divisibility and equalities that random sampling would almost
never hit.  Each symbol gets a target (drawn by hypothesis, biased to 0, 1, 2 and to the
constants in guards); the solver is asked for the exact targets first, then for a window
around them, then for any point.  Every symbol is capped so real tensors stay small.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import sympy

import verishape.solvers as solvers
from verishape.solvers import concrete
from verishape.proofs.kinds import Asker

from .inputs import MAX_NUMEL
from .trace import Trace

#: Largest value tried for any one dimension.
MAX_SIDE = 64


def cap_for_rank(rank: int) -> int:
    """Per-dimension cap keeping a rank-``rank`` tensor (plus padding) under MAX_NUMEL."""
    if rank <= 1:
        return MAX_SIDE
    return max(2, min(MAX_SIDE, int(MAX_NUMEL ** (1.0 / (rank + 1)))))


def caps(trace: Trace, ranks: Sequence[int]) -> dict[sympy.Symbol, int]:
    return {sym: cap_for_rank(ranks[leaf]) for sym, (leaf, _) in trace.dims.items()}


def edges(trace: Trace) -> list[int]:
    """Integer constants in the trace's conditions, and their neighbours: the guard edges."""
    found: set[int] = {0, 1, 2}
    for cond in [*trace.guards, *trace.asserts]:
        for atom in cond.atoms(sympy.Integer):
            c = int(atom)
            if 0 <= c <= MAX_SIDE + 1:
                found.update({c - 1, c, c + 1})
    return sorted(v for v in found if 0 <= v <= MAX_SIDE)


@solvers.asked_by(Asker.FUZZ)  # the proof store records who asked
def _solve(assumptions: list[sympy.Basic]) -> dict[str, int] | None:
    return solvers.point(assumptions)


def pick(trace: Trace, ranks: Sequence[int], targets: Mapping[sympy.Symbol, int],
         violate: sympy.Basic | None = None) -> dict[sympy.Symbol, int] | None:
    """A point satisfying the trace's conditions (with ``violate`` negated instead of
    assumed, to step just outside one guard), as close to ``targets`` as the solver finds.
    ``None`` when no such point exists within the caps (or the solver gives up)."""
    cap = caps(trace, ranks)
    bounds = [sympy.Le(sym, cap[sym]) for sym in trace.dims] + [sympy.Ge(sym, 0) for sym in trace.dims]
    if violate is None:
        bases = [trace.conditions() + bounds]
    else:
        # Just outside one guard, keeping the others if possible (guards often restate
        # each other, e.g. a divisibility test twice), else keeping only the ranges.
        others = [c for c in trace.conditions() if c is not violate]
        bases = [others + [sympy.Not(violate)] + bounds, trace.ranges + [sympy.Not(violate)] + bounds]
    exact = [sympy.Eq(sym, min(targets.get(sym, 2), cap[sym])) for sym in trace.dims]
    window = []
    for sym in trace.dims:
        t = min(targets.get(sym, 2), cap[sym])
        window += [sympy.Ge(sym, t // 2), sympy.Le(sym, 2 * t + 2)]
    by_name = {str(s): s for s in trace.dims}
    for base in bases:
        for extra in (exact, window, []):
            model = _solve(base + extra)
            if model is not None:
                point = {by_name[k]: v for k, v in model.items() if k in by_name}
                for sym in trace.dims:
                    point.setdefault(sym, min(targets.get(sym, 2), cap[sym]))
                return point
    return None


def shapes_at(trace: Trace, template: Sequence[Sequence[int]],
              point: Mapping[sympy.Symbol, int]) -> tuple[tuple[int, ...], ...]:
    """Input shapes for ``point``: dims without a symbol (0/1-specialized) keep their size."""
    shapes = [list(s) for s in template]
    for sym, (leaf, dim) in trace.dims.items():
        shapes[leaf][dim] = point[sym]
    return tuple(tuple(s) for s in shapes)


def output_numel_ok(trace: Trace, point: Mapping[sympy.Symbol, int]) -> bool:
    """Whether the predicted outputs at ``point`` stay small enough to run eagerly."""
    for out in trace.outputs or []:
        try:
            n = math.prod(int(concrete.evaluate(s, point)) for s in out.shape)
        except (concrete.Undefined, concrete.Unevaluable, TypeError):
            continue
        if n > MAX_NUMEL:
            return False
    return True
