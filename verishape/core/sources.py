"""Name symbols by the inputs they came from, so reports speak of ``L['x'].size()[0]``
rather than ``s0``."""

from __future__ import annotations

from typing import Any

import sympy


def source_name(source: Any) -> str:
    """``Source.name`` is a property in torch 2.11+ and was a method before; accept both."""
    name = source.name
    return name() if callable(name) else str(name)


def symbol_sources(env: Any) -> dict[str, list[str]]:
    """Every symbol of ``env`` that has an input source, with all its sources (a
    duck-sized symbol has several)."""
    out: dict[str, list[str]] = {}
    for sym, sources in env.var_to_sources.items():
        names = [source_name(s) for s in sources]
        if names:
            out[str(sym)] = names
    return out


def describe(expr: sympy.Basic, env: Any) -> str:
    """``expr`` with each symbol replaced by its first input source; data-dependent
    (unbacked) symbols keep their names."""
    names = symbol_sources(env)
    mapping = {s: sympy.Symbol(names[str(s)][0]) for s in expr.free_symbols if str(s) in names}
    return str(expr.xreplace(mapping)) if mapping else str(expr)
