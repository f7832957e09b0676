"""Which questions Z3 cannot settle quickly, recognised before it is asked.

A float-valued size (``zf*``, a Python float Dynamo did not specialize) or a conversion
between ints and floats (``IntTrueDiv``, ``ToFloat``, ``TruncToInt`` of a float...) is
modelled as an IEEE double (:mod:`verishape.solvers.translate`), which Z3 decides by
bit-blasting, each unit of its resource counter dear. Under the default resource limit
such a question costs half a second to a second and, in a compile, ends ``unknown`` far
more often than not: PyTorch's own ``test_unspec_float_precision`` (``interpolate`` with a
float scale factor) asked 11 of them, 9 s against stock's 0.6 s for the whole test;
``test_conv1d_symint_padding`` (``ceil((k + n % 2) / 2)``) four of 0.45 s.  A rounded int
quotient (``math.ceil(n / 2)``, that padding) is not one of them: the translation decides
it in integer arithmetic (``Translator._rounded_quotient``), and :data:`ROUNDED_QUOTIENTS`
says so here. In a compile's
scope (a :class:`~verishape.solvers.prover.Budget` with a float limit: Note [A scope's solver budget])
these questions get a resource limit of their own, :data:`FLOAT_RLIMIT`, a
few hundredths of a second: what Z3 settles quickly is still settled, the rest is
``unknown`` (stock's answer) in milliseconds. A caller that asks outside such a scope (the
theorem tests, the translation's differential check, an audit) gets its own limits whole.

The limit is a function of the query and the scope, so the same program still gets the
same answers (Note [Same program, same answer]), and the proof store keys on it like any
other.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import sympy
from torch.utils._sympy import functions as tf

from verishape.proofs.result import Limits

from .symbols import Sort, UntranslatableSymbol, sort_of

#: Z3's resource limit for a question over IEEE doubles: about 10 ms on one core where Z3
#: cannot settle it, most of it setting the question up (10,000: about 45 ms; 50,000: 0.12 s;
#: the default, 1,000,000: about 0.6 s); the 8 questions of ``test_unspec_float_precision``
#: it proves, it proves at 300 as at 10,000 (``benchmarks/compile_cost.py --rows float_sizes``:
#: 1.27x stock's seconds at 10,000, 1.08x to 1.13x here)
FLOAT_RLIMIT = 1_000

#: torch's functions whose translation is an IEEE double, or reads one
FLOAT_FUNCTIONS: tuple[type, ...] = (tf.IntTrueDiv, tf.FloatTrueDiv, tf.ToFloat, tf.TruncToFloat, tf.FloatPow,
                                     tf.RoundDecimal)


def uses_floats(exprs: Iterable[sympy.Basic]) -> bool:
    """Whether any of ``exprs`` holds a float-valued symbol or a float function."""
    return any(_has_floats(expr) for expr in exprs)


#: roundings of an int quotient the translation decides in integer arithmetic
#: (``Translator._rounded_quotient``): ``math.ceil(n / 2)`` asks no float theory
ROUNDED_QUOTIENTS: tuple[type, ...] = (tf.FloorToInt, tf.CeilToInt, tf.TruncToInt, sympy.floor, sympy.ceiling)


@functools.lru_cache(maxsize=65536)
def _has_floats(expr: sympy.Basic) -> bool:
    # asked before the prover's cache for every question of a compile, over premises that
    # recur from question to question: one walk per expression, not per question
    if isinstance(expr, ROUNDED_QUOTIENTS) and isinstance(expr.args[0], tf.IntTrueDiv):
        return any(_has_floats(a) for a in expr.args[0].args)
    if isinstance(expr, FLOAT_FUNCTIONS):
        return True
    if isinstance(expr, sympy.Symbol):
        try:
            return sort_of(expr) is Sort.FLOAT
        except UntranslatableSymbol:
            return False  # opaque in the translation: no float theory either
    return any(_has_floats(a) for a in expr.args)


def limits_for(goal: sympy.Basic, assumptions: Iterable[sympy.Basic], limits: Limits, float_rlimit: int) -> Limits:
    """The limits a question is decided under: ``limits``, with the resource limit cut to
    ``float_rlimit`` for a question over floats."""
    if limits.rlimit > float_rlimit and uses_floats((goal, *assumptions)):
        return dataclasses.replace(limits, rlimit=float_rlimit)
    return limits
