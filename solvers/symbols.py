"""Which SMT sort a sympy symbol gets, and the facts its assumptions carry.

torch names integer sizes ``s*``/``u*`` and creates them with ``integer=True`` (and
``positive=True`` for backed sizes); float symbols ``zf*`` are created ``real=True``.  We
read the assumptions, never the names: a symbol's name is not a contract.
"""

from __future__ import annotations

import enum

import sympy


class Sort(enum.Enum):
    INT = "Int"
    FLOAT = "Float64"


class UntranslatableSymbol(Exception):
    """A symbol whose domain we cannot model exactly (e.g. no ``integer``/``real``
    assumption: sympy's default symbol is complex).  The atom using it becomes opaque."""


def sort_of(symbol: sympy.Symbol) -> Sort:
    if symbol.is_integer:
        return Sort.INT
    if symbol.is_real or symbol.is_extended_real:
        # torch's float symbols hold Python floats: IEEE doubles, never exact reals.
        return Sort.FLOAT
    raise UntranslatableSymbol(
        f"symbol {symbol} has neither an integer nor a real assumption"
    )


def sign_facts(symbol: sympy.Symbol) -> list[str]:
    """The sign facts the symbol's assumptions state, as comparison names against 0."""
    facts = []
    if symbol.is_positive:
        facts.append(">")
    elif symbol.is_nonnegative:
        facts.append(">=")
    if symbol.is_negative:
        facts.append("<")
    elif symbol.is_nonpositive:
        facts.append("<=")
    if symbol.is_zero is False and not (symbol.is_positive or symbol.is_negative):
        facts.append("!=")
    return facts
