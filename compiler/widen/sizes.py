"""Which sizes of a frame may be widened to 1, and how they are named: symbols, the input
sources bound to them, and the groups of symbols a size-1 call sets to 1 together."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import sympy
from torch._dynamo.source import TensorProperty, TensorPropertySource

from verishape.core.shape_env import VeriShapeEnv

from .canon import NotWidened

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv


def at_one(expr: sympy.Basic, sub: dict[sympy.Symbol, sympy.Basic], what: str) -> sympy.Basic:
    """``expr`` with the widened sizes set (``sub``).  Where it divides by a size that is 0
    there (``FloorDiv(i, s - 1)`` at s = 1: torch's SymPy functions raise), the generic
    artifact would too: a refusal naming ``what``, not an internal error."""
    try:
        return expr.xreplace(sub)
    except ZeroDivisionError:
        raise NotWidened(f"{what} divides by a size that is 0 at 1") from None


def merged_into(env: ShapeEnv, symbol: sympy.Symbol) -> list[sympy.Symbol]:
    """``symbol`` and every symbol torch replaced by it: one size under several names (a guard equating ``input_ids``'
    and ``attention_mask``'s batch), set to 1 together, none left a symbol of its own in the comparison."""
    return [symbol, *_inverse(tuple(env.replacements.items())).get(symbol, ())]


@functools.lru_cache(maxsize=8)
def _inverse(replacements: tuple[tuple[sympy.Symbol, sympy.Basic], ...]) -> dict[sympy.Basic, list[sympy.Symbol]]:
    """Each replacement -> the symbols it replaced, by name: built once per content of an env's replacements (a scan
    per renamed symbol was half of a generic reuse's proof on 16 layers: docs/benchmarks.md).  Read, never changed."""
    inverse: dict[sympy.Basic, list[sympy.Symbol]] = {}
    for s, r in sorted(replacements, key=lambda item: str(item[0])):
        if r != s:
            inverse.setdefault(r, []).append(s)
    return inverse


#: symbols set to 1 together by one size-1 call (sorted by first source name)
Group = tuple[sympy.Symbol, ...]


def merged_group(env: ShapeEnv, symbols: Group) -> set[sympy.Symbol]:
    """Every generic symbol that takes the value 1: the group's and those torch replaced by them."""
    return {m for s in symbols for m in merged_into(env, s)}


def group_name(env: ShapeEnv, group: Group) -> str:
    if not group:
        return "an input's layout"
    names = [(source_names(env, s) or [str(s)])[0] for s in group]
    return names[0] + (f" (with {', '.join(names[1:])} at 1 too)" if len(names) > 1 else "")


def bound_sources(env: ShapeEnv, symbol: sympy.Symbol) -> list[Any]:
    """The input sources whose value is ``symbol`` (its own and those of the symbols replaced by it)."""
    return [src for s in merged_into(env, symbol) for src in env.var_to_sources.get(s, ())]


def source_names(env: ShapeEnv, symbol: sympy.Symbol) -> list[str]:
    return [s.name for s in bound_sources(env, symbol)]


def by_source(env: ShapeEnv, symbols: Iterable[sympy.Symbol]) -> dict[str, sympy.Symbol]:
    """Each source name of ``symbols`` -> the symbol it binds.  Replaced symbols first: a source also listed under the
    symbol that replaced it maps to that symbol, the one the generic guards (``env.replace``) are written in."""
    return {n: s for s in sorted(symbols, key=lambda s: (s not in env.replacements, str(s)))
            for n in source_names(env, s)}


def eligible(env: ShapeEnv) -> set[sympy.Symbol]:
    """Symbols of ``env`` whose lower bound 2 may come from 0/1 specialization: backed,
    bound only to input tensor sizes, range ``[2, upper]``, not replaced."""
    kept = VeriShapeEnv.symbolic_at_one_of(env)  # a candidate's sizes (``candidate.py``): lower bound 0
    kept_at_one = kept.symbols if kept is not None else set()
    return {symbol for symbol in env.var_to_sources
            if (vr := env.var_to_range.get(symbol)) is not None and (vr.lower == 2 or symbol in kept_at_one)
            and symbol not in env.replacements and symbol in env.backed_var_to_val
            and (sources := bound_sources(env, symbol))
            and all(isinstance(s, TensorPropertySource) and s.prop is TensorProperty.SIZE for s in sources)}
