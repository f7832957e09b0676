"""The prover's proving tier: a goal its premises state, or bound, shown without Z3.

Many questions that reach the solver restate a premise: a guard asked again with the guard
among its premises (``s0 <= 20480`` under ``s0 <= 20480``), a fact torch recorded about a
size expression asked of the same expression (``Ne(T, 0)`` under ``T >= 2``, with ``T`` a
``TruncToInt`` of a float product Z3 would bit-blast), a conjunction of premises, or a
bound that a premise equality settles (``CeilToInt(...) + s//2 - 2 >= 2`` under
``Eq(CeilToInt(...), 3)`` and ``2 <= s``).  Z3 proves each in 10 to 30 ms in a fresh
context; interval arithmetic over the premises' own bounds proves them in microseconds.

Why an answer here is the solver's answer (Note [A bound the premises state]):

* Each side of a comparison is an integer-valued sum ``p + c``; the premises bound such
  sums (``p >= k``, ``p <= k``, ``p == k``), keyed by ``p`` itself, so a bound on a term Z3
  cannot look into (a float truncated to an integer) is as good as one on a symbol.
* A symbol's least and greatest bound move past values that a premise over that symbol
  alone makes false or undefined (``Eq(CeilToInt((s % 2 + 4) / 2), 3)`` rules out ``s = 2``):
  the premises hold, so the symbol never takes them.
* The goal's range is computed from those bounds by exact interval arithmetic over the
  integers (sums, products, floor division and Python's modulo by a positive constant,
  ``Max`` and ``Min``); a ``Max`` or ``Min`` whose arguments' ranges do not overlap is
  replaced by the larger or smaller argument, and an equality premise replaces its term by
  its value, before the goal is compared.
* "Proved" promises the goal defined as well as true wherever the premises hold.  A term
  that has no semantics here (``TruncToInt(...)``, a division by a size) is accepted only
  when it occurs in a premise, which holds, hence is defined; the operations above are
  defined for every integer argument, except torch's ``Mod`` (a non-negative dividend).
* "Proved" also promises premises some input satisfies (else the proof is vacuous, and
  callers refuse it): the tier answers only when the caller's witness, or the least point
  of the premises' own bounds, satisfies every premise, as the solver's path checks.

Anything else (a goal over floats, a disjunction, a divisibility fact) is left to the
solver: this tier answers "proved" or nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sympy
from torch.utils._sympy import functions as tf

from . import concrete, refute
from .symbols import sign_facts

#: A range: least and greatest value, ``-inf``/``inf`` where unbounded.
Range = tuple[float | int, float | int]
_ANY: Range = (-math.inf, math.inf)
_FLIP = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "==": "==", "!=": "!="}
_RELATIONS = (sympy.Ge, sympy.Gt, sympy.Le, sympy.Lt, sympy.Eq, sympy.Ne)


def implied(goal: sympy.Basic, premises: Sequence[sympy.Basic],
            witness: Mapping[sympy.Symbol, Any] | None = None) -> bool:
    """Whether ``premises`` imply ``goal`` (defined and true), shown by their bounds, and
    some point satisfies them; False means "not shown here", never "refuted"."""
    if goal is sympy.true:
        return False  # nothing to save, and the solver's path checks the premises' consistency
    known = _Known.of(premises)
    if not known.shows(goal):
        return False
    return _consistent(goal, premises, witness, known)


def _consistent(goal: sympy.Basic, premises: Sequence[sympy.Basic], witness: Mapping[sympy.Symbol, Any] | None,
                known: _Known) -> bool:
    """A point satisfying every premise: the witness, the premises' least bounds, or each
    symbol's least value past the ends the premises rule out."""
    if witness is not None and concrete.holds(premises, witness):
        return True
    bounded = refute.from_bounds(goal, premises)
    if bounded is not None and concrete.holds(premises, bounded[0]):
        return True
    point = {}
    for symbol in goal.free_symbols.union(*(p.free_symbols for p in premises)):
        r = known.range(symbol)
        if r is None or all(_infinite(v) for v in r):
            return False
        point[symbol] = r[1] if _infinite(r[0]) else r[0]
    return concrete.holds(premises, point)


class _Known:
    """What the premises state: bounds per integer sum, equalities to substitute, the
    premises themselves, and the terms they show defined."""

    def __init__(self) -> None:
        self.stated: set[sympy.Basic] = set()
        self.bounds: dict[sympy.Basic, Range] = {}
        self.values: dict[sympy.Basic, sympy.Integer] = {}
        self._relations: list[sympy.Basic] = []
        self._symbol_ranges: dict[sympy.Symbol, Range | None] = {}

    @functools.cached_property
    def defined(self) -> frozenset[sympy.Basic]:
        """Every term of a comparison among the premises: each premise holds, so each of
        its terms is defined (read only when a goal has a term with no rule here)."""
        return frozenset().union(*map(_terms, self._relations))

    @classmethod
    def of(cls, premises: Iterable[sympy.Basic]) -> _Known:
        known = cls()
        for premise in premises:
            known._add(premise)
        return known

    @functools.cached_property
    def _alone(self) -> dict[sympy.Symbol, list[sympy.Basic]]:
        """The premises over one symbol only, by symbol."""
        alone: dict[sympy.Symbol, list[sympy.Basic]] = {}
        for premise in self.stated:
            free = premise.free_symbols
            if len(free) == 1:
                alone.setdefault(next(iter(free)), []).append(premise)
        return alone

    def symbol_range(self, symbol: sympy.Symbol) -> Range | None:
        """A symbol's range: its bounds and sign, each end moved past values a premise over
        that symbol alone rules out (false or undefined there: ``Eq(CeilToInt((s % 2 + 4) / 2),
        3)`` rules out ``s = 2``), a few steps each way: the premises hold, so the symbol never
        takes such a value.  A premise with no exact semantics here stops the walk.  Worked
        out only for the symbols a goal reaches, once per question."""
        if symbol in self._symbol_ranges:
            return self._symbol_ranges[symbol]
        r = _merge(_structural(self, symbol), self.bounds.get(symbol))
        premises = self._alone.get(symbol)
        if r is not None and premises:
            lo, hi = r
            for _ in range(_END_STEPS):
                if _infinite(lo) or lo > hi or not _rules_out(premises, symbol, lo):
                    break
                lo += 1
            for _ in range(_END_STEPS):
                if _infinite(hi) or lo > hi or not _rules_out(premises, symbol, hi):
                    break
                hi -= 1
            r = (lo, hi)
        self._symbol_ranges[symbol] = r
        return r

    def _add(self, premise: sympy.Basic) -> None:
        if isinstance(premise, sympy.And):
            for arg in premise.args:
                self._add(arg)
            return
        self.stated.add(premise)
        if not isinstance(premise, _RELATIONS):
            return
        self._relations.append(premise)
        form = _normal(premise)
        if form is None:
            return
        p, op, k = form
        lo, hi = self.bounds.get(p, _ANY)
        if op in (">=", ">", "=="):
            lo = max(lo, k + 1 if op == ">" else k)
        if op in ("<=", "<", "=="):
            hi = min(hi, k - 1 if op == "<" else k)
        self.bounds[p] = (lo, hi)
        if op == "==" and not isinstance(p, sympy.Add):
            self.values[p] = sympy.Integer(k)

    def shows(self, goal: sympy.Basic) -> bool:
        if goal in self.stated:
            return True
        if isinstance(goal, sympy.And):
            return all(self.shows(arg) for arg in goal.args)
        if not isinstance(goal, _RELATIONS) or not (_defined(self, goal.lhs) and _defined(self, goal.rhs)):
            return False  # defined before anything is substituted: sympy may cancel a shared term
        simpler = self._simplify(goal.xreplace(self.values) if self.values else goal)
        if simpler is sympy.true:
            return True
        if simpler is sympy.false or not isinstance(simpler, _RELATIONS):
            return False
        form = _normal(simpler)
        if form is None:
            return False
        p, op, k = form
        r = self.range(p)
        if r is None:
            return False
        lo, hi = r
        return {">=": lo >= k, ">": lo > k, "<=": hi <= k, "<": hi < k, "==": lo == hi == k,
                "!=": k < lo or k > hi}[op]

    def _simplify(self, e: sympy.Basic) -> sympy.Basic:
        """``e`` with each ``Max``/``Min`` whose arguments' ranges decide it replaced by the
        winning argument (the others have ranges, so are defined: nothing undefined is
        dropped)."""
        if not e.args or isinstance(e, sympy.Symbol):
            return e
        args = [self._simplify(a) for a in e.args]
        if isinstance(e, (sympy.Max, tf.Max, sympy.Min, tf.Min)):
            ranges = [self.range(a) for a in args]
            if all(r is not None for r in ranges):
                largest = isinstance(e, (sympy.Max, tf.Max))
                for i, (a, r) in enumerate(zip(args, ranges)):
                    if all((r[0] >= o[1]) if largest else (r[1] <= o[0]) for j, o in enumerate(ranges) if j != i):
                        return a
        return e.func(*args) if tuple(args) != e.args else e

    def range(self, e: sympy.Basic) -> Range | None:
        """The least and greatest integer value of ``e`` where the premises hold; None where
        ``e`` is not known integer-valued and defined."""
        return _range(self, e)


#: values tried past each end of a symbol's bounds (:meth:`_Known.symbol_range`)
_END_STEPS = 4


def _rules_out(premises: Sequence[sympy.Basic], symbol: sympy.Symbol, value: int) -> bool:
    """Whether one of ``premises`` (over ``symbol`` alone) is false or undefined at ``value``;
    False where one cannot be evaluated exactly (nothing is concluded from it)."""
    ruled_out = False
    for premise in premises:
        try:
            if concrete.evaluate(premise, {symbol: value}) is not True:
                ruled_out = True
        except concrete.Undefined:
            ruled_out = True
        except concrete.Unevaluable:
            return False
    return ruled_out


def _range(known: _Known, e: sympy.Basic) -> Range | None:
    if isinstance(e, sympy.Symbol):
        return known.symbol_range(e)
    stated = known.bounds.get(e)
    own = _structural(known, e)
    if own is None and (stated is None or e.is_integer is not True or not _defined(known, e)):
        return None
    return _merge(own, stated)


def _merge(own: Range | None, stated: Range | None) -> Range | None:
    """A term's range from its form (None: no rule) narrowed by the premises' bounds on it."""
    if own is None or stated is None:
        return own or stated
    return max(own[0], stated[0]), min(own[1], stated[1])


def _defined(known: _Known, e: sympy.Basic) -> bool:
    """Whether ``e`` is defined wherever the premises hold: built by operations defined
    everywhere from numbers, symbols and terms of the premises."""
    if isinstance(e, (sympy.Number, sympy.Symbol)) or e in known.defined:
        return True
    if isinstance(e, (sympy.Add, sympy.Mul, sympy.Max, tf.Max, sympy.Min, tf.Min)):
        return all(_defined(known, a) for a in e.args)
    if isinstance(e, (tf.FloorDiv, tf.PythonMod, sympy.Mod, tf.Mod)) and isinstance(e.args[1], sympy.Integer) and e.args[1] > 0:
        return _structural(known, e) is not None
    return False


@functools.lru_cache(maxsize=16384)
def _terms(relation: sympy.Basic) -> frozenset[sympy.Basic]:
    return frozenset(sympy.preorder_traversal(relation))


def _structural(known: _Known, e: sympy.Basic) -> Range | None:
    """The range of ``e`` from its own form; None for a term with no rule here."""
    if isinstance(e, sympy.Integer):
        return int(e), int(e)
    if isinstance(e, sympy.Symbol):
        if e.is_integer is not True:
            return None
        facts = sign_facts(e)
        lo = 1 if ">" in facts else 0 if ">=" in facts else -math.inf
        hi = -1 if "<" in facts else 0 if "<=" in facts else math.inf
        return lo, hi
    if isinstance(e, (sympy.Add, sympy.Mul, sympy.Max, tf.Max, sympy.Min, tf.Min)):
        ranges = [_range(known, a) for a in e.args]
        if any(r is None for r in ranges):
            return None
        return functools.reduce(_COMBINE[_kind(e)], ranges)
    if isinstance(e, (tf.FloorDiv, tf.PythonMod, sympy.Mod, tf.Mod)) and isinstance(e.args[1], sympy.Integer) and e.args[1] > 0:
        a, b = _range(known, e.args[0]), int(e.args[1])
        if a is None:
            return None
        if isinstance(e, tf.FloorDiv):
            return _div(a[0], b), _div(a[1], b)
        if isinstance(e, tf.Mod) and a[0] < 0:
            return None  # torch's Mod is undefined on a negative dividend
        return 0, b - 1
    return None


def _kind(e: sympy.Basic) -> str:
    if isinstance(e, sympy.Add):
        return "add"
    if isinstance(e, sympy.Mul):
        return "mul"
    return "max" if isinstance(e, (sympy.Max, tf.Max)) else "min"


def _infinite(v: float | int) -> bool:
    """A bound is an exact int or one of the float infinities; ``math.isinf`` would convert
    an int past a double's range (``2**1100``) and raise."""
    return isinstance(v, float)


def _div(v: float | int, b: int) -> float | int:
    return v if _infinite(v) else v // b


def _plus(x: float | int, y: float | int) -> float | int:
    """A sum of two least (or two greatest) bounds: an infinity wins (never both signs)."""
    return x if _infinite(x) else y if _infinite(y) else x + y


def _times(x: float | int, y: float | int) -> float | int:
    """A product of bounds where ``0 * inf`` is 0 (the values themselves are finite)."""
    if x == 0 or y == 0:
        return 0
    if _infinite(x) or _infinite(y):
        return math.inf if (x > 0) == (y > 0) else -math.inf
    return x * y


def _mul(a: Range, b: Range) -> Range:
    products = [_times(x, y) for x in a for y in b]
    return min(products), max(products)


_COMBINE = {
    "add": lambda a, b: (_plus(a[0], b[0]), _plus(a[1], b[1])),
    "mul": _mul,
    "max": lambda a, b: (max(a[0], b[0]), max(a[1], b[1])),
    "min": lambda a, b: (min(a[0], b[0]), min(a[1], b[1])),
}


@functools.lru_cache(maxsize=16384)
def _normal(relation: sympy.Basic) -> tuple[sympy.Basic, str, int] | None:
    """``relation`` as ``p op k``: ``p`` an integer-valued sum with no constant term and a
    first term that is not negated, ``k`` an integer; None where the sides are not
    integer-valued (floats: left to the solver)."""
    d = relation.lhs - relation.rhs
    if d.is_integer is not True:
        return None
    c, p = d.as_coeff_Add()
    if not isinstance(c, sympy.Integer) or p == 0:
        return None
    op = relation.rel_op
    if p.could_extract_minus_sign():
        p, c, op = -p, -c, _FLIP[op]
    return p, op, -int(c)
