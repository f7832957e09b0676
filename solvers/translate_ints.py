"""The integer operations of :class:`verishape.solvers.translate.Translator` that go beyond
``+ - * // %``: natural powers, shifts and Python's bitwise ``& | ^``, each exact where a
case split or :mod:`verishape.solvers.pyarith`'s bit encoding makes it so and opaque (never
guessed) beyond.  A mixin of the translator: it uses the translator's terms, side conditions
(``_require``), opaque terms and per-query caches, and keeps no state of its own.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import sympy
import z3
from torch.utils._sympy import functions as tf

from . import pyarith

BITWISE = {
    tf.BitwiseFn_bitwise_and: "and",
    tf.BitwiseFn_bitwise_or: "or",
    tf.BitwiseFn_bitwise_xor: "xor",
}
_PY_BITWISE: dict[str, Callable[[int, int], int]] = {
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
}


class Opaque(Exception):
    """Raised inside the translation of a node we cannot model; caught one level up,
    where the node is replaced by an opaque term."""


class IntegerOps:
    """Integer powers, shifts and bitwise operators for :class:`Translator` (a mixin)."""

    # provided by the translator
    axioms: list[z3.BoolRef]
    _pow_nat: Any
    _splits: dict[int, tuple[z3.ArithRef, tuple[list[pyarith.Bit], z3.ArithRef | int]]]
    _ints: Callable[[sympy.Basic], list[z3.ArithRef]]
    _require: Callable[[z3.BoolRef], None]
    _term: Callable[[sympy.Basic], z3.ExprRef]
    _make_opaque: Callable[..., z3.ExprRef]

    def _pow_by_natural(self, expr: sympy.Basic) -> z3.ExprRef:
        base, exp = self._ints(expr)
        self._require(exp >= 0)
        return self._natural_power(base, exp)

    def _natural_power(self, base: z3.ArithRef, exp: z3.ArithRef) -> z3.ArithRef:
        """``base ** exp`` for ``exp >= 0``: exact for small exponents (a case split over
        products; constants for a literal base), an uninterpreted function beyond, so
        large exponents are never guessed."""
        if z3.is_int_value(exp):
            return pyarith.int_pow(base, exp.as_long())
        limit = 64 if z3.is_int_value(base) else 8
        result: z3.ArithRef = self._pow_nat(base, exp)
        for k in range(limit, -1, -1):
            power = z3.IntVal(base.as_long() ** k) if z3.is_int_value(base) else pyarith.int_pow(base, k)
            result = z3.If(exp == k, power, result)
        return result

    def _power_of_two(self, shift: z3.ArithRef) -> z3.ArithRef:
        return self._natural_power(z3.IntVal(2), shift)

    def _lshift(self, expr: sympy.Basic) -> z3.ExprRef:
        a, s = self._ints(expr)
        self._require(s >= 0)  # negative shift count raises ValueError
        return a * self._power_of_two(s)

    def _rshift(self, expr: sympy.Basic) -> z3.ExprRef:
        a, s = self._ints(expr)
        self._require(s >= 0)
        return pyarith.floordiv(a, self._power_of_two(s))

    def _bitwise(self, expr: sympy.Basic) -> z3.ExprRef:
        """Python's ``& | ^`` on integers (bools count as 0/1): the split encoding of
        :mod:`verishape.solvers.pyarith` (exact when one operand fits in
        :data:`pyarith.BITWISE_LOW_BITS` bits and a sign, opaque beyond), with the
        sign and bound facts that hold everywhere.  Python's bitwise operators never
        raise, so the term is total."""
        terms = []
        for arg in expr.args:
            t = self._term(arg)
            if z3.is_bool(t):
                t = z3.If(t, z3.IntVal(1), z3.IntVal(0))
            if not z3.is_int(t):
                raise Opaque
            terms.append(t)
        a, b = terms
        op = BITWISE[type(expr)]
        if z3.is_int_value(a) and z3.is_int_value(b):
            return z3.IntVal(_PY_BITWISE[op](a.as_long(), b.as_long()))
        (a_bits, a_high), (b_bits, b_high) = self._split(a), self._split(b)
        high: z3.ArithRef | int | None = None
        for fill, other in ((a_high, b_high), (b_high, a_high)):
            if isinstance(fill, int) and fill in (0, -1):
                high = pyarith.high_with_fill(op, fill, other)
                break
        if high is None:
            unknown = self._make_opaque(expr, z3.IntSort(), total=True)
            high = pyarith.high_parts(op, _int_term(a_high), _int_term(b_high), unknown)
        result = pyarith.join_bits([pyarith.bit_op(op, x, y) for x, y in zip(a_bits, b_bits)], high)
        self.axioms.extend(pyarith.bitwise_bounds(op, a, b, result))
        return result

    def _split(self, term: z3.ArithRef) -> tuple[list[pyarith.Bit], z3.ArithRef | int]:
        """:func:`pyarith.split_bits`, once per operand term of this query."""
        hit = self._splits.get(term.get_id())
        if hit is None:
            hit = (term, pyarith.split_bits(term))
            self._splits[term.get_id()] = hit
        return hit[1]


def _int_term(value: z3.ArithRef | int) -> z3.ArithRef:
    return z3.IntVal(value) if isinstance(value, int) else value
