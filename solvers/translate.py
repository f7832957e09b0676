"""Translate torch's sympy shape expressions into Z3 terms with Python semantics.

One :class:`Translator` serves one query, so the goal and its assumptions share symbols
and opaque terms.  Note [Exact integer semantics] is enforced here (and tested against
Python's own arithmetic in ``tests/test_translation_differential.py``).  Three ideas keep it exact and sound:

* **Sorts.**  Integer symbols are Z3 ``Int``; exact rationals (sympy ``Rational``,
  ``x/3``) are ``Real``; Python floats (``zf*`` symbols, ``ToFloat``, ``FloatTrueDiv``,
  ``IntTrueDiv``) are IEEE ``Float64``.  No integer is ever relaxed to a real.  A rounded int
  quotient (``math.ceil(n / 2)``) is an integer, exact below 2**53 (``_rounded_quotient``).
* **Definedness.**  Every partial operation (a zero divisor, torch's domain limits on
  ``Mod``/``ModularIndexing``/``CleanDiv``/``PowByNatural``, a float overflow in
  ``float(int)``, ``int(nan)``) records a *side condition*, guarded by the path
  conditions of enclosing ``Where``/``Piecewise`` branches.  A goal is proved only
  together with its side conditions.
* **Opaque terms.**  Anything we cannot model exactly becomes a fresh constant of a sort
  wide enough to hold its real value, with an unknown definedness flag.  A proof is then
  valid for every value the term could take, so it can never be "proved" by accident.

Boolean structure is translated twice (see :class:`Formula`): *strictly*, where every
operand must be defined (used for goals: a proved goal evaluates to True in any
evaluation order), and *leniently*, where ``a or b`` is true as soon as one defined
operand is true (used for premises: every input that really satisfies the premise,
whatever the short-circuit order, is kept).
"""

from __future__ import annotations

import dataclasses
import fractions
from collections.abc import Callable, Iterable

import sympy
import z3
from torch.utils._sympy import functions as tf

from . import pyarith
from .translate_ints import BITWISE, IntegerOps
from .translate_ints import Opaque as _Opaque  # the translator's own signal, raised in both modules
from .symbols import Sort, UntranslatableSymbol, sign_facts, sort_of

_RELATIONS: dict[type, str] = {
    sympy.Eq: "==",
    sympy.Ne: "!=",
    sympy.Lt: "<",
    sympy.Le: "<=",
    sympy.Gt: ">",
    sympy.Ge: ">=",
}

#: torch functions whose value is a float we do not model bit-exactly.
_OPAQUE_FLOAT_FUNCS = (tf.FloatPow, tf.RoundDecimal)

#: roundings of an int quotient decided in integer arithmetic (``Translator._rounded_quotient``)
_QUOTIENT_ROUNDINGS = (pyarith.floor_real, pyarith.ceil_real, pyarith.trunc_real)

@dataclasses.dataclass(frozen=True)
class Formula:
    """A translated boolean.

    ``strict``: defined (every operand, every side condition) and true.
    ``lenient_true`` / ``lenient_false``: true / false under some short-circuit order.
    """

    strict: z3.BoolRef
    lenient_true: z3.BoolRef
    lenient_false: z3.BoolRef


@dataclasses.dataclass(frozen=True)
class _BoolParts:
    value: z3.BoolRef
    defined: z3.BoolRef
    lenient_true: z3.BoolRef
    lenient_false: z3.BoolRef


def _and(items: list[z3.BoolRef]) -> z3.BoolRef:
    if not items:
        return z3.BoolVal(True)
    return items[0] if len(items) == 1 else z3.And(*items)


def _or(items: list[z3.BoolRef]) -> z3.BoolRef:
    if not items:
        return z3.BoolVal(False)
    return items[0] if len(items) == 1 else z3.Or(*items)


def _has_vars(term: z3.ExprRef) -> bool:
    """Whether ``term`` mentions an uninterpreted constant (a variable or opaque term)."""
    todo = [term]
    while todo:
        t = todo.pop()
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            return True
        todo.extend(t.children())
    return False


class Translator(IntegerOps):
    """Translates sympy expressions of one query into Z3.  Not thread-safe; cheap to
    create (one per query)."""

    def __init__(self) -> None:
        self.variables: dict[sympy.Symbol, z3.ExprRef] = {}
        self.axioms: list[z3.BoolRef] = []
        self.opaque: dict[sympy.Basic, z3.ExprRef] = {}
        self._opaque_defined: dict[sympy.Basic, z3.BoolRef] = {}
        self._memo: dict[sympy.Basic, tuple[z3.ExprRef, tuple[z3.BoolRef, ...]]] = {}
        self._names: set[str] = set()
        self._path: list[z3.BoolRef] = []
        self._sides: list[z3.BoolRef] = []
        self._pow_nat = z3.Function("pow_nat", z3.IntSort(), z3.IntSort(), z3.IntSort())
        self._quotients: dict[tuple[int, int], z3.ArithRef] = {}
        self._splits: dict[int, tuple[z3.ArithRef, tuple[list[pyarith.Bit], z3.ArithRef | int]]] = {}

    # ------------------------------------------------------------------ public

    def formula(self, expr: sympy.Basic) -> Formula:
        expr = sympy.sympify(expr)
        parts = self._boolean(expr)
        return Formula(
            strict=z3.And(parts.defined, parts.value),
            lenient_true=parts.lenient_true,
            lenient_false=parts.lenient_false,
        )

    @property
    def is_exact(self) -> bool:
        """True when nothing was made opaque, so the encoding equals the semantics."""
        return not self.opaque

    # ------------------------------------------------------------------ booleans

    def _boolean(self, expr: sympy.Basic) -> _BoolParts:
        if isinstance(expr, sympy.And) or isinstance(expr, sympy.Or):
            subs = [self._boolean(a) for a in expr.args]
            values = [s.value for s in subs]
            defined = _and([s.defined for s in subs])
            if isinstance(expr, sympy.And):
                return _BoolParts(
                    _and(values), defined,
                    _and([s.lenient_true for s in subs]),
                    _or([s.lenient_false for s in subs]),
                )
            return _BoolParts(
                _or(values), defined,
                _or([s.lenient_true for s in subs]),
                _and([s.lenient_false for s in subs]),
            )
        if isinstance(expr, sympy.Not):
            sub = self._boolean(expr.args[0])
            return _BoolParts(z3.Not(sub.value), sub.defined, sub.lenient_false, sub.lenient_true)
        if isinstance(expr, sympy.Implies):
            a, b = expr.args
            return self._boolean(sympy.Or(sympy.Not(a, evaluate=False), b, evaluate=False))
        value, sides = self._collect(lambda: self._atom(expr))
        defined = _and(list(sides))
        return _BoolParts(value, defined, z3.And(defined, value), z3.And(defined, z3.Not(value)))

    def _atom(self, expr: sympy.Basic) -> z3.BoolRef:
        """A boolean leaf: a constant, a comparison, or an opaque predicate."""
        if expr is sympy.true or expr is True:
            return z3.BoolVal(True)
        if expr is sympy.false or expr is False:
            return z3.BoolVal(False)
        try:
            op = _RELATIONS.get(type(expr))
            if op is None:
                if isinstance(expr, sympy.Xor) and len(expr.args) == 2:
                    return z3.Xor(*[self._bool_value(a) for a in expr.args])
                raise _Opaque
            left = self._term(expr.args[0])
            right = self._term(expr.args[1])
            if z3.is_bool(left) or z3.is_bool(right):
                if op not in ("==", "!=") or not (z3.is_bool(left) and z3.is_bool(right)):
                    raise _Opaque
                return left == right if op == "==" else left != right
            return pyarith.compare_exact(op, left, right)
        except (_Opaque, UntranslatableSymbol):
            return self._make_opaque(expr, z3.BoolSort())

    def _bool_value(self, expr: sympy.Basic) -> z3.BoolRef:
        """A boolean used inside a term (a ``Where`` condition): it must be defined."""
        parts = self._boolean(expr)
        self._require(parts.defined)
        return parts.value

    # ------------------------------------------------------------------ terms

    def _collect(self, fn: Callable[[], z3.ExprRef]) -> tuple[z3.ExprRef, tuple[z3.BoolRef, ...]]:
        """Run ``fn`` with a fresh side-condition list and an empty path; return its
        result and the side conditions relative to that point."""
        saved = self._path, self._sides
        self._path, self._sides = [], []
        try:
            value = fn()
            return value, tuple(self._sides)
        finally:
            self._path, self._sides = saved

    def _require(self, cond: z3.BoolRef) -> None:
        if z3.is_true(cond) or (z3.is_app(cond) and not _has_vars(cond) and z3.is_true(z3.simplify(cond))):
            return
        guarded = z3.Implies(_and(self._path), cond) if self._path else cond
        if all(guarded.get_id() != s.get_id() for s in self._sides):
            self._sides.append(guarded)

    def _under(self, cond: z3.BoolRef, fn: Callable[[], z3.ExprRef]) -> z3.ExprRef:
        self._path.append(cond)
        try:
            return fn()
        finally:
            self._path.pop()

    def _term(self, expr: sympy.Basic) -> z3.ExprRef:
        hit = self._memo.get(expr)
        if hit is None:
            def build() -> z3.ExprRef:
                try:
                    return self._term_uncached(expr)
                except (_Opaque, UntranslatableSymbol):
                    return self._make_opaque(expr, self._opaque_sort(expr))
            hit = self._collect(build)
            self._memo[expr] = hit
        term, sides = hit
        for cond in sides:
            self._require(cond)
        return term

    def _term_uncached(self, expr: sympy.Basic) -> z3.ExprRef:
        if isinstance(expr, sympy.logic.boolalg.Boolean) and not isinstance(expr, sympy.Symbol):
            return self._bool_value(expr)
        if isinstance(expr, sympy.Symbol):
            return self._symbol(expr)
        if isinstance(expr, sympy.Integer):
            return z3.IntVal(int(expr))
        if isinstance(expr, sympy.Rational):
            return z3.RealVal(fractions.Fraction(int(expr.p), int(expr.q)))
        if isinstance(expr, sympy.Float):
            value = float(expr)
            if sympy.Float(value)._mpf_ != expr._mpf_:
                raise _Opaque  # more precision than a double holds
            return pyarith.float_const(value)
        if isinstance(expr, sympy.Add):
            return self._fold(expr.args, "+")
        if isinstance(expr, sympy.Mul):
            return self._fold(expr.args, "*")
        if isinstance(expr, sympy.Pow):
            return self._pow(expr)
        handler = self._dispatch(expr)
        if handler is None:
            raise _Opaque
        return handler(expr)

    def _dispatch(self, expr: sympy.Basic) -> Callable[[sympy.Basic], z3.ExprRef] | None:
        for cls, handler in self._handlers():
            if isinstance(expr, cls):
                return handler
        return None

    def _handlers(self) -> Iterable[tuple[type | tuple[type, ...], Callable[[sympy.Basic], z3.ExprRef]]]:
        # Order matters: CleanDiv subclasses FloorDiv.
        return (
            (tf.CleanDiv, self._clean_div),
            (tf.FloorDiv, self._floor_div),
            (tf.PythonMod, self._python_mod),
            (tf.Mod, self._torch_mod),
            (sympy.Mod, self._sympy_mod),
            (tf.ModularIndexing, self._modular_indexing),
            ((tf.Min, tf.Max, sympy.Min, sympy.Max), self._min_max),
            (sympy.Abs, self._abs),
            (tf.Where, self._where),
            (sympy.Piecewise, self._piecewise),
            (tf.IntTrueDiv, self._int_true_div),
            (tf.FloatTrueDiv, self._float_true_div),
            (tf.ToFloat, self._to_float),
            (tf.TruncToFloat, self._trunc_to_float),
            (tf.TruncToInt, lambda e: self._to_int(e, pyarith.trunc_real)),
            (tf.FloorToInt, lambda e: self._to_int(e, pyarith.floor_real)),
            (sympy.floor, lambda e: self._to_int(e, pyarith.floor_real)),
            (tf.CeilToInt, lambda e: self._to_int(e, pyarith.ceil_real)),
            (sympy.ceiling, lambda e: self._to_int(e, pyarith.ceil_real)),
            (tf.RoundToInt, lambda e: self._to_int(e, pyarith.round_half_even)),
            (tf.Identity, lambda e: self._term(e.args[0])),
            (tf.PowByNatural, self._pow_by_natural),
            (tf.LShift, self._lshift),
            (tf.RShift, self._rshift),
            (tuple(BITWISE), self._bitwise),
        )

    # ------------------------------------------------------------------ leaves

    def _symbol(self, symbol: sympy.Symbol) -> z3.ExprRef:
        var = self.variables.get(symbol)
        if var is not None:
            return var
        sort = sort_of(symbol)
        name = self._fresh_name(str(symbol))
        zero: z3.ExprRef
        if sort is Sort.INT:
            var = z3.Int(name)
            zero = z3.IntVal(0)
        else:
            var = z3.FP(name, pyarith.FLOAT64)
            zero = pyarith.float_const(0.0)
        for op in sign_facts(symbol):
            self.axioms.append(pyarith.compare_exact(op, var, zero))
        self.variables[symbol] = var
        return var

    def _fresh_name(self, base: str) -> str:
        name, k = base, 0
        while name in self._names:
            k += 1
            name = f"{base}!{k}"
        self._names.add(name)
        return name

    def _opaque_sort(self, expr: sympy.Basic) -> z3.SortRef:
        if getattr(expr, "is_integer", None):
            return z3.IntSort()
        if isinstance(expr, sympy.logic.boolalg.Boolean):
            return z3.BoolSort()
        if isinstance(expr, _OPAQUE_FLOAT_FUNCS) or type(expr).__name__.startswith("OpaqueUnaryFn_"):
            return pyarith.FLOAT64
        if any(isinstance(s, sympy.Symbol) and s.is_real and not s.is_integer for s in expr.free_symbols):
            return pyarith.FLOAT64
        return z3.RealSort()

    def _make_opaque(self, expr: sympy.Basic, sort: z3.SortRef, *, total: bool = False) -> z3.ExprRef:
        """An arbitrary value of ``sort`` standing for ``expr``, and (unless ``total``)
        an unknown definedness flag: the same sympy expression maps to the same term."""
        term = self.opaque.get(expr)
        if term is None or term.sort() != sort:
            term = z3.Const(self._fresh_name(f"opaque!{len(self.opaque)}"), sort)
            self.opaque[expr] = term
            self._opaque_defined[expr] = z3.Bool(self._fresh_name(f"opaque_defined!{len(self.opaque)}"))
        if not total:
            self._require(self._opaque_defined[expr])
        return term

    # ------------------------------------------------------------------ arithmetic

    def _ints(self, expr: sympy.Basic) -> list[z3.ArithRef]:
        """The arguments of ``expr`` as Int terms; anything else makes ``expr`` opaque."""
        terms = [self._term(a) for a in expr.args]
        if not all(z3.is_int(t) for t in terms):
            raise _Opaque
        return terms

    def _exact_args(self, expr: sympy.Basic) -> list[z3.ArithRef]:
        """Arguments as exact numbers (Int or Real, promoted to Real when mixed)."""
        terms = [self._term(a) for a in expr.args]
        if any(z3.is_fp(t) or z3.is_bool(t) for t in terms):
            raise _Opaque
        if all(z3.is_int(t) for t in terms):
            return terms
        return [z3.ToReal(t) if z3.is_int(t) else t for t in terms]

    def _as_float(self, term: z3.ExprRef) -> z3.FPRef:
        """Python's implicit int→float conversion in mixed float arithmetic."""
        if z3.is_fp(term):
            return term
        if z3.is_bool(term):
            raise _Opaque
        converted = pyarith.to_float(term)
        if z3.is_int_value(term) or z3.is_rational_value(term):
            value = fractions.Fraction(term.as_fraction()) if z3.is_rational_value(term) else fractions.Fraction(term.as_long())
            try:
                if fractions.Fraction(float(value)) != value:
                    raise _Opaque  # a constant that is not a double: printed code would differ
            except OverflowError:
                raise _Opaque from None
            return pyarith.float_const(float(value))
        self._require(z3.Not(z3.fpIsInf(converted)))
        return converted

    def _fold(self, args: tuple[sympy.Basic, ...], op: str) -> z3.ExprRef:
        terms = [self._term(a) for a in args]
        if any(z3.is_bool(t) for t in terms):
            raise _Opaque
        if any(z3.is_fp(t) for t in terms):
            # Float + and * round at each step, so the order matters; we only model the
            # unambiguous two-operand case.
            if len(terms) != 2:
                raise _Opaque
            a, b = (self._as_float(t) for t in terms)
            return z3.fpAdd(pyarith.RNE, a, b) if op == "+" else z3.fpMul(pyarith.RNE, a, b)
        if not all(z3.is_int(t) for t in terms):
            terms = [z3.ToReal(t) if z3.is_int(t) else t for t in terms]
        result = terms[0]
        for t in terms[1:]:
            result = result + t if op == "+" else result * t
        return result

    def _pow(self, expr: sympy.Pow) -> z3.ExprRef:
        base_expr, exp_expr = expr.args
        if not isinstance(exp_expr, sympy.Integer):
            return self._pow_symbolic_exponent(base_expr, exp_expr)
        base = self._term(base_expr)
        if z3.is_fp(base) or z3.is_bool(base):
            raise _Opaque
        n = int(exp_expr)
        if n >= 0:
            return pyarith.int_pow(base, n)
        self._require(base != 0)
        real_base = z3.ToReal(base) if z3.is_int(base) else base
        return 1 / pyarith.int_pow(real_base, -n)

    def _pow_symbolic_exponent(self, base_expr: sympy.Basic, exp_expr: sympy.Basic) -> z3.ExprRef:
        """``b ** e`` (sympy ``Pow``) with a symbolic exponent, as torch 2.11 builds
        ``LShift``/``RShift`` (``x * 2**u``, ``x // 2**u``).  Exact only when ``e`` is a
        natural number by its symbols' assumptions (the sign facts we already assert as
        axioms, and what 2.11 itself checked before building the power) and ``b`` is an
        integer: then it is Python's ``b ** e``, an integer.  A possibly negative exponent
        gives a rational in sympy, which this Int encoding cannot hold: opaque."""
        if not (exp_expr.is_integer and exp_expr.is_nonnegative):
            raise _Opaque
        base, exp = self._term(base_expr), self._term(exp_expr)
        if not (z3.is_int(base) and z3.is_int(exp)):
            raise _Opaque
        self._require(exp >= 0)  # implied by the sign axioms; kept so a proof never leans on sympy alone
        return self._natural_power(base, exp)

    def _floor_div(self, expr: sympy.Basic) -> z3.ExprRef:
        a, b = self._exact_args(expr)
        self._require(b != 0)
        if z3.is_int(a):
            return self._int_floordiv(a, b)
        return pyarith.real_floordiv(a, b)

    def _clean_div(self, expr: sympy.Basic) -> z3.ExprRef:
        a, b = self._ints(expr)
        self._require(b != 0)
        q = self._int_floordiv(a, b)
        self._require(a - b * q == 0)
        return q

    def _python_mod(self, expr: sympy.Basic) -> z3.ExprRef:
        a, b = self._exact_args(expr)
        self._require(b != 0)
        if not z3.is_int(a):
            return pyarith.real_mod(a, b)
        if z3.is_int_value(b):
            return pyarith.pymod(a, b)
        return a - b * self._int_floordiv(a, b)

    def _int_floordiv(self, a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
        """Python ``a // b`` on integers (``b != 0`` is the caller's side condition): Z3's
        division for a constant divisor, else a fresh quotient per ``(a, b)`` defined by
        :func:`pyarith.floordiv_bounds`."""
        if z3.is_int_value(b):
            return pyarith.floordiv(a, b)
        key = (a.get_id(), b.get_id())
        if key not in self._quotients:
            q = z3.Int(self._fresh_name(f"floordiv!{len(self._quotients)}"))
            self.axioms.extend(pyarith.floordiv_bounds(a, b, q))
            self._quotients[key] = q
        return self._quotients[key]

    def _torch_mod(self, expr: sympy.Basic) -> z3.ExprRef:
        """torch's ``Mod`` is only defined for ``a >= 0, b > 0``, where every modulo
        convention agrees.  A symbolic divisor goes through the same fresh floor quotient
        as a ``FloorDiv(a, b)`` elsewhere in the query: ``Eq(8*s, n*((8*s)//n))`` under
        ``Eq(Mod(8*s, n), 0)`` (tiny GPT-2's attention reshape) is then linear in the
        shared quotient, where Z3's own ``mod`` left it unknown after a second."""
        a, b = self._ints(expr)
        self._require(a >= 0)
        self._require(b > 0)
        return self._natural_mod(a, b)

    def _natural_mod(self, a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
        """``a % b`` for ``a >= 0, b > 0`` (the caller's side conditions)."""
        if z3.is_int_value(b):
            return a % b
        return a - b * self._int_floordiv(a, b)

    def _sympy_mod(self, expr: sympy.Basic) -> z3.ExprRef:
        return self._python_mod(expr)

    def _modular_indexing(self, expr: sympy.Basic) -> z3.ExprRef:
        a, b, c = self._ints(expr)
        self._require(a >= 0)
        self._require(b > 0)
        self._require(c > 0)
        # The same quotients as FloorDiv and Mod, so ModularIndexing(a, 1, c) and Mod(a, c)
        # are one term to the solver.
        quotient = a if z3.is_int_value(b) and b.as_long() == 1 else self._int_floordiv(a, b)
        return self._natural_mod(quotient, c)

    def _min_max(self, expr: sympy.Basic) -> z3.ExprRef:
        terms = self._exact_args(expr)
        is_max = isinstance(expr, (tf.Max, sympy.Max))
        result = terms[0]
        for t in terms[1:]:
            result = z3.If(t > result, t, result) if is_max else z3.If(t < result, t, result)
        return result

    def _abs(self, expr: sympy.Basic) -> z3.ExprRef:
        x = self._term(expr.args[0])
        if z3.is_fp(x):
            return z3.fpAbs(x)
        if z3.is_bool(x):
            raise _Opaque
        return z3.If(x >= 0, x, -x)

    def _unify(self, a: z3.ExprRef, b: z3.ExprRef) -> tuple[z3.ExprRef, z3.ExprRef]:
        if a.sort() == b.sort():
            return a, b
        if z3.is_fp(a) or z3.is_fp(b) or z3.is_bool(a) or z3.is_bool(b):
            raise _Opaque
        return (z3.ToReal(a) if z3.is_int(a) else a, z3.ToReal(b) if z3.is_int(b) else b)

    def _where(self, expr: sympy.Basic) -> z3.ExprRef:
        c_expr, a_expr, b_expr = expr.args
        cond = self._bool_value(c_expr)
        a = self._under(cond, lambda: self._term(a_expr))
        b = self._under(z3.Not(cond), lambda: self._term(b_expr))
        a, b = self._unify(a, b)
        return z3.If(cond, a, b)

    def _piecewise(self, expr: sympy.Piecewise) -> z3.ExprRef:
        branches: list[tuple[z3.BoolRef, z3.ExprRef]] = []
        earlier_false: list[z3.BoolRef] = []
        for piece in expr.args:
            e, c = piece.expr, piece.cond
            cond = self._under(_and(earlier_false), lambda c=c: self._bool_value(c)) if earlier_false else self._bool_value(c)
            guard = _and(earlier_false + [cond])
            value = self._under(guard, lambda e=e: self._term(e))
            branches.append((cond, value))
            earlier_false.append(z3.Not(cond))
        # No branch taken: sympy's Piecewise is undefined (nan) there.
        self._require(_or([c for c, _ in branches]))
        result = branches[-1][1]
        for cond, value in reversed(branches[:-1]):
            value, result = self._unify(value, result)
            result = z3.If(cond, value, result)
        return result

    # ------------------------------------------------------------------ floats

    def _int_true_div(self, expr: sympy.Basic) -> z3.ExprRef:
        a, b = self._exact_args(expr)
        self._require(b != 0)
        a_r = z3.ToReal(a) if z3.is_int(a) else a
        b_r = z3.ToReal(b) if z3.is_int(b) else b
        # CPython's int/int is correctly rounded and raises OverflowError past the
        # largest double.
        result = pyarith.to_float(a_r / b_r)
        self._require(z3.Not(z3.fpIsInf(result)))
        return result

    def _float_true_div(self, expr: sympy.Basic) -> z3.ExprRef:
        a, b = (self._as_float(self._term(x)) for x in expr.args)
        self._require(z3.Not(z3.fpIsZero(b)))  # 1.0 / 0.0 raises ZeroDivisionError
        return z3.fpDiv(pyarith.RNE, a, b)

    def _to_float(self, expr: sympy.Basic) -> z3.ExprRef:
        return self._as_float(self._term(expr.args[0]))

    def _trunc_to_float(self, expr: sympy.Basic) -> z3.ExprRef:
        x = self._as_float(self._term(expr.args[0]))
        self._require(pyarith.is_finite(x))
        return z3.fpRoundToIntegral(z3.RTZ(), x)

    def _to_int(self, expr: sympy.Basic, rounding: Callable[[z3.ArithRef], z3.ArithRef]) -> z3.ExprRef:
        if isinstance(expr.args[0], tf.IntTrueDiv) and rounding in _QUOTIENT_ROUNDINGS:
            quotient = self._rounded_quotient(expr, rounding)
            if quotient is not None:
                return quotient
        x = self._term(expr.args[0])
        if z3.is_bool(x):
            raise _Opaque
        if z3.is_int(x):
            return x
        if z3.is_fp(x):
            self._require(pyarith.is_finite(x))  # int(inf) / int(nan) raise
            x = pyarith.float_to_real(x)
        return rounding(x)

    def _rounded_quotient(self, expr: sympy.Basic, rounding: Callable[[z3.ArithRef], z3.ArithRef]
                          ) -> z3.ExprRef | None:
        """``floor``, ``ceil`` or ``trunc`` of an int quotient (a padding's ``math.ceil(n / 2)``)
        in integer arithmetic, without the float theory (``solvers/classes.py``): exact inside
        :data:`pyarith.EXACT_QUOTIENT` (:func:`pyarith.rounded_quotient` says why), opaque past it
        (any integer, with an unknown definedness).  None where an argument is not an integer."""
        a, b = (self._term(x) for x in expr.args[0].args)
        if not (z3.is_int(a) and z3.is_int(b)):
            return None
        self._require(b != 0)
        exact = pyarith.rounded_quotient(rounding, a, b, self._int_floordiv)
        bound = pyarith.EXACT_QUOTIENT
        inside = z3.And(a > -bound, a < bound, b > -bound, b < bound)
        outside = self._make_opaque(expr, z3.IntSort(), total=True)
        self._require(z3.Or(inside, self._opaque_defined[expr]))
        return z3.If(inside, exact, outside)

    # ------------------------------------------------------------------ powers, shifts, bits
