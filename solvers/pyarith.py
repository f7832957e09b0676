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

from collections.abc import Callable

import z3

FLOAT64 = z3.Float64()
RNE = z3.RNE()
HALF = z3.RealVal("1/2")


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


#: the bound on both operands of an int quotient within which rounding CPython's double
#: quotient to an integer gives what rounding the exact quotient gives (:func:`rounded_quotient`)
EXACT_QUOTIENT = 2**53


def rounded_quotient(rounding: object, a: z3.ArithRef, b: z3.ArithRef,
                     floordiv: Callable[[z3.ArithRef, z3.ArithRef], z3.ArithRef]) -> z3.ArithRef:
    """``math.floor``, ``math.ceil`` or ``math.trunc`` (``rounding``: :func:`floor_real`,
    :func:`ceil_real`, :func:`trunc_real`) of ``a / b`` for ints, from ``floordiv`` (Python's
    ``//``; ``b != 0`` is the caller's side condition).

    Why it is CPython's value where ``|a|`` and ``|b|`` are below :data:`EXACT_QUOTIENT`:
    ``a / b`` is the exact quotient correctly rounded to a double, off by at most 2**-53 of
    it; a quotient that is not an integer lies at least ``1/|b|`` from the nearest integer,
    which the rounding would reach only for ``|a| >= 2**53``; an integer quotient is below
    2**53, so a double exactly; the quotient is at least 2**-53 in size, so the double is
    normal; and nothing overflows.  Round-half-even is not here: its ties need a tighter bound."""
    if rounding is floor_real:
        return floordiv(a, b)
    if rounding is ceil_real:
        return -floordiv(-a, b)
    if rounding is trunc_real:  # the floor of a quotient >= 0, else its ceiling
        return z3.If(z3.Or(a == 0, (a > 0) == (b > 0)), floordiv(a, b), -floordiv(-a, b))
    raise ValueError(f"rounded_quotient: {rounding!r} is not floor, ceil or trunc (this is a verishape bug)")


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
#
# Python's ``& | ^`` act on unbounded two's-complement integers.  Each operand is split
# into its ``k`` low bits and its high part ``x >> k``; low bits combine bit by bit, high
# parts exactly whenever one of them is 0 or -1 (that operand fits in ``k`` bits and a
# sign), else into an opaque value.  Everything stays in linear integer arithmetic.
#
# Why not ``int2bv``/``bv2int`` (the first encoding): Z3 links the integer and
# bit-vector theories through terms with 2**64-sized coefficients whose work its resource
# counter barely counts; a two-symbol ``a & b == 8`` query under ``a, b >= 2`` ran 2-3 s
# (6 s on a loaded machine) before the rlimit stopped it, so load could decide the
# answer.  Here every step is counted: such queries finish or give up in well under a
# second of rlimit-bounded work.

#: Low bits split off each operand.  The encoding is exact when one operand lies in
#: ``[-2**32, 2**32)`` (a literal mask always qualifies when its high part is 0 or -1).
BITWISE_LOW_BITS = 32

#: A bit: an integer term worth 0 or 1, or a Python 0/1 for a literal operand.
Bit = z3.ArithRef | int


def split_bits(value: z3.ArithRef | int, k: int | None = None) -> tuple[list[Bit], z3.ArithRef | int]:
    """``value``'s ``k`` low bits (two's complement) and its high part ``value >> k``.

    A term is halved ``k`` times with Z3's integer division by 2 (floor division for a
    positive divisor, so ``x // 2 == x >> 1``), each bit being ``x - 2 * (x // 2)``.  Every
    coefficient stays 1 or 2, and once ``value`` is known (a pinned symbol, a literal)
    Z3's simplifier folds the whole split to constants."""
    k = BITWISE_LOW_BITS if k is None else k
    if isinstance(value, int) or z3.is_int_value(value):
        v = value if isinstance(value, int) else value.as_long()
        return [(v >> i) & 1 for i in range(k)], v >> k
    bits: list[Bit] = []
    rest: z3.ArithRef = value
    for _ in range(k):
        half = rest / 2
        bits.append(rest - 2 * half)
        rest = half
    return bits, rest


def bit_op(op: str, a: Bit, b: Bit) -> Bit:
    """One bit of ``a op b``, a literal wherever literal bits decide it."""
    if isinstance(a, int) and isinstance(b, int):
        return _PY_OPS[op](a, b)
    if isinstance(a, int):
        a, b = b, a
    if isinstance(b, int):  # a symbolic bit, b a literal one
        if op == "and":
            return a if b else 0
        if op == "or":
            return 1 if b else a
        return 1 - a if b else a
    both = a + b
    if op == "and":
        return z3.If(both == 2, z3.IntVal(1), z3.IntVal(0))
    if op == "or":
        return z3.If(both >= 1, z3.IntVal(1), z3.IntVal(0))
    if op == "xor":
        return z3.If(both == 1, z3.IntVal(1), z3.IntVal(0))
    raise ValueError(f"internal error (a verishape bug): unknown bitwise op {op!r}")


def join_bits(bits: list[Bit], high: z3.ArithRef | int) -> z3.ArithRef:
    """The integer with low ``bits`` and high part ``high``."""
    value: z3.ArithRef | int = high
    for bit in reversed(bits):
        value = 2 * value + bit
    return z3.IntVal(value) if isinstance(value, int) else value


def high_with_fill(op: str, fill: int, other: z3.ArithRef | int) -> z3.ArithRef | int:
    """``fill op other`` for high parts when ``fill`` is 0 or -1 (all bits equal):
    ``0 & y == 0``, ``-1 & y == y``, ``0 | y == y``, ``-1 | y == -1``, ``0 ^ y == y``,
    ``-1 ^ y == -1 - y``."""
    if fill not in (0, -1):
        raise ValueError(f"internal error (a verishape bug): {fill} is not a sign fill")
    if op == "and":
        return other if fill == -1 else 0
    if op == "or":
        return -1 if fill == -1 else other
    if op == "xor":
        return -1 - other if fill == -1 else other
    raise ValueError(f"internal error (a verishape bug): unknown bitwise op {op!r}")


def high_parts(op: str, a: z3.ArithRef, b: z3.ArithRef, unknown: z3.ArithRef) -> z3.ArithRef:
    """``a op b`` for two symbolic high parts: :func:`high_with_fill` whenever one of
    them is 0 or -1, else ``unknown`` (the encoding claims nothing it does not know)."""
    zero, minus_one = z3.IntVal(0), z3.IntVal(-1)
    if op == "and":
        return z3.If(z3.Or(a == 0, b == 0), zero, z3.If(a == -1, b, z3.If(b == -1, a, unknown)))
    if op == "or":
        return z3.If(z3.Or(a == -1, b == -1), minus_one, z3.If(a == 0, b, z3.If(b == 0, a, unknown)))
    if op == "xor":
        return z3.If(a == 0, b, z3.If(b == 0, a, z3.If(a == -1, -1 - b, z3.If(b == -1, -1 - a, unknown))))
    raise ValueError(f"internal error (a verishape bug): unknown bitwise op {op!r}")


def bitwise_bounds(op: str, a: z3.ArithRef, b: z3.ArithRef, r: z3.ArithRef) -> list[z3.BoolRef]:
    """Facts about ``r == a op b`` that hold for all Python ints, stated linearly so the
    solver can prove bounds without searching the bits (and where the value is opaque):
    signs (``a & b < 0`` iff both are negative, ``a | b < 0`` iff one is, ``a ^ b < 0``
    iff exactly one is) and, for non-negative operands, ``a & b <= min(a, b)``,
    ``max(a, b) <= a | b <= a + b``, ``a ^ b <= a + b``."""
    neg_a, neg_b = a < 0, b < 0
    if op == "and":
        return [(r < 0) == z3.And(neg_a, neg_b), z3.Implies(a >= 0, r <= a), z3.Implies(b >= 0, r <= b)]
    if op == "or":
        return [(r < 0) == z3.Or(neg_a, neg_b),
                z3.Implies(z3.And(a >= 0, b >= 0), z3.And(r >= a, r >= b, r <= a + b))]
    if op == "xor":
        return [(r < 0) == z3.Xor(neg_a, neg_b), z3.Implies(z3.And(a >= 0, b >= 0), r <= a + b)]
    raise ValueError(f"internal error (a verishape bug): unknown bitwise op {op!r}")


_PY_OPS = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}
