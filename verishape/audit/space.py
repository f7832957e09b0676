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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy

from verishape.core.errors import UsageError

_SOURCE = re.compile(r"^L\['(?P<name>[A-Za-z_]\w*)'\]\.size\(\)\[(?P<dim>\d+)\]$")
#: A size of a tensor inside an argument: ``L['kwargs']['input_ids'].size()[0]``,
#: ``L['args'][0].size()[1]`` (a model called with keywords, or through ``*args``).
_PATH_SOURCE = re.compile(r"^L\['(?P<name>[A-Za-z_]\w*)'\](?P<path>(?:\[(?:'[^'\\]*'|\d+)\])*)"
                          r"\.size\(\)\[(?P<dim>\d+)\]$")
_PATH_KEY = re.compile(r"\[(?:'(?P<key>[^'\\]*)'|(?P<index>\d+))\]")

#: One step into a container argument: a dict key or a sequence index.
Key = str | int


def source_for(name: str, dim: int, path: tuple[Key, ...] = ()) -> str:
    keys = "".join(f"['{k}']" if isinstance(k, str) else f"[{k}]" for k in path)
    return f"L['{name}']{keys}.size()[{dim}]"


def parse_source(source: str) -> tuple[str, int] | None:
    """``"L['x'].size()[0]"`` -> ``("x", 0)``; None for other kinds of sources."""
    m = _SOURCE.match(source)
    return (m.group("name"), int(m.group("dim"))) if m else None


def parse_path_source(source: str) -> tuple[str, tuple[Key, ...], int] | None:
    """``"L['kwargs']['input_ids'].size()[0]"`` -> ``("kwargs", ("input_ids",), 0)``: the
    argument, the keys down to the tensor inside it, and the dimension; None for sources
    that are not a size of a tensor reached by constant keys from an argument."""
    m = _PATH_SOURCE.match(source)
    if m is None:
        return None
    path = tuple(k.group("key") if k.group("key") is not None else int(k.group("index"))
                 for k in _PATH_KEY.finditer(m.group("path")))
    return m.group("name"), path, int(m.group("dim"))


@dataclasses.dataclass(frozen=True)
class Bounds:
    lower: int | None
    upper: int | None
    origin: str

    def facts(self, sym: sympy.Symbol) -> list[sympy.Basic]:
        """``lower <= sym <= upper`` as facts, unevaluated: SymPy would fold ``0 <= s`` to True
        for a positive ``s``."""
        return ([] if self.lower is None else [sympy.Le(self.lower, sym, evaluate=False)]) + \
            ([] if self.upper is None else [sympy.Le(sym, self.upper, evaluate=False)])

    def describe(self, source: str) -> str:
        lo = "" if self.lower is None else f"{self.lower} <= "
        hi = "" if self.upper is None else f" <= {self.upper}"
        return f"{lo}{source}{hi}  ({self.origin})"


DEFAULT_BACKED = Bounds(2, None, "undeclared dynamic dimension: stock torch's [2, oo)")
DEFAULT_UNBACKED = Bounds(0, None, "undeclared unbacked dimension: [0, oo)")


def declared_from_locals(local_scope: Mapping[str, Any]) -> dict[str, Bounds]:
    """Bounds given with ``mark_dynamic``/``mark_unbacked`` on the frame's tensors, also on
    tensors inside a ``**kwargs`` dict or an ``*args`` tuple (a model called with
    ``input_ids=...``): ``L['kwargs']['input_ids'].size()[0]``."""
    out: dict[str, Bounds] = {}
    for name, value in local_scope.items():
        for path, tensor in _tensors_in(value):
            _declared_on(tensor, name, path, out)
    return out


def _tensors_in(value: Any, path: tuple[Key, ...] = (), depth: int = 0) -> list[tuple[tuple[Key, ...], Any]]:
    """Each value reached from ``value`` through plain dicts, lists and tuples, with its
    path (Dynamo names those sources with the same keys); a few levels deep at most."""
    if type(value) is dict and depth < 4:
        return [x for k, v in value.items() if isinstance(k, (str, int)) for x in _tensors_in(v, (*path, k), depth + 1)]
    if type(value) in (list, tuple) and depth < 4:
        return [x for i, v in enumerate(value) for x in _tensors_in(v, (*path, i), depth + 1)]
    return [(path, value)]


def _declared_on(value: Any, name: str, path: tuple[Key, ...], out: dict[str, Bounds]) -> None:
    ranges = getattr(value, "_dynamo_dynamic_range", None) or ()
    unbacked = getattr(value, "_dynamo_unbacked_indices", None) or set()
    for r in ranges:
        is_unbacked = r.dim in unbacked
        origin = "mark_unbacked" if is_unbacked else "mark_dynamic"
        # Without min=, a backed dynamic dimension means stock torch's [2, oo).
        lower = r.min if r.min is not None else (0 if is_unbacked else 2)
        out[source_for(name, r.dim, path)] = Bounds(lower, r.max, f"{origin}(min={r.min}, max={r.max})")
    for dim in unbacked:
        out.setdefault(source_for(name, dim, path), Bounds(0, None, "mark_unbacked"))
    # torch 2.15 stores ``mark_dynamic(x, d)`` without min/max only as an index (no
    # range entry): still the user's declaration, stock torch's [2, oo).
    for dim in getattr(value, "_dynamo_dynamic_indices", None) or set():
        out.setdefault(source_for(name, dim, path), Bounds(2, None, "mark_dynamic(min=None, max=None)"))


# ---------------------------------------------------------------- --assume


@dataclasses.dataclass(frozen=True)
class Assumption:
    """A parsed ``--assume``: a sympy boolean over one placeholder symbol per source.

    ``divisors``: the non-constant divisors of its ``//`` and ``%`` (a constant divisor is
    checked nonzero when parsing).  Where one is zero the fact has no value (Python raises);
    the solver reads such a fact as false there, which would silently cut the declared
    space, so the audit must prove each divisor nonzero instead (``DeclaredSpace.require_space``)."""

    text: str
    expr: sympy.Basic
    sources: dict[sympy.Symbol, str]
    divisors: tuple[sympy.Expr, ...] = ()

    def for_frame(self, symbol_of_source: Mapping[str, sympy.Symbol]) -> sympy.Basic | None:
        """The assumption in the frame's symbols, or None when the frame lacks one of
        its inputs."""
        if not all(src in symbol_of_source for src in self.sources.values()):
            return None
        return self.expr.xreplace(self._mapping(symbol_of_source))

    def divisors_for_frame(self, symbol_of_source: Mapping[str, sympy.Symbol]) -> list[sympy.Expr]:
        if not all(src in symbol_of_source for src in self.sources.values()):
            return []
        mapping = self._mapping(symbol_of_source)
        return [d.xreplace(mapping) for d in self.divisors]

    def _mapping(self, symbol_of_source: Mapping[str, sympy.Symbol]) -> dict[sympy.Symbol, sympy.Symbol]:
        return {ph: symbol_of_source[src] for ph, src in self.sources.items()}


def short(text: str, limit: int = 80) -> str:
    """``text`` for a one-line message: a 5,000-character fact is cut, not echoed."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


_CMP = {ast.Lt: sympy.Lt, ast.LtE: sympy.Le, ast.Gt: sympy.Gt, ast.GtE: sympy.Ge, ast.Eq: sympy.Eq, ast.NotEq: sympy.Ne}
_BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: sympy.floor(a / b), ast.Mod: lambda a, b: sympy.Mod(a, b)}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.placeholders: dict[str, sympy.Symbol] = {}
        self.divisors: list[sympy.Expr] = []

    def fail(self, why: str) -> UsageError:
        return UsageError(
            f"--assume {short(self.text)!r}: {why}; write e.g. \"2 <= x.size(0) <= 64\" or \"L['x'].size()[0] % 8 == 0\""
        )

    def source(self, node: ast.AST) -> str | None:
        """``x.size(0)``, ``x.size()[0]``, ``x.shape[0]``, ``L['x'].size()[0]``, ``L['x'].shape[0]``."""
        def tensor_name(base: ast.AST) -> tuple[str, tuple[Key, ...]] | None:
            """``x``, ``L['x']``, and either followed by constant keys (``kwargs['input_ids']``,
            ``L['args'][0]``): the argument and the path to the tensor inside it."""
            keys: list[Key] = []
            while (isinstance(base, ast.Subscript) and isinstance(base.slice, ast.Constant)
                   and isinstance(base.slice.value, (str, int)) and not isinstance(base.slice.value, bool)):
                if isinstance(base.value, ast.Name) and base.value.id == "L" and isinstance(base.slice.value, str):
                    return base.slice.value, tuple(reversed(keys))
                keys.append(base.slice.value)
                base = base.value
            if isinstance(base, ast.Name):
                return base.id, tuple(reversed(keys))
            return None

        def sized(base: ast.AST, dim: int) -> str | None:
            found = tensor_name(base)
            return source_for(found[0], dim, found[1]) if found else None

        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size":
            if len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
                return sized(node.func.value, node.args[0].value)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                return sized(base.value, node.slice.value)
            if (isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr == "size"
                    and not base.args):
                return sized(base.func.value, node.slice.value)
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
            left, right = self.term(node.left), self.term(node.right)
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
                self.divisor(right, node)
            return _BIN[type(node.op)](left, right)
        raise self.fail(f"cannot read {short(ast.unparse(node))!r} as an integer size expression")

    def divisor(self, right: sympy.Expr, node: ast.BinOp) -> None:
        """A constant divisor must be nonzero (else the fact is undefined for every input);
        a symbolic one is kept, to be proved nonzero on the declared space."""
        if right.free_symbols:
            self.divisors.append(right)
        elif right == 0:
            raise self.fail(f"{short(ast.unparse(node))!r} divides by zero, so the fact has no value for any input")

    def boolean(self, node: ast.AST) -> sympy.Basic:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return sympy.And(*(self.boolean(v) for v in node.values))
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            return sympy.Or(*(self.boolean(v) for v in node.values))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return sympy.Not(self.boolean(node.operand))
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
    """Raises UsageError, one line, for anything but a well-formed fact about input sizes
    (including nesting deep enough to exhaust Python's recursion limit)."""
    parser = _Parser(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
        expr = parser.boolean(tree.body)
    except SyntaxError as exc:
        raise parser.fail(f"not a Python expression ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise parser.fail("nested too deeply to read") from None
    if not parser.placeholders:
        raise parser.fail("names no input size")
    if expr is sympy.true:
        raise parser.fail("is always true, so it declares nothing")
    if expr is sympy.false:
        raise parser.fail("is never true, so no input satisfies it")
    return Assumption(text, expr, {sym: src for src, sym in parser.placeholders.items()}, tuple(parser.divisors))


# ---------------------------------------------------------------- bounds


def linear_bound(fact: sympy.Basic) -> tuple[sympy.Symbol, int | None, int | None] | None:
    """``(symbol, lower, upper)`` for a comparison that is linear in its one symbol with
    integer coefficients (``2 * s + 1 > 8`` gives ``(s, 4, None)``, ``Eq(s, 8)`` gives
    ``(s, 8, 8)``), so that equivalent ways of writing a bound give the same bound; None
    for anything else (those facts constrain the space as facts only)."""
    if not isinstance(fact, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt, sympy.Eq)) or len(fact.free_symbols) != 1:
        return None
    (sym,) = fact.free_symbols
    try:
        poly = sympy.Poly(sympy.expand(fact.lhs - fact.rhs), sym)
    except sympy.PolynomialError:
        return None
    if poly.degree() != 1 or not all(c.is_Integer for c in poly.all_coeffs()):
        return None
    a, b = (int(c) for c in poly.all_coeffs())  # fact: a * sym + b  REL  0
    if isinstance(fact, sympy.Eq):
        return (sym, -b // a, -b // a) if b % a == 0 else None  # no integer solution: left to the solver
    if isinstance(fact, (sympy.Ge, sympy.Gt)):
        at_least = -b + (1 if isinstance(fact, sympy.Gt) else 0)  # a * sym >= at_least
        return (sym, -(-at_least // a), None) if a > 0 else (sym, None, at_least // a)
    at_most = -b - (1 if isinstance(fact, sympy.Lt) else 0)  # a * sym <= at_most
    return (sym, None, at_most // a) if a > 0 else (sym, -(-at_most // a), None)


def bounds_from_assumption(a: Assumption) -> dict[str, tuple[int | None, int | None]]:
    """The one-source bounds an assumption states (the tightest, whatever the order or
    form of its conjuncts); used to widen the default ``[2, oo)`` when the user declares
    smaller sizes, and to show the declared space."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for fact in sympy.And.make_args(a.expr):
        found = linear_bound(fact)
        if found is None:
            continue
        sym, lo, hi = found
        src = a.sources[sym]
        old_lo, old_hi = out.get(src, (None, None))
        lows = [v for v in (old_lo, lo) if v is not None]
        highs = [v for v in (old_hi, hi) if v is not None]
        out[src] = (max(lows) if lows else None, min(highs) if highs else None)
    return out


# ---------------------------------------------------------------- the space must exist


def contradiction(labelled: list[tuple[str, sympy.Basic]],
                  empty: Callable[[list[sympy.Basic]], bool]) -> list[str] | None:
    """The labels of a minimal set of facts that no input satisfies, or None when the
    solver does not prove them contradictory (satisfiable, or unknown).

    ``empty`` is :meth:`verishape.core.premises.Premises.empty` over the caller's symbols
    (passed in so that parsing stays light).  The solver reads a fact that has no value at
    a point (a zero divisor) as false there, so an undefined fact shows up here as a
    contradiction too."""
    if not empty([f for _, f in labelled]):
        return None
    core = list(labelled)
    for item in list(core):  # drop every fact the contradiction does not need
        rest = [x for x in core if x is not item]
        if empty([f for _, f in rest]):
            core = rest
    return [label for label, _ in core]


def check_assumptions_consistent(assumptions: Sequence[Assumption], empty: Callable[[list[sympy.Basic]], bool]) -> None:
    """Before running anything: the ``--assume`` facts, with every size >= 0, must admit
    at least one input.  (Each frame's space, with its own declarations, is checked again
    once the script has run.)"""
    symbol_of_source: dict[str, sympy.Symbol] = {}
    for a in assumptions:
        for src in a.sources.values():
            symbol_of_source.setdefault(src, sympy.Symbol(f"size_{len(symbol_of_source)}", integer=True))
    labelled = [(f"--assume {short(a.text)!r}", a.for_frame(symbol_of_source)) for a in assumptions]
    labelled += [(f"{src} >= 0", sympy.Ge(sym, 0)) for src, sym in symbol_of_source.items()]
    core = contradiction(labelled, empty)
    if core is not None:
        named = [c for c in core if c.startswith("--assume")] or core
        raise UsageError(f"the declared input space is empty: no input satisfies {' and '.join(named)}"
                         + (" (sizes are never negative)" if len(named) < len(core) else ""))
