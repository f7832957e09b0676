"""How a new trace's sizes bind a kept compile's symbols: per generic symbol, 1 (the widened sizes), the new trace's
symbol by source, a constant there, or the generic symbol a new symbol makes it one with (docs/compile.md, "Widening as
one obligation, and a gate against regressions (issue 48)"); every generic guard and range is a goal at that point.
Refused: a size the new trace keeps symbolic where the generic trace has a constant, a new symbol whose sources split a
generic symbol's, a generic symbol whose sources take different constants.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sympy
from torch._dynamo.source import TensorProperty

from .canon import NotWidened
from .sizes import Group, bound_sources, by_source, merged_group, merged_into, source_names

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv


@dataclasses.dataclass(frozen=True)
class Binding:
    """The new trace's binding of a kept compile's symbols (see the module docstring)."""

    #: the generic symbols set to ``value`` together (the sizes that arrived at 1)
    group: Group
    value: int
    #: each source name of a generic symbol -> the name both traces' symbols are renamed to
    names: dict[str, str]
    #: generic symbols the new trace fixes: to a constant, or to another generic symbol
    fixed: dict[sympy.Symbol, sympy.Basic]
    #: every generic symbol set to ``value`` (the group's and those torch replaced by them)
    widened: frozenset[sympy.Symbol]

    def point(self, env: ShapeEnv) -> dict[sympy.Symbol, sympy.Basic]:
        """The generic symbols' values at the new call that are not symbols of their own:
        the widened ones at ``value``, the fixed ones (and those torch replaced by them)."""
        fixed = {m: v for s, v in self.fixed.items() for m in merged_into(env, s)}
        return {**{s: sympy.Integer(self.value) for s in self.widened}, **fixed}

    def generic_rename(self, env: ShapeEnv) -> Callable[[sympy.Symbol], sympy.Basic]:
        """A generic symbol -> its value at the point, or the canonical name of it or its value."""
        at = self.point(env)

        def rename(s: sympy.Symbol) -> sympy.Basic:
            v = at.get(s, s)
            if v.is_number:
                return v
            if not (names := source_names(env, v)):
                raise NotWidened(f"symbol {v} has no input source")
            return sympy.Symbol(self.names.get(names[0], names[0]), integer=True)
        return rename

    def nested_rename(self, nested_env: ShapeEnv) -> Callable[[sympy.Symbol], sympy.Basic]:
        """A symbol of the new trace -> the canonical name of the generic symbol it binds."""
        def rename(s: sympy.Symbol) -> sympy.Basic:
            names = source_names(nested_env, s)
            if not names or names[0] not in self.names:
                raise NotWidened(f"symbol {s} of the size-1 trace has no matching input source")
            return sympy.Symbol(self.names[names[0]], integer=True)
        return rename


def bind(env: ShapeEnv, group: Group, nested_env: ShapeEnv, size_now: Callable[[Any], int | None]) -> Binding:
    """The binding of ``env``'s symbols (the kept compile's) by ``nested_env``'s (the new trace's),
    ``group`` at 1; ``size_now(source)``: the new trace's constant for a source (None: symbolic or
    not an input).  :class:`NotWidened` for the bindings the module docstring refuses."""
    widened = frozenset(merged_group(env, group))
    _check_pinned(env, size_now)
    # every generic symbol's sources (replaced ones included: theirs are within what replaced them; a symbol the generic
    # trace pinned to a number is a constant there), and the representatives: the symbols no replacement removed
    all_generic = {frozenset(source_names(env, s)) for s in env.var_to_sources
                   if s not in widened and not _pinned(env, s)} - {frozenset()}
    nested_groups = {frozenset(source_names(nested_env, s)) for s in nested_env.var_to_sources
                     if not _pinned(nested_env, s)} - {frozenset()}
    # a view input's base sized in one trace alone (whether its sizes get symbols of their own
    # depends on how the view is replayed): left out where nothing reads it (:func:`_unread_bases`)
    unread = _unread_bases(env, all_generic - nested_groups)
    nested_groups -= _unread_bases(nested_env, nested_groups - all_generic)
    all_generic -= unread
    generic = {s: g for s in env.var_to_sources if s not in widened and s not in env.replacements
               for g in [frozenset(source_names(env, s))] if g and g not in unread}
    nested_covered, covered = frozenset().union(*nested_groups), frozenset().union(*all_generic)
    if nested_covered - covered:
        raise NotWidened(f"the size-1 trace keeps symbolic sizes the generic trace has as constants "
                         f"({sorted(nested_covered - covered)[:3]})")
    fixed = _constants(env, generic, nested_covered, size_now)
    constant = frozenset().union(*(generic[s] for s in fixed))
    if covered - nested_covered - constant:
        raise NotWidened(f"the size-1 trace binds other input sizes to symbols differently "
                         f"({sorted(covered - nested_covered - constant)[:3]})")
    fixed.update(_merges(generic, all_generic, nested_env, nested_groups))
    names = {n: source_names(env, s)[0] for n, s in by_source(env, set(env.var_to_sources) - widened).items()}
    return Binding(group, 1, names, fixed, widened)


def _pinned(env: ShapeEnv, s: sympy.Symbol) -> bool:
    """``s``, a tensor size, was replaced by a number (specialized back with a guard: a head count
    generic recompiles made a symbol and the weights fix).  Strides and offsets are left to the
    layout's own checks (an input in another layout is copied into the generic one)."""
    return (getattr(env.replacements.get(s), "is_number", False)
            and all(getattr(src, "prop", None) is TensorProperty.SIZE for src in env.var_to_sources.get(s, ())))


def _check_pinned(env: ShapeEnv, size_now: Callable[[Any], int | None]) -> None:
    """A size the generic trace pinned to a number is that number in the artifact: the new trace
    must have it too where it has a constant (one symbolic there is refused by :func:`bind`)."""
    for s in env.var_to_sources:
        if _pinned(env, s):
            for src in env.var_to_sources[s]:
                if (now := size_now(src)) is not None and now != env.replacements[s]:
                    raise NotWidened(f"the size-1 trace has {src.name} = {now} where the generic trace pinned it "
                                     f"to {env.replacements[s]}")


def _constants(env: ShapeEnv, generic: dict[sympy.Symbol, frozenset[str]], nested_covered: frozenset[str],
               size_now: Callable[[Any], int | None]) -> dict[sympy.Symbol, sympy.Basic]:
    """The generic symbols the new trace has as one constant at every source (none kept symbolic): that constant."""
    values = {s: {size_now(src) for src in bound_sources(env, s)} for s, g in generic.items() if not g & nested_covered}
    return {s: sympy.Integer(*ns) for s, ns in values.items() if len(ns) == 1 and None not in ns}  # its one value


def _merges(generic: dict[sympy.Symbol, frozenset[str]], all_generic: set[frozenset[str]], nested_env: ShapeEnv,
            nested_groups: set[frozenset[str]]) -> dict[sympy.Symbol, sympy.Basic]:
    """Generic symbols a new symbol makes one with another (whole): each -> the generic
    symbol of the new symbol's first source (the name it is renamed to)."""
    symbol_of = {n: s for s, g in generic.items() for n in g}
    out: dict[sympy.Symbol, sympy.Basic] = {}
    for symbol in nested_env.var_to_sources:
        names = source_names(nested_env, symbol)
        if not names or frozenset(names) not in nested_groups:
            continue
        if any(n not in symbol_of for n in names):  # sizes of a symbol torch replaced by an expression
            if not any(frozenset(names) <= g for g in all_generic):
                raise NotWidened(f"the size-1 trace makes one symbol of sizes the generic trace keeps apart "
                                 f"({sorted(names)[:3]})")
            continue
        parts = {symbol_of[n] for n in names}
        if len(parts) == 1:
            continue  # within one generic symbol: the generic guards, proved at the point, check the rest
        if any(not generic[p] <= set(names) for p in parts):
            raise NotWidened(f"the size-1 trace makes one symbol of sizes the generic trace keeps apart, in part "
                             f"({sorted(names)[:3]})")
        first = symbol_of[names[0]]  # the name the new symbol is renamed to (``Binding.nested_rename``)
        for p in parts - {first}:
            if out.get(p, first) != first:
                raise NotWidened(f"the size-1 trace equates {sorted(generic[p])[:1]} with two different sizes")
            out[p] = first
    return out


def _unread_bases(env: ShapeEnv, groups: set[frozenset[str]]) -> set[frozenset[str]]:
    """Those of ``groups`` (source names of one symbol each) naming only a view input's ``_base`` sizes whose symbol no
    guard, replacement or deferred assert of ``env`` mentions: Dynamo fakes the base to build the view, its size read by
    nothing else (a graph that took the base as an input would differ from the other graph anyway)."""
    if not groups:
        return set()
    exprs = [g.expr for g in env.guards]
    exprs += [a.expr for asserts in getattr(env, "deferred_runtime_asserts", {}).values() for a in asserts]
    read: set[Any] = set().union(*(e.free_symbols for e in exprs))
    for s, r in env.replacements.items():
        if s != r:
            read |= {s} | getattr(r, "free_symbols", set())
    return {names for symbol in env.var_to_sources if (names := frozenset(source_names(env, symbol))) in groups
            and all("._base." in n for n in names) and symbol not in read}
