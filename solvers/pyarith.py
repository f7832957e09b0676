"""Z3 encodings of Python's integer and float arithmetic.

Z3's integer ``div``/``mod`` are *Euclidean* (the remainder is never negative), while
Python's ``//`` rounds toward negative infinity and ``%`` takes the sign of the divisor.
They agree only for positive divisors, so every operator here is spelled out for both
signs.  Division by zero is *not* handled here: Z3 leaves ``x div 0`` unspecified, and the
translator records ``divisor != 0`` as a side condition (a definedness obligation) instead.

Floats are IEEE binary64 (Z3's ``Float64``) with round-to-nearest-even, which is what
CPython does for ``float(int)``, ``int / int`` and float ``+ - * /``.
"""

from __future__ import annotations

import z3

FLOAT64 = z3.Float64()
RNE = z3.RNE()
HALF = z3.RealVal("1/2")


def _is_const(term: z3.ArithRef) -> bool:
    return z3.is_int_value(term) or z3.is_rational_value(term)


def floordiv(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """Python ``a // b`` for integers (``b != 0`` is the caller's side condition).

    For ``b > 0`` Euclidean and floor division coincide.  For ``b < 0``,
    ``floor(a/b) == floor((-a)/(-b))`` and ``-b > 0``, so we reuse the positive case.
    """
    if z3.is_int_value(b):
        value = b.as_long()
        return a / b if value > 0 else (-a) / (-b)
    return z3.If(b > 0, a / b, (-a) / (-b))


def floordiv_bounds(a: z3.ArithRef, b: z3.ArithRef, q: z3.ArithRef) -> list[z3.BoolRef]:
    """Axioms making ``q`` exactly ``a // b`` whenever ``b != 0``: ``b*q <= a < b*q + b``
    for ``b > 0`` and the mirror image for ``b < 0``.  For a symbolic divisor Z3's
    nonlinear reasoning works on these bounds directly, where its built-in ``div`` made
    the window-partition guard queries about three times slower."""
    return [z3.Implies(b > 0, z3.And(b * q <= a, a < b * q + b)),
            z3.Implies(b < 0, z3.And(b * q >= a, a > b * q + b))]


def pymod(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """Python ``a % b`` for integers: ``a - b * (a // b)``, sign of the divisor."""
    if z3.is_int_value(b) and b.as_long() > 0:
        return a % b
    return a - b * floordiv(a, b)


def real_floordiv(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """``floor(a / b)`` for exact rationals (sympy's ``floor`` of a quotient)."""
    return z3.ToInt(a / b)


def real_mod(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """sympy's ``Mod`` on rationals: ``a - b*floor(a/b)``; same sign rule as Python."""
    return a - b * z3.ToReal(z3.ToInt(a / b))


def floor_real(r: z3.ArithRef) -> z3.ArithRef:
    return z3.ToInt(r)


def ceil_real(r: z3.ArithRef) -> z3.ArithRef:
    return -z3.ToInt(-r)


def trunc_real(r: z3.ArithRef) -> z3.ArithRef:
    """Truncation toward zero.  ``ToInt`` is floor, which is wrong for negative values
    (torch's own validator makes exactly that mistake)."""
    return z3.If(r >= 0, z3.ToInt(r), -z3.ToInt(-r))


def round_half_even(r: z3.ArithRef) -> z3.ArithRef:
    """Python's ``round(x)``: nearest integer, ties to the even neighbour."""
    n = z3.ToInt(r)
    frac = r - z3.ToReal(n)
    return z3.If(
        frac < HALF,
        n,
        z3.If(frac > HALF, n + 1, z3.If(n % 2 == 0, n, n + 1)),
    )


def int_pow(base: z3.ArithRef, exponent: int) -> z3.ArithRef:
    """``base ** exponent`` for a literal natural exponent, by repeated squaring so the
    term stays small (Z3 sees a product, not its opaque power operator)."""
    if exponent < 0:
        raise ValueError(f"int_pow wants a natural exponent, got {exponent}")
    result: z3.ArithRef | None = None
    square = base
    e = exponent
    while e:
        if e & 1:
            result = square if result is None else result * square
        e >>= 1
        if e:
            square = square * square
    if result is None:
        return z3.IntVal(1) if base.is_int() else z3.RealVal(1)
    return result


# --------------------------------------------------------------------------- floats


def to_float(value: z3.ArithRef) -> z3.FPRef:
    """``float(x)`` for an Int or Real term: correctly rounded, ties to even.  Python
    raises OverflowError where this gives an infinity; callers add ``not inf`` as a side
    condition."""
    real = z3.ToReal(value) if value.is_int() else value
    return z3.fpToFP(RNE, real, FLOAT64)


def float_const(value: float) -> z3.FPRef:
    return z3.FPVal(value, FLOAT64)


def is_finite(f: z3.FPRef) -> z3.BoolRef:
    return z3.Not(z3.Or(z3.fpIsNaN(f), z3.fpIsInf(f)))


def float_to_real(f: z3.FPRef) -> z3.ArithRef:
    """The exact rational value of a *finite* float (callers guard finiteness)."""
    return z3.fpToReal(f)


def compare_exact(op: str, left: z3.ExprRef, right: z3.ExprRef) -> z3.BoolRef:
    """Python's comparison of numbers of any kinds.

    CPython compares an int (or exact rational) with a float *exactly*, not by rounding
    the int to a float; NaN compares unequal and unordered; infinities order as
    expected.  Float-float comparisons are IEEE comparisons.
    """
    if z3.is_fp(left) and z3.is_fp(right):
        if op in ("==", "!="):
            same = _same_float(left, right)
            if same is not None:
                return same if op == "==" else z3.Not(same)
        return {
            "==": z3.fpEQ,
            "!=": lambda a, b: z3.Not(z3.fpEQ(a, b)),
            "<": z3.fpLT,
            "<=": z3.fpLEQ,
            ">": z3.fpGT,
            ">=": z3.fpGEQ,
        }[op](left, right)
    if not z3.is_fp(left) and not z3.is_fp(right):
        return _arith_compare(op, left, right)
    # Exactly one side is a float.
    if z3.is_fp(left):
        flipped = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
        return compare_exact(flipped, right, left)
    exact, flt = left, right
    exact_real = z3.ToReal(exact) if exact.is_int() else exact
    finite_answer = _arith_compare(op, exact_real, float_to_real(flt))
    # exact OP +inf: true for <, <=, != ; exact OP -inf: true for >, >=, !=.
    pos_inf = op in ("<", "<=", "!=")
    neg_inf = op in (">", ">=", "!=")
    return z3.If(
        z3.fpIsNaN(flt),
        z3.BoolVal(op == "!="),
        z3.If(
            z3.fpIsInf(flt),
            z3.If(z3.fpIsPositive(flt), z3.BoolVal(pos_inf), z3.BoolVal(neg_inf)),
            finite_answer,
        ),
    )


def _same_float(a: z3.FPRef, b: z3.FPRef) -> z3.BoolRef | None:
    """IEEE ``a == b`` as term identity when one side is a constant other than zero and
    NaN: for such a constant the two agree (only +0/-0 and NaN tell them apart), and
    identity lets Z3 substitute the value instead of bit-blasting around it (pinned
    float queries went from 18% unknown to 2%; splitting a zero into its two signed
    identities measured worse, so zeros keep IEEE equality)."""
    for const, other in ((a, b), (b, a)):
        if z3.is_fp_value(const):
            if z3.is_true(z3.simplify(z3.Or(z3.fpIsZero(const), z3.fpIsNaN(const)))):
                return None
            return other == const
    return None


def _arith_compare(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    if a.is_int() != b.is_int():
        a = z3.ToReal(a) if a.is_int() else a
        b = z3.ToReal(b) if b.is_int() else b
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise ValueError(f"internal error (a verishape bug): unknown comparison {op!r}")


# --------------------------------------------------------------------------- bitwise

BITWISE_WIDTH = 64


def fits_signed(term: z3.ArithRef, width: int = BITWISE_WIDTH) -> z3.BoolRef:
    bound = 1 << (width - 1)
    return z3.And(term >= -bound, term < bound)


def bitwise(op: str, a: z3.ArithRef, b: z3.ArithRef, width: int = BITWISE_WIDTH) -> z3.ArithRef:
    """Python's ``& | ^`` on two's-complement integers, exact while both operands fit in
    ``width`` signed bits (the result then fits too).  Outside that range the caller
    substitutes an opaque value, so the encoding never claims more than it knows."""
    bva = z3.Int2BV(a, width)
    bvb = z3.Int2BV(b, width)
    if op == "and":
        r = bva & bvb
    elif op == "or":
        r = bva | bvb
    elif op == "xor":
        r = bva ^ bvb
    else:
        raise ValueError(f"internal error (a verishape bug): unknown bitwise op {op!r}")
    unsigned = z3.BV2Int(r, is_signed=False)
    return z3.If(unsigned >= (1 << (width - 1)), unsigned - (1 << width), unsigned)
