"""The declared input space: what shapes the user intends to serve.

Sources of declarations, per input dimension (named the way Dynamo names sources,
``L['x'].size()[0]``):

* ``torch._dynamo.mark_dynamic(x, d, min=, max=)`` and ``mark_unbacked(..., min=, max=)``,
  read off the real input tensors of the frame;
* ``--assume`` expressions, which name inputs as ``x.size(0)``, ``x.shape[0]`` or
  ``L['x'].size()[0]`` and may chain comparisons (``"2 <= x.size(0) <= 64"``);
* otherwise a dynamic dimension ranges over ``[2, oo)``, the space stock torch assumes.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import sympy

from verishape.cli_errors import UsageError

_SOURCE = re.compile(r"^L\['(?P<name>[A-Za-z_]\w*)'\]\.size\(\)\[(?P<dim>\d+)\]$")


def source_for(name: str, dim: int) -> str:
    return f"L['{name}'].size()[{dim}]"


def parse_source(source: str) -> tuple[str, int] | None:
    """``"L['x'].size()[0]"`` -> ``("x", 0)``; None for other kinds of sources."""
    m = _SOURCE.match(source)
    return (m.group("name"), int(m.group("dim"))) if m else None


@dataclasses.dataclass(frozen=True)
class Bounds:
    lower: int | None
    upper: int | None
    origin: str

    def describe(self, source: str) -> str:
        lo = "" if self.lower is None else f"{self.lower} <= "
        hi = "" if self.upper is None else f" <= {self.upper}"
        return f"{lo}{source}{hi}  ({self.origin})"


DEFAULT_BACKED = Bounds(2, None, "undeclared dynamic dimension: stock torch's [2, oo)")
DEFAULT_UNBACKED = Bounds(0, None, "undeclared unbacked dimension: [0, oo)")


def declared_from_locals(local_scope: Mapping[str, Any]) -> dict[str, Bounds]:
    """Bounds given with ``mark_dynamic``/``mark_unbacked`` on the frame's tensors."""
    out: dict[str, Bounds] = {}
    for name, value in local_scope.items():
        ranges = getattr(value, "_dynamo_dynamic_range", None) or ()
        unbacked = getattr(value, "_dynamo_unbacked_indices", None) or set()
        for r in ranges:
            is_unbacked = r.dim in unbacked
            origin = "mark_unbacked" if is_unbacked else "mark_dynamic"
            # Without min=, a backed dynamic dimension means stock torch's [2, oo).
            lower = r.min if r.min is not None else (0 if is_unbacked else 2)
            out[source_for(name, r.dim)] = Bounds(lower, r.max, f"{origin}(min={r.min}, max={r.max})")
        for dim in unbacked:
            out.setdefault(source_for(name, dim), Bounds(0, None, "mark_unbacked"))
    return out


# ---------------------------------------------------------------- --assume


@dataclasses.dataclass(frozen=True)
class Assumption:
    """A parsed ``--assume``: a sympy boolean over one placeholder symbol per source."""

    text: str
    expr: sympy.Basic
    sources: dict[sympy.Symbol, str]

    def for_frame(self, symbol_of_source: Mapping[str, sympy.Symbol]) -> sympy.Basic | None:
        """The assumption in the frame's symbols, or None when the frame lacks one of
        its inputs."""
        if not all(src in symbol_of_source for src in self.sources.values()):
            return None
        return self.expr.xreplace({ph: symbol_of_source[src] for ph, src in self.sources.items()})


_CMP = {ast.Lt: sympy.Lt, ast.LtE: sympy.Le, ast.Gt: sympy.Gt, ast.GtE: sympy.Ge, ast.Eq: sympy.Eq, ast.NotEq: sympy.Ne}
_BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: sympy.floor(a / b), ast.Mod: lambda a, b: sympy.Mod(a, b)}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.placeholders: dict[str, sympy.Symbol] = {}

    def fail(self, why: str) -> UsageError:
        return UsageError(
            f"--assume {self.text!r}: {why}; write e.g. \"2 <= x.size(0) <= 64\" or \"L['x'].size()[0] % 8 == 0\""
        )

    def source(self, node: ast.AST) -> str | None:
        """``x.size(0)``, ``x.size()[0]``, ``x.shape[0]``, ``L['x'].size()[0]``, ``L['x'].shape[0]``."""
        def tensor_name(base: ast.AST) -> str | None:
            if isinstance(base, ast.Name):
                return base.id
            if (isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name) and base.value.id == "L"
                    and isinstance(base.slice, ast.Constant) and isinstance(base.slice.value, str)):
                return base.slice.value
            return None

        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size":
            if len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
                name = tensor_name(node.func.value)
                return source_for(name, node.args[0].value) if name else None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                name = tensor_name(base.value)
            elif (isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr == "size"
                  and not base.args):
                name = tensor_name(base.func.value)
            else:
                name = None
            return source_for(name, node.slice.value) if name else None
        return None

    def term(self, node: ast.AST) -> sympy.Expr:
        src = self.source(node)
        if src is not None:
            return self.placeholders.setdefault(src, sympy.Symbol(f"assume_{len(self.placeholders)}", integer=True))
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return sympy.Integer(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.term(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _BIN[type(node.op)](self.term(node.left), self.term(node.right))
        raise self.fail(f"cannot read {ast.unparse(node)!r} as an integer size expression")

    def boolean(self, node: ast.AST) -> sympy.Basic:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return sympy.And(*(self.boolean(v) for v in node.values))
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            return sympy.Or(*(self.boolean(v) for v in node.values))
        if isinstance(node, ast.Compare):
            parts, left = [], self.term(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                if type(op) not in _CMP:
                    raise self.fail(f"unsupported comparison {type(op).__name__}")
                right = self.term(right_node)
                parts.append(_CMP[type(op)](left, right))
                left = right
            return sympy.And(*parts)
        raise self.fail("expected a comparison")


def parse_assumption(text: str) -> Assumption:
    parser = _Parser(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise parser.fail(f"not a Python expression ({exc.msg})") from None
    expr = parser.boolean(tree.body)
    if not parser.placeholders:
        raise parser.fail("names no input size")
    if expr in (sympy.true, sympy.false):
        raise parser.fail("is a constant")
    return Assumption(text, expr, {sym: src for src, sym in parser.placeholders.items()})


def bounds_from_assumption(a: Assumption) -> dict[str, tuple[int | None, int | None]]:
    """Simple one-source bounds (``lo <= src``, ``src <= hi``) an assumption states; used
    to widen the default ``[2, oo)`` when the user declares smaller sizes."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for fact in sympy.And.make_args(a.expr):
        if not isinstance(fact, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)) or len(fact.free_symbols) != 1:
            continue
        (sym,) = fact.free_symbols
        src = a.sources[sym]
        lhs, rhs = fact.lhs, fact.rhs
        lo, hi = out.get(src, (None, None))
        if isinstance(fact, (sympy.Ge, sympy.Gt)):
            lhs, rhs = rhs, lhs
        strict = isinstance(fact, (sympy.Lt, sympy.Gt))
        if lhs == sym and rhs.is_Integer:
            hi = int(rhs) - strict
        elif rhs == sym and lhs.is_Integer:
            lo = int(lhs) + strict
        out[src] = (lo, hi)
    return out
