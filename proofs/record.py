"""The record of one decision: what was asked, what the solver answered, and why.

A :class:`ProofRecord` is self-contained: the obligation is stored as sympy ``srepr``
text, which :func:`load_expr` parses back exactly (torch's shape functions included), so a
record saved as JSON can be re-checked later by an independent run of the solver
(:func:`verishape.solvers.recheck`) or by any SMT solver from its SMT-LIB2 script.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
from typing import Any

import sympy
from sympy.core.assumptions import _assume_defined
from sympy.functions.elementary.piecewise import ExprCondPair
from sympy.printing.repr import ReprPrinter
from torch.utils._sympy import functions as torch_functions
from torch.utils._sympy.numbers import IntInfinity, NegativeIntInfinity, int_oo

from verishape.proofs.result import UNKNOWN, SolveResult


def dump_expr(expr: sympy.Basic) -> str:
    """``srepr`` text, except that a sympy class whose name a torch shape function also
    uses (``Mod``, ``Max``, ``Min``) is written ``Sympy<Name>``: plain ``Mod`` means
    torch's, whose domain differs (it wants a non-negative dividend)."""
    return _Printer().doprint(expr)


class _Printer(ReprPrinter):
    def _print(self, expr: Any, **kwargs: Any) -> str:
        alias = _shadowed().get(type(expr))
        if alias is not None:
            return f"{alias}({', '.join(self._print(a) for a in expr.args)})"
        return super()._print(expr, **kwargs)


@functools.cache
def _shadowed() -> dict[type, str]:
    """sympy classes that share their name with one of torch's shape functions."""
    out: dict[type, str] = {}
    for name in dir(torch_functions):
        theirs, ours = getattr(torch_functions, name), getattr(sympy, name, None)
        if isinstance(ours, type) and issubclass(ours, sympy.Basic) and ours is not theirs:
            out[ours] = f"Sympy{name}"
    return out


def load_expr(text: str) -> sympy.Basic:
    """Inverse of :func:`dump_expr`; symbols keep their assumptions.

    Records come from JSON files, so the text is untrusted: it is parsed, never
    evaluated.  Python's ``ast`` of the text may contain only calls of sympy's and
    torch's expression classes by name, ``Symbol``/``Dummy`` with assumption keywords,
    numbers, tuples, the constants ``srepr`` prints (``oo``, ``int_oo``, ``true``, ...)
    and unary minus.  Anything else (attribute access, subscripts, other names, strings
    outside a symbol name or a float literal) is a ValueError, raised before anything is
    built.  Nodes are built without evaluation (evaluating could change the meaning of
    an unevaluated tree, or raise on a division by zero it holds); the terms of a sum
    or product are put back in sympy's canonical order, which ``srepr`` does not print,
    so an expression built normally comes back equal."""
    if not isinstance(text, str):
        raise TypeError(f"a stored expression must be text, got {type(text).__name__}")
    try:
        tree = ast.parse(text, mode="eval")
        _check(tree.body)
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a stored sympy expression ({type(exc).__name__}): {text[:80]!r}") from None
    try:
        with sympy.evaluate(False):
            return _build(tree.body)
    except (TypeError, ValueError, ArithmeticError, RecursionError) as exc:
        # Only data reached the constructors; one of them rejected it.
        raise ValueError(f"not a stored sympy expression ({type(exc).__name__}: {exc}): {text[:80]!r}") from None


def _refuse(node: ast.AST, why: str) -> ValueError:
    return ValueError(f"not a stored sympy expression: {why} at column {getattr(node, 'col_offset', '?')}")


@functools.cache
def _classes() -> dict[str, type]:
    """Name -> class of every expression class ``srepr`` may print: sympy's public
    ``Basic`` subclasses, then torch's shape functions (which win on a shared name,
    ``Mod``/``Max``/``Min``, as they did when records were written)."""
    table: dict[str, type] = {}
    for module in (sympy, torch_functions):
        for name in dir(module):
            obj = getattr(module, name)
            if not name.startswith("_") and isinstance(obj, type) and issubclass(obj, sympy.Basic):
                table[name] = obj
    table.update({alias: cls for cls, alias in _shadowed().items()})
    table["ExprCondPair"] = ExprCondPair
    table["IntInfinity"] = IntInfinity
    table["NegativeIntInfinity"] = NegativeIntInfinity
    for name in ("Function", "Lambda", "Subs"):  # they build callables or substitute: never stored
        table.pop(name, None)
    return table


#: The order sympy gives the terms of an evaluated sum or product.
_canonical = functools.cmp_to_key(sympy.Basic.compare)

_CONSTANTS: dict[str, sympy.Basic] = {
    "true": sympy.true, "false": sympy.false, "oo": sympy.oo, "zoo": sympy.zoo, "nan": sympy.nan,
    "int_oo": int_oo, "pi": sympy.pi, "E": sympy.E, "I": sympy.I,
}
_ASSUMPTIONS = frozenset(_assume_defined)
#: Positional string arguments are allowed only here (a symbol's name, a float's digits);
#: elsewhere sympy would parse a string with ``sympify``, which evaluates.
_TEXT_ARGUMENT = {"Symbol": 0, "Dummy": 0, "Float": 0}
_KEYWORDS = {"Symbol": (_ASSUMPTIONS, bool), "Dummy": (_ASSUMPTIONS | {"dummy_index"}, (bool, int)),
             "Float": (frozenset({"precision", "dps"}), int)}


def _check(node: ast.AST) -> None:
    """Refuse, before building anything, every node that is not plain expression data."""
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _classes():
            raise _refuse(node, "only sympy/torch expression classes may be called")
        name = node.func.id
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if _TEXT_ARGUMENT.get(name) != i:
                    raise _refuse(arg, f"a string argument to {name}")
            elif isinstance(arg, ast.Starred):
                raise _refuse(arg, "a starred argument")
            else:
                _check(arg)
        allowed, kinds = _KEYWORDS.get(name, (frozenset(), ()))
        for kw in node.keywords:
            if kw.arg not in allowed or not isinstance(kw.value, ast.Constant) or not isinstance(kw.value.value, kinds):
                raise _refuse(kw.value, f"keyword {kw.arg!r} of {name}")
    elif isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):
            raise _refuse(node, f"a constant {type(node.value).__name__}")
    elif isinstance(node, ast.Tuple):
        for elt in node.elts:
            _check(elt)
    elif isinstance(node, ast.Name):
        if node.id not in _CONSTANTS:
            raise _refuse(node, f"the name {node.id!r}")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _check(node.operand)
    else:
        raise _refuse(node, f"{type(node).__name__} syntax")


def _build(node: ast.AST) -> Any:
    """Build a node :func:`_check` accepted."""
    if isinstance(node, ast.Call):
        cls = _classes()[node.func.id]  # type: ignore[attr-defined]
        args = [a.value if isinstance(a, ast.Constant) else _build(a) for a in node.args]
        kwargs = {kw.arg: kw.value.value for kw in node.keywords}  # type: ignore[attr-defined]
        if cls in (sympy.Add, sympy.Mul) and all(getattr(a, "is_commutative", False) for a in args):
            args.sort(key=_canonical)
        return cls(*args, **kwargs)
    if isinstance(node, ast.Constant):
        return sympy.Integer(node.value) if isinstance(node.value, int) else sympy.Float(node.value)
    if isinstance(node, ast.Tuple):
        return tuple(_build(e) for e in node.elts)
    if isinstance(node, ast.Name):
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp):
        with sympy.evaluate(True):  # -oo is NegativeInfinity, not Mul(-1, oo)
            return -_build(node.operand)
    raise AssertionError(f"verishape bug: unchecked node {type(node).__name__}")


@dataclasses.dataclass(frozen=True)
class Obligation:
    """Do ``premises`` imply ``goal``?  ``kind`` says why it was asked (for example
    ``"guard"``, ``"runtime_assert"``, ``"guard_or_false"``, ``"query"``)."""

    goal: sympy.Basic
    premises: tuple[sympy.Basic, ...] = ()
    kind: str = "query"
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "goal": str(self.goal),
            "goal_srepr": dump_expr(self.goal),
            "premises": [str(p) for p in self.premises],
            "premises_srepr": [dump_expr(p) for p in self.premises],
            "kind": self.kind,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Obligation:
        return cls(
            goal=load_expr(data["goal_srepr"]),
            premises=tuple(load_expr(p) for p in data["premises_srepr"]),
            kind=data.get("kind", "query"),
            source=data.get("source"),
        )


@dataclasses.dataclass(frozen=True)
class ProofRecord:
    """``decided``: the truth value a decision gave the expression it was asked about
    (the goal is that expression, or its negation when ``decided`` is False)."""

    obligation: Obligation
    result: SolveResult
    decided: bool | None = None

    def __str__(self) -> str:
        ob, res = self.obligation, self.result
        premises = " and ".join(map(str, ob.premises)) or "nothing"
        line = f"[{ob.kind}] {ob.goal}: {res.status}"
        if res.vacuous:
            line += " (vacuously: the premises contradict each other)"
        if res.counterexample is not None:
            cex = ", ".join(f"{k}={v}" for k, v in res.counterexample.items())
            how = "raises" if res.undefined_goal else "is false"
            line += f"; it {how} at {cex}"
        if res.status == UNKNOWN and res.reason:
            line += f" ({res.reason})"
        origin = ", from store" if res.from_store else ", cached" if res.cached else ""
        line += f"  [from {premises}; {res.time_s * 1e3:.1f} ms{origin}]"
        if ob.source:
            line += f"  at {ob.source}"
        return line

    def to_json(self) -> dict[str, Any]:
        return {"obligation": self.obligation.to_json(), "result": self.result.to_json(), "decided": self.decided}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProofRecord:
        return cls(Obligation.from_json(data["obligation"]), SolveResult.from_json(data["result"]),
                   data.get("decided"))

    @classmethod
    def loads(cls, text: str) -> ProofRecord:
        return cls.from_json(json.loads(text))
