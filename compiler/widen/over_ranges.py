"""A torch layout function recomputed for every value of the sizes that stay symbolic.

At a widened point the frame's other sizes (a decoder's sequence length at batch 1) stay symbols over their generic
ranges.  :mod:`verishape.compiler.widen.recompute` then runs torch's function on SymInts of a throwaway ShapeEnv that
knows only each symbol's range (:class:`Symbols`): a comparison those ranges do not decide raises, and the caller
refuses.  A result obtained this way holds for every value in the ranges, which the reused artifact's own guards and
ranges (proved at the point) keep the inputs in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy


class NotANumber(Exception):
    """A size that is not a number at the point (or divides by a size that is 0 there)."""


def at_point(e: Any, sub: dict[sympy.Symbol, sympy.Basic]) -> sympy.Expr:
    """``e`` with the point's sizes set (other symbols stay)."""
    try:
        return sympy.sympify(sympy.sympify(e).xreplace(sub))
    except ZeroDivisionError:  # divides by a size that is 0 at ``sub``
        raise NotANumber(e) from None


def number(e: Any, sub: dict[sympy.Symbol, sympy.Basic]) -> int:
    """``e`` at the point, which must make it an integer (else :class:`NotANumber`)."""
    value = at_point(e, sub)
    if not value.is_Integer:
        raise NotANumber(value)
    return int(value)


def exprs(values: Any) -> tuple[sympy.Expr, ...]:
    """Sizes (ints or SymInts) as sympy expressions."""
    return tuple(v.node.expr if hasattr(v, "node") else sympy.Integer(v) for v in values)


class Undecided(Exception):
    """The function compared sizes in a way the ranges alone do not decide."""


class Symbols:
    """A throwaway ShapeEnv in which each symbol of the expressions given is an unbacked size with its range and
    nothing else known.  It never guards and never falls back (``guard_or_false`` and kin included): what runs on it
    answers for every value in the ranges, or raises :class:`Undecided`."""

    def __init__(self, exprs: Sequence[sympy.Expr], ranges: Mapping[sympy.Symbol, Any]) -> None:
        free = sorted(set().union(*(sympy.sympify(e).free_symbols for e in exprs)), key=str)
        if unranged := [s for s in free if s not in ranges]:
            raise Undecided(f"no range for {unranged}")
        from verishape.core import torch_seam

        class Strict(torch_seam.stock_shape_env()):  # type: ignore[misc]
            def evaluate_expr(self, *args: Any, **kwargs: Any) -> Any:
                kwargs.pop("fallback_value", None)  # no guess where the ranges do not decide
                return super().evaluate_expr(*args, **kwargs)

        self.env = Strict()
        self.mapping: dict[sympy.Symbol, sympy.Symbol] = {s: self.env.create_unbacked_symint().node.expr for s in free}
        self.env.var_to_range.update({unbacked: ranges[s] for s, unbacked in self.mapping.items()})
        self.back = {v: k for k, v in self.mapping.items()}

    def expr(self, e: sympy.Expr) -> sympy.Expr | int:
        """``e`` over this env's symbols (an int where it is a number)."""
        e = sympy.sympify(e).xreplace(self.mapping)
        return int(e) if e.is_number else e

    def value(self, e: sympy.Expr) -> Any:
        e = self.expr(e)
        return e if isinstance(e, int) else self.env.create_symintnode(e, hint=None)


def decided(fn: Callable[[], Any]) -> Any:
    """``fn()``, with a comparison its ranges do not decide turned into :class:`Undecided`."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    try:
        return fn()
    except GuardOnDataDependentSymNode as exc:
        raise Undecided(str(exc).splitlines()[0]) from None


@dataclasses.dataclass
class Recorded:
    """A call of a torch layout function recorded while a generic compile is lowered (a subclass per
    function; a bare one: a call whose operands could not be recorded), right at a widened point where
    the same function gives the recorded result there, as the lowering reads it (a size not a number
    where one is needed, or a comparison the ranges do not decide: not right)."""

    #: the call returned (its result is unset while it runs)
    done: bool = dataclasses.field(default=False, kw_only=True)
    #: the ranges of the symbols in its sizes and strides, where it was asked
    ranges: dict[sympy.Symbol, Any] = dataclasses.field(default_factory=dict, kw_only=True)

    def right_at(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        """Whether the call is right at ``sub`` (the widened sizes set; others over their ranges)."""
        try:
            return self.done and self._right_at(sub)
        except (NotANumber, Undecided):
            return False

    def _right_at(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        return False  # recorded without its operands: never right


def same(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Whether two size expressions are equal for every value of their symbols (proved by
    simplification to 0; anything else counts as not equal)."""
    diff = sympy.sympify(a) - sympy.sympify(b)
    return diff == 0 if diff.is_number else sympy.simplify(diff) == 0
