"""Evaluate torch's sympy expressions on concrete values with Python's own arithmetic.

This is the reference semantics the SMT translation must match, and the check every
counterexample passes before we report it: a model the solver found is re-evaluated
here, and only an assignment that really satisfies the assumptions and really breaks the
goal is returned as "refuted".

Values are ``int``, ``fractions.Fraction`` (sympy's exact rationals), ``float`` and
``bool``.  Evaluation is *strict*: every operand is evaluated, and any domain violation
raises :class:`Undefined`.  torch's ``Mod.eval`` asserts on negative operands, so it
cannot serve as the oracle; we compute with Python operators directly.
"""

from __future__ import annotations

import fractions
import math
import operator
from collections.abc import Iterable, Mapping
from typing import Any

import sympy
from torch.utils._sympy import functions as tf

Number = int | fractions.Fraction | float | bool


#: a handler's "not mine" (a value can be anything, None included)
_NO = object()


class Undefined(Exception):
    """The expression raises (or leaves torch's documented domain) at this point."""


class Unevaluable(Exception):
    """We have no exact reference semantics for this node (an opaque function)."""


_REL = {
    sympy.Eq: operator.eq,
    sympy.Ne: operator.ne,
    sympy.Lt: operator.lt,
    sympy.Le: operator.le,
    sympy.Gt: operator.gt,
    sympy.Ge: operator.ge,
}

_BITWISE = {
    tf.BitwiseFn_bitwise_and: operator.and_,
    tf.BitwiseFn_bitwise_or: operator.or_,
    tf.BitwiseFn_bitwise_xor: operator.xor,
}


def evaluate(expr: sympy.Basic, env: Mapping[sympy.Symbol, Number]) -> Number:
    """Value of ``expr`` with symbols bound by ``env`` (Python semantics)."""
    return _Evaluator(env).eval(sympy.sympify(expr))


def first_broken(conditions: Iterable[sympy.Basic], point: Mapping[sympy.Symbol, Number]) -> int | None:
    """Index of the first of ``conditions`` not true at ``point`` (false, undefined, or
    without exact semantics); None when every one holds.  The one exact "holds at this
    point" test: whatever asks it (refutation, counterexample confirmation, fuzzing,
    range tightening, the audit) reads a condition the way the solver's translation must."""
    for i, cond in enumerate(conditions):
        try:
            if evaluate(cond, point) is not True:
                return i
        except (Undefined, Unevaluable):
            return i
    return None


def holds(conditions: Iterable[sympy.Basic], point: Mapping[sympy.Symbol, Number]) -> bool:
    """Whether every one of ``conditions`` is defined and true at ``point``."""
    return first_broken(conditions, point) is None


def _is_float(v: Number) -> bool:
    return isinstance(v, float)


#: The largest exact result (in bits) a power or a shift is computed to.  Points come from
#: solver models and from the refutation tier, which tries sizes past int64 (``2**64``):
#: ``2 ** 2**64`` would take the process's memory and hang the compile that asked.  Past
#: this the value is Unevaluable, which decides nothing (stock behaviour).
MAX_BITS = 1 << 16


def _sized(bits: int) -> None:
    if bits > MAX_BITS:
        raise Unevaluable(f"a result of about {bits} bits is not computed here (more than {MAX_BITS})")


def _natural_power(b: int | fractions.Fraction, n: int) -> int | fractions.Fraction:
    """``b ** n`` for ``n >= 0``, refusing results larger than :data:`MAX_BITS`."""
    if b not in (0, 1, -1):
        f = fractions.Fraction(b)
        _sized(n * max(abs(f.numerator).bit_length(), f.denominator.bit_length()))
    return b**n


def _require(cond: bool, why: str) -> None:
    if not cond:
        raise Undefined(why)


def _to_float(v: Number) -> float:
    try:
        return float(v)
    except OverflowError as exc:
        raise Undefined(str(exc)) from None


def _exact(v: Number) -> int | fractions.Fraction:
    if isinstance(v, (bool, float)):
        raise Unevaluable(f"expected an exact number, got {v!r}")
    return v


def _norm(v: fractions.Fraction | int) -> int | fractions.Fraction:
    if isinstance(v, fractions.Fraction) and v.denominator == 1:
        return int(v)
    return v


class _Evaluator:
    def __init__(self, env: Mapping[sympy.Symbol, Number]) -> None:
        self.env = env

    def eval(self, e: sympy.Basic) -> Number:  # noqa: C901 - one dispatch table
        if e is sympy.true:
            return True
        if e is sympy.false:
            return False
        if isinstance(e, sympy.Symbol):
            if e not in self.env:
                raise Unevaluable(f"no value for {e}")
            return self.env[e]
        if isinstance(e, sympy.Integer):
            return int(e)
        if isinstance(e, sympy.Rational):
            return fractions.Fraction(int(e.p), int(e.q))
        if isinstance(e, sympy.Float):
            return float(e)
        if isinstance(e, sympy.And):
            return all([bool(self.eval(a)) for a in e.args])
        if isinstance(e, sympy.Or):
            return any([bool(self.eval(a)) for a in e.args])
        if isinstance(e, sympy.Not):
            return not self.eval(e.args[0])
        if isinstance(e, sympy.Implies):
            a, b = (self.eval(x) for x in e.args)
            return (not a) or bool(b)
        if isinstance(e, sympy.Xor) and len(e.args) == 2:
            a, b = (bool(self.eval(x)) for x in e.args)
            return a != b
        rel = _REL.get(type(e))
        if rel is not None:
            return rel(self.eval(e.args[0]), self.eval(e.args[1]))
        if isinstance(e, (sympy.Add, sympy.Mul)):
            return self._fold(e)
        if isinstance(e, sympy.Pow):
            return self._pow(e)
        return self._function(e)

    def _fold(self, e: sympy.Basic) -> Number:
        vals = [self.eval(a) for a in e.args]
        op = operator.add if isinstance(e, sympy.Add) else operator.mul
        if any(_is_float(v) for v in vals):
            if len(vals) != 2:
                raise Unevaluable("float arithmetic over more than two operands")
            a, b = (_to_float(v) for v in vals)
            return op(a, b)
        result = vals[0]
        for v in vals[1:]:
            result = op(result, v)
        return _norm(result)

    def _pow(self, e: sympy.Pow) -> Number:
        base, exp = e.args
        if isinstance(exp, sympy.Integer):
            n = int(exp)
        else:  # a symbolic exponent (torch 2.11's shifts): its value, when an integer
            value = self.eval(exp)
            if isinstance(value, bool) or not isinstance(value, int):
                raise Unevaluable("non-integer exponent")
            n = value
        b = _exact(self.eval(base))
        if n < 0:
            _require(b != 0, "zero to a negative power")
            return _norm(fractions.Fraction(1) / _natural_power(fractions.Fraction(b), -n))
        return _natural_power(b, n)

    def _function(self, e: sympy.Basic) -> Number:
        for handler in (self._division, self._choice, self._real, self._powers_and_bits):
            value = handler(e, e.args)
            if value is not _NO:
                return value
        raise Unevaluable(f"no reference semantics for {type(e).__name__}")

    def _division(self, e: sympy.Basic, args: tuple[sympy.Basic, ...]) -> Any:
        """Python's and torch's integer divisions and moduli (``_NO``: not one of them)."""
        if isinstance(e, tf.CleanDiv):
            a, b = (self._int(x) for x in args)
            _require(b != 0, "division by zero")
            _require(a % b == 0, "CleanDiv of a non-multiple")
            return a // b
        if isinstance(e, tf.FloorDiv):
            a, b = (_exact(self.eval(x)) for x in args)
            _require(b != 0, "division by zero")
            return int(a // b)
        if isinstance(e, (tf.PythonMod, sympy.Mod)):
            a, b = (_exact(self.eval(x)) for x in args)
            _require(b != 0, "modulo by zero")
            return _norm(a % b)
        if isinstance(e, tf.Mod):
            a, b = (self._int(x) for x in args)
            _require(a >= 0 and b > 0, "torch Mod wants a >= 0 and b > 0")
            return a % b
        if isinstance(e, tf.ModularIndexing):
            a, b, c = (self._int(x) for x in args)
            _require(a >= 0 and b > 0 and c > 0, "ModularIndexing wants a >= 0, b > 0, c > 0")
            return (a // b) % c
        return _NO

    def _choice(self, e: sympy.Basic, args: tuple[sympy.Basic, ...]) -> Any:
        """Min, Max, Abs, Where and Piecewise (``_NO``: not one of them)."""
        if isinstance(e, (tf.Min, sympy.Min)):
            return min(_exact(self.eval(a)) for a in args)
        if isinstance(e, (tf.Max, sympy.Max)):
            return max(_exact(self.eval(a)) for a in args)
        if isinstance(e, sympy.Abs):
            return abs(self.eval(args[0]))
        if isinstance(e, tf.Where):
            return self.eval(args[1]) if self.eval(args[0]) else self.eval(args[2])
        if isinstance(e, sympy.Piecewise):
            for piece in args:
                if self.eval(piece.cond):
                    return self.eval(piece.expr)
            raise Undefined("no Piecewise branch applies")
        return _NO

    def _real(self, e: sympy.Basic, args: tuple[sympy.Basic, ...]) -> Any:
        """True divisions, conversions between int and float, rounding (``_NO``: none)."""
        if isinstance(e, tf.IntTrueDiv):
            a, b = (_exact(self.eval(x)) for x in args)
            _require(b != 0, "division by zero")
            try:
                return a / b if isinstance(a, int) and isinstance(b, int) else float(fractions.Fraction(a) / b)
            except OverflowError as exc:
                raise Undefined(str(exc)) from None
        if isinstance(e, tf.FloatTrueDiv):
            a, b = (_to_float(self.eval(x)) for x in args)
            _require(b != 0.0, "float division by zero")
            return a / b
        if isinstance(e, tf.ToFloat):
            return _to_float(self.eval(args[0]))
        if isinstance(e, tf.TruncToFloat):
            x = _to_float(self.eval(args[0]))
            _require(math.isfinite(x), "trunc of a non-finite float")
            return float(math.trunc(x))
        for cls, fn in (
            (tf.TruncToInt, math.trunc),
            (tf.FloorToInt, math.floor),
            (sympy.floor, math.floor),
            (tf.CeilToInt, math.ceil),
            (sympy.ceiling, math.ceil),
            (tf.RoundToInt, round),
        ):
            if isinstance(e, cls):
                x = self.eval(args[0])
                if isinstance(x, float):
                    _require(math.isfinite(x), "int() of a non-finite float")
                return int(fn(x))
        if isinstance(e, tf.Identity):
            return self.eval(args[0])
        return _NO

    def _powers_and_bits(self, e: sympy.Basic, args: tuple[sympy.Basic, ...]) -> Any:
        """Natural powers, shifts and bitwise operators (``_NO``: not one of them)."""
        if isinstance(e, tf.PowByNatural):
            b, n = (self._int(x) for x in args)
            _require(n >= 0, "PowByNatural with a negative exponent")
            return _natural_power(b, n)
        if isinstance(e, tf.LShift):
            a, s = (self._int(x) for x in args)
            _require(s >= 0, "negative shift count")
            if a:
                _sized(a.bit_length() + s)
            return a << s
        if isinstance(e, tf.RShift):
            a, s = (self._int(x) for x in args)
            _require(s >= 0, "negative shift count")
            return a >> s
        op = _BITWISE.get(type(e))
        if op is not None:
            a, b = (self._int(x) for x in args)
            return op(a, b)
        return _NO

    def _int(self, x: sympy.Basic) -> int:
        v = self.eval(x)
        if isinstance(v, bool):
            return int(v)
        if not isinstance(v, int):
            raise Unevaluable(f"expected an int, got {v!r}")
        return v
