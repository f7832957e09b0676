"""Checks an exported program runs on its own inputs, so that its proofs' premises hold.

A stock ``ExportedProgram`` checks little of what it was traced under: ``ep.module()``
checks an input size's upper bound and a lower bound only above 2, a saved and re-loaded
program the same, and an AOTInductor package nothing at all (measured on torch 2.13: an
AOTInductor package built for ``Dim(min=3, max=64)`` runs at sizes 2 and 65).  A fact a
proof relied on is therefore a premise only once the program itself checks it, and the one
check every form of the program runs is a node in its graph: ``aten._assert_scalar``
right after the inputs, as export emits for its own runtime asserts.

:func:`install` adds, for each fact, ``sym_size`` reads of the input dimensions it is
about, the comparison, and the assert, whose message names the input, the dimension, the
bound and why it is checked.  The facts are of two origins (:class:`ProgramCheck`):

* ``declared``: every bound of a named ``Dim`` (``min``/``max``), so that an input outside
  the declared space (sizes 0 and 1 included) is rejected by every form of the program;
* ``premise``: a bound or relation a verishape proof of this export assumed beyond the
  declared space (see ``ExportShapeEnv``), e.g. the ``>= 2`` of a ``Dim.AUTO`` size.

AOTInductor folds a check ``size >= 1`` to True when it compiles the graph (SymPy declares
every size symbol positive) and drops it, so a package would run a size-0 input past a
``min=1`` bound or a ``>= 1`` premise (measured on torch 2.13).  A fact that holds for every
positive size therefore gets a second check the lowering cannot fold, in tensor form: the
size as a 0-d tensor, the comparison as a tensor op, ``aten._assert_async.msg`` with the same
message, before the scalar one (which ``ep.module()`` and the audit read as before).  It costs
about 18 µs per call in ``ep.module()`` (three eager ops, against 3 µs for the scalar form),
which is why only these facts get it; ``>= 2`` and above survive the lowering as they are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv, Mod
from torch.utils._sympy.printers import PythonPrinter

from verishape.core.errors import VerishapeError

#: SymPy relations -> the Python operator a graph node applies to SymInts.
_RELATIONS: dict[type, Callable[[Any, Any], Any]] = {
    sympy.GreaterThan: operator.ge, sympy.StrictGreaterThan: operator.gt,
    sympy.LessThan: operator.le, sympy.StrictLessThan: operator.lt,
    sympy.Equality: operator.eq, sympy.Unequality: operator.ne,
}


#: The same relations as ATen tensor ops (``.Scalar``/``.Tensor`` overloads), for checks in tensor form.
_TENSOR_RELATIONS: dict[type, Any] = {
    sympy.GreaterThan: torch.ops.aten.ge, sympy.StrictGreaterThan: torch.ops.aten.gt,
    sympy.LessThan: torch.ops.aten.le, sympy.StrictLessThan: torch.ops.aten.lt,
    sympy.Equality: torch.ops.aten.eq, sympy.Unequality: torch.ops.aten.ne,
}


def _holds_for_positive_sizes(fact: sympy.Basic) -> bool:
    """True when ``fact`` follows from its sizes being positive integers alone: what a
    lowering that declares size symbols positive folds to True and drops."""
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    positive = {s: sympy.Symbol(s.name, integer=True, positive=True) for s in fact.free_symbols}
    try:
        if fact.xreplace(positive) is sympy.true:
            return True
    except TypeError:  # a relation SymPy cannot order
        pass
    if not isinstance(fact, (sympy.GreaterThan, sympy.StrictGreaterThan, sympy.LessThan, sympy.StrictLessThan)):
        return False
    # the same question by value ranges, every size in [1, oo): how a lowering that reads
    # ranges would fold it (``s0 + s1 >= 2``, which SymPy's assumptions leave open)
    diff = fact.lhs - fact.rhs if isinstance(fact, (sympy.GreaterThan, sympy.StrictGreaterThan)) \
        else fact.rhs - fact.lhs
    low = bound_sympy(diff, {s: ValueRanges(1, sympy.oo) for s in diff.free_symbols}).lower
    strict = isinstance(fact, (sympy.StrictGreaterThan, sympy.StrictLessThan))
    return bool(low > 0) if strict else bool(low >= 0)


class UncheckableFact(VerishapeError, ValueError):
    """A fact an exported program cannot check (a symbol that is no input dimension, or an
    operation the graph check does not build): it may not be a premise."""


@dataclasses.dataclass(frozen=True)
class ProgramCheck:
    """One fact over input sizes that the program checks.  ``origin``: "declared" or
    "premise"; ``why``: the Dim that declared it, or where the proof that assumed it was
    asked."""

    fact: sympy.Basic
    origin: str
    why: str


def checkable(fact: sympy.Basic, is_input_size: Callable[[sympy.Symbol], bool]) -> bool:
    """Whether :func:`install` can build a graph check of ``fact`` (without building it)."""
    try:
        _walk(fact, is_input_size)
    except UncheckableFact:
        return False
    return True


def _walk(expr: sympy.Basic, is_input_size: Callable[[sympy.Symbol], bool]) -> None:
    if isinstance(expr, sympy.And):
        for a in expr.args:
            _walk(a, is_input_size)
        return
    if isinstance(expr, sympy.Rel):
        if type(expr) not in _RELATIONS:
            raise UncheckableFact(f"relation {type(expr).__name__}")
        _walk_term(expr.lhs, is_input_size)
        _walk_term(expr.rhs, is_input_size)
        return
    raise UncheckableFact(f"not a comparison: {expr}")


def _walk_term(expr: sympy.Basic, is_input_size: Callable[[sympy.Symbol], bool]) -> None:
    if isinstance(expr, sympy.Integer):
        return
    if isinstance(expr, sympy.Symbol):
        if not is_input_size(expr):
            raise UncheckableFact(f"{expr} is no input dimension")
        return
    if isinstance(expr, (sympy.Add, sympy.Mul, FloorDiv, Mod)):
        for a in expr.args:
            _walk_term(a, is_input_size)
        return
    raise UncheckableFact(f"operation {type(expr).__name__}")


def input_dims(ep: Any) -> dict[sympy.Symbol, tuple[Any, int]]:
    """Each size symbol of the program's user inputs -> (its placeholder, the dimension),
    the first input dimension of exactly that size."""
    user = set(ep.graph_signature.user_inputs)
    out: dict[sympy.Symbol, tuple[Any, int]] = {}
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for d, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                out.setdefault(size.node.expr, (node, d))
    return out


def describe(fact: sympy.Basic, dims: Mapping[sympy.Symbol, tuple[Any, int]]) -> str:
    """``fact`` over the inputs' names (``x.size(0) >= 2``)."""
    names = {s: sympy.Symbol(f"{node.name}.size({d})") for s, (node, d) in dims.items()}
    shown = fact.xreplace({s: n for s, n in names.items() if s in fact.free_symbols})
    if isinstance(shown, sympy.And):
        return " and ".join(PythonPrinter().doprint(a) for a in shown.args)
    return PythonPrinter().doprint(shown)


def install(ep: Any, checks: Iterable[ProgramCheck]) -> list[str]:
    """Add a graph check of each fact to ``ep`` (in place), right after its inputs; returns
    the messages of the checks added.  Raises :class:`UncheckableFact` when a fact cannot be
    checked: a program whose premise is unchecked must never be handed out."""
    checks = list(dict.fromkeys(checks))
    if not checks:
        return []
    dims = input_dims(ep)
    emitter = _Emitter(ep.graph, dims)
    messages = []
    for check in checks:
        for part in (check.fact.args if isinstance(check.fact, sympy.And) else (check.fact,)):
            op = _RELATIONS.get(type(part))
            if op is None:
                raise UncheckableFact(f"not a comparison: {part}")
            (a, av), (b, bv) = emitter.term(part.lhs), emitter.term(part.rhs)
            message = f"verishape: input check failed: {describe(part, dims)} ({check.why})"
            if _holds_for_positive_sizes(part):
                emitter.tensor_check(part, a, b, message)
            cond = emitter.emit(op, (a, b), op(av, bv))
            emitter.emit(torch.ops.aten._assert_scalar.default, (cond, message), None)
            messages.append(message)
    ep.graph.lint()
    ep.graph_module.recompile()
    return messages


class _Emitter:
    """Writes check nodes into a graph, in order, right after its inputs: each input size
    read once (``sym_size``), size arithmetic, comparisons and asserts."""

    _OPS = {sympy.Add: operator.add, sympy.Mul: operator.mul, FloorDiv: operator.floordiv, Mod: operator.mod}

    def __init__(self, graph: Any, dims: Mapping[sympy.Symbol, tuple[Any, int]]) -> None:
        self.graph, self.dims = graph, dims
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        self.anchor = placeholders[-1] if placeholders else None
        self.sizes: dict[sympy.Symbol, tuple[Any, Any]] = {}
        self.fake_mode = next((n.meta["val"].fake_mode for n in placeholders
                               if hasattr(n.meta.get("val"), "fake_mode")), None)

    def emit(self, target: Any, args: tuple[Any, ...], val: Any, kwargs: dict[str, Any] | None = None) -> Any:
        if self.anchor is None:
            node = self.graph.call_function(target, args, kwargs)
            first = next(iter(self.graph.nodes))
            if first is not node:
                first.prepend(node)
        else:
            with self.graph.inserting_after(self.anchor):
                node = self.graph.call_function(target, args, kwargs)
        node.meta["val"] = val
        self.anchor = node
        return node

    def term(self, expr: sympy.Basic) -> tuple[Any, Any]:
        """``expr`` as graph nodes: (node or int, its fake value)."""
        if isinstance(expr, sympy.Integer):
            return int(expr), int(expr)
        if isinstance(expr, sympy.Symbol):
            if expr not in self.dims:
                raise UncheckableFact(f"{expr} is no input dimension of this program")
            if expr not in self.sizes:
                node, d = self.dims[expr]
                val = node.meta["val"].shape[d]
                self.sizes[expr] = (self.emit(torch.ops.aten.sym_size.int, (node, d), val), val)
            return self.sizes[expr]
        op = next((f for t, f in self._OPS.items() if isinstance(expr, t)), None)
        if op is None:
            raise UncheckableFact(f"operation {type(expr).__name__} in {expr}")
        args = [self.term(a) for a in expr.args]
        if op in (operator.floordiv, operator.mod):
            (a, av), (b, bv) = args
            return self.emit(op, (a, b), op(av, bv)), op(av, bv)
        node, val = args[0]
        for b, bv in args[1:]:
            val = op(val, bv)
            node = self.emit(op, (node, b), val)
        return node, val

    def _fake(self, dtype: torch.dtype) -> Any:
        with self.fake_mode if self.fake_mode is not None else contextlib.nullcontext():
            return torch.empty((), dtype=dtype)

    def tensor_check(self, part: sympy.Basic, lhs: Any, rhs: Any, message: str) -> None:
        """``part`` as tensor ops the lowering cannot fold: a 0-d tensor of each side
        (``lhs``/``rhs``: nodes or ints), the comparison, ``_assert_async`` with ``message``."""
        def scalar(node: Any) -> Any:
            return self.emit(torch.ops.aten.scalar_tensor.default, (node,), self._fake(torch.int64),
                             {"dtype": torch.int64})

        relation = _TENSOR_RELATIONS[type(part)]
        if isinstance(rhs, int):
            cond = self.emit(relation.Scalar, (scalar(lhs), rhs), self._fake(torch.bool))
        else:
            cond = self.emit(relation.Tensor, (scalar(lhs), scalar(rhs)), self._fake(torch.bool))
        self.emit(torch.ops.aten._assert_async.msg, (cond, message), None)


# ---------------------------------------------------------------------------- the declared space

@dataclasses.dataclass(frozen=True)
class Declared:
    """What ``dynamic_shapes`` declares for one input dimension: its bounds (None: not
    declared), how it was declared (``Dim 'b'``, ``Dim.AUTO``, ...), for a named ``Dim`` its
    name (what torch's ``Constraints violated (b)`` names), where it is (``path``: the
    parameter's name, then list indices and dict keys; ``dim``) and the spec as written.

    The one parse of ``dynamic_shapes`` for export, its program checks and the audit.  What
    an undeclared range means is each one's own question, answered where it is asked: the
    export assumes only what its program checks (a size is at least 0), the audit holds a
    program against stock torch's ``[2, oo)``."""

    low: int | None
    high: int | None
    label: str
    name: str | None = None
    path: tuple[Any, ...] = ()
    dim: int = 0
    spec: Any = None
    derived: bool = False  # ``2 * d``: its range follows from its root's


def resolve_spec(mod: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, dynamic_shapes: Any) -> Any:
    """``dynamic_shapes`` as a plain spec: a ``ShapesCollection`` or ``AdditionalInputs``
    resolved against the inputs (as ``torch.export`` resolves it)."""
    resolve = getattr(dynamic_shapes, "dynamic_shapes", None)
    if callable(resolve) and not isinstance(dynamic_shapes, (Mapping, list, tuple)):
        return resolve(mod, args, kwargs or {})
    return dynamic_shapes


def declared_dims(mod: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
                  dynamic_shapes: Any) -> list[Declared]:
    """Every input dimension the spec gives a ``Dim``, a derived ``Dim`` or a ``Dim`` hint,
    walking the spec alongside the inputs (a dict keyed by parameter name, or one entry per
    argument in signature order)."""
    from torch.export.dynamic_shapes import Dim, _combine_args, _DimHint

    spec = resolve_spec(mod, args, kwargs, dynamic_shapes)
    if spec is None:
        return []
    try:
        combined = _combine_args(mod, args, kwargs or {})
    except (TypeError, ValueError):
        return []  # the inputs do not bind: torch.export says so itself
    out: list[Declared] = []

    def entry(value: Any, path: tuple[Any, ...], dim: int) -> Declared | None:
        if isinstance(value, Dim):
            high = value.max if isinstance(value.max, int) and value.max < 2**62 else None
            return Declared(int(value.min), high, f"Dim {value.__name__!r}", value.__name__, path, dim, value,
                            hasattr(value, "fn"))
        if isinstance(value, _DimHint):
            return Declared(value.min, value.max, f"Dim.{value.type.name}", None, path, dim, value)
        return None

    def walk(value: Any, shape: Any, path: tuple[Any, ...]) -> None:
        if shape is None:
            return
        if isinstance(value, torch.Tensor):
            dims = shape.items() if isinstance(shape, Mapping) else enumerate(shape) if isinstance(shape, (list, tuple)) else ()
            out.extend(d for k, dim_spec in dims if (d := entry(dim_spec, path, int(k))) is not None)
        elif isinstance(value, (list, tuple)) and isinstance(shape, (list, tuple)):
            for k, (v, s) in enumerate(zip(value, shape)):
                walk(v, s, (*path, k))
        elif isinstance(value, Mapping) and isinstance(shape, Mapping):
            for k, v in value.items():
                walk(v, shape.get(k), (*path, k))

    if isinstance(spec, Mapping):
        for name, value in combined.items():
            walk(value, spec.get(name), (name,))
    elif isinstance(spec, (list, tuple)):
        for (name, value), shape in zip(combined.items(), spec):
            walk(value, shape, (name,))
    return out


def declared_space(mod: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
                   dynamic_shapes: Any) -> dict[str, Declared]:
    """Input dimension, by the source name torch gives its size (``L['x'].size()[0]``) ->
    what the spec declares for it, for every dimension given a ``Dim`` or a ``Dim`` hint
    (a derived ``Dim`` is checked through its root)."""
    out: dict[str, Declared] = {}
    for d in declared_dims(mod, args, kwargs, dynamic_shapes):
        if not d.derived:
            keys = "".join(f"[{k!r}]" for k in d.path[1:])
            out[f"L[{d.path[0]!r}]{keys}.size()[{d.dim}]"] = d
    # A strict export's Dynamo frame names its inputs by their flat position.
    from torch.export.dynamic_shapes import _combine_args

    by_id = {id(t): path for path, t in _tensor_paths(_combine_args(mod, args, kwargs or {}), "L")} if out else {}
    flat = torch.utils._pytree.tree_leaves((args, kwargs or {}))
    for k, leaf in enumerate(flat):
        path = by_id.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None
        for key, declared in list(out.items()):
            if path is not None and key.startswith(path + ".size()"):
                out[f"L['flat_args'][{k}]" + key[len(path):]] = declared
    return out


def _tensor_paths(value: Any, path: str) -> Iterable[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            yield from _tensor_paths(v, f"{path}[{k}]")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _tensor_paths(v, f"{path}[{k!r}]")


def declared_checks(dims: Mapping[sympy.Symbol, tuple[Any, int]],
                    declared: Mapping[sympy.Symbol, Declared]) -> list[ProgramCheck]:
    """A check of each declared bound of an input dimension: the lower one when above 0 (a
    size is never negative), the upper one when finite."""
    out = []
    for symbol in dims:
        d = declared.get(symbol)
        if d is None:
            continue
        if d.low is not None and d.low > 0:
            out.append(ProgramCheck(sympy.Ge(symbol, d.low, evaluate=False), "declared", f"{d.label} has min={d.low}"))
        if d.high is not None:
            out.append(ProgramCheck(sympy.Le(symbol, d.high, evaluate=False), "declared", f"{d.label} has max={d.high}"))
    return out
