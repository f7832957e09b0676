"""A linear comparison over a box of independent integer ranges: whether both answers occur.

Note [A comparison over unrelated ranges is open]: a question ``sum(c_i * s_i) + k  op  0``
(``op`` one of ``<``, ``<=``, ``>``, ``>=``; integer coefficients; each symbol once) about
integer symbols that no premise mentions has, for facts, the symbols' ranges alone: a box.
Over a box the form's least and greatest values are reached at corners, which are integer
points (finite bounds are integers; an infinite one is approached by integers), so both
answers occur exactly when the form's interval straddles the comparison's threshold.  An
equality or inequality (``==``, ``!=``) is taken only with every coefficient 1 or -1: then
the form takes every integer from its least to its greatest value (walk from one corner to
the other a unit step at a time), so both answers occur exactly when that interval holds 0
and one more value.  Then no sound prover can decide the question from those facts, and
asking one only costs time (PyTorch's ``test_many_overlapping_inputs_does_not_explode_guards``
asks AOTAutograd's aliasing analysis about every pair of 100 views' storage offsets: 4,950
such questions, about 1 ms each through the provers; ``test_recursion_depth_guards`` asks
whether a sum of 2,000 ints is 0, 2 s in Z3).  Checked by :func:`both_occur`, asked only by
:meth:`verishape.core.open_questions.OpenQuestions.open_over_ranges`.  Anything else (an
equality with another coefficient, whose integer solutions a box does not settle; products;
floor division; a symbol without a range) is answered ``False``: not shown open here, so
asked as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import sympy
from torch.utils._sympy.numbers import int_oo

#: a symbol's least and greatest integer value (``-inf``/``inf``: unbounded)
Bounds = tuple[float | int, float | int]

_COMPARISONS = (sympy.StrictLessThan, sympy.LessThan, sympy.StrictGreaterThan, sympy.GreaterThan)
_EQUALITIES = (sympy.Eq, sympy.Ne)


def both_occur(goal: sympy.Basic, bounds: Mapping[sympy.Symbol, Bounds]) -> bool:
    """Whether ``goal``, a linear comparison over symbols each bounded by ``bounds`` and
    independent, is true at some integer point of the box and false at another; False where
    ``goal`` is not of that form or a symbol has no bounds (nothing concluded)."""
    if not isinstance(goal, _COMPARISONS + _EQUALITIES):
        return False
    form = _coefficients(goal.lhs, 1, _coefficients(goal.rhs, -1, {}))  # lhs - rhs, built by hand: SymPy's Add costs more
    if form is None:
        return False
    least = greatest = 0
    for term, c in form.items():
        if c == 0:
            continue
        if isinstance(goal, _EQUALITIES) and term is not sympy.S.One and abs(c) != 1:
            return False
        if term is sympy.S.One:
            least, greatest = least + c, greatest + c
            continue
        if not isinstance(term, sympy.Symbol) or term.is_integer is not True or term not in bounds:
            return False
        lo, hi = bounds[term]
        if lo > hi:
            return False  # an empty range: the facts contradict each other, for the provers to report
        ends = (_times(c, lo), _times(c, hi))
        least, greatest = least + min(ends), greatest + max(ends)
    if isinstance(goal, _EQUALITIES):  # every integer from least to greatest occurs (unit coefficients)
        return least <= 0 <= greatest and least < greatest
    true_at_greatest = {">": greatest > 0, ">=": greatest >= 0, "<": least < 0, "<=": least <= 0}
    false_at_least = {">": least <= 0, ">=": least < 0, "<": greatest >= 0, "<=": greatest > 0}
    return true_at_greatest[goal.rel_op] and false_at_least[goal.rel_op]


def _coefficients(side: sympy.Basic, sign: int, into: dict[sympy.Basic, int] | None) -> dict[sympy.Basic, int] | None:
    """``into`` plus ``sign`` times each term's integer coefficient in ``side`` (the constant under
    ``1``); None where a coefficient is not an integer."""
    if into is None:
        return None
    for term, c in side.as_coefficients_dict().items():
        if not isinstance(c, sympy.Integer):
            return None
        into[term] = into.get(term, 0) + sign * int(c)
    return into


def integer_bounds(lower: sympy.Basic, upper: sympy.Basic) -> Bounds | None:
    """A range's ends as integers or float infinities; None where a finite end is not an integer."""
    ends = []
    for end in (lower, upper):
        if isinstance(end, sympy.Integer):
            ends.append(int(end))
        elif end in _INFINITIES:
            ends.append(_INFINITIES[end])
        else:
            return None
    return ends[0], ends[1]


#: SymPy's infinities and torch's integer ones (``int_oo``, which SymPy does not call infinite)
_INFINITIES = {sympy.oo: math.inf, -sympy.oo: -math.inf, int_oo: math.inf, -int_oo: -math.inf}


def _times(c: int, end: float | int) -> float | int:
    """``c * end`` for a non-zero ``c``, an infinity keeping its sign rule."""
    return c * end if not isinstance(end, float) else (end if c > 0 else -end)
