"""What an FX graph (or a :class:`~verishape.compiler.widen.snapshot.Snapshot`) does to storage:
whether it is functional, which storages it writes, whether an op reads a layout.  The canonical
comparison and the layout copy fold or copy only what no write and no layout read can tell apart."""

from __future__ import annotations

import operator
import types
from typing import Any

import torch

from .snapshot import is_size_only, nodes_in, value_of


def is_functional(gm: torch.fx.GraphModule) -> bool:
    """Every call is an ATen op that mutates nothing, ``getitem`` of a result, or arithmetic on sizes (no tensor in or
    out): then no value changes after it is made, and a fresh copy of a value reads as the value."""
    return all(node.op == "call_function" and (
        node.target is operator.getitem or is_size_only(value_of(node))
        or isinstance(node.target, torch._ops.OpOverload) and not node.target._schema.is_mutable)
        for node in gm.graph.nodes if node.op not in ("placeholder", "output", "get_attr"))


#: Python operators that update their left operand in place
_INPLACE_OPERATORS = tuple(getattr(operator, n) for n in (
    "setitem", "delitem", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor",
    "ilshift", "irshift", "imatmul"))


#: ops whose values depend on their input's layout (strides, offset, storage), not only its values
_LAYOUT_READERS = ("as_strided", "_reshape_alias", "set_", "storage_offset", "data_ptr", "untyped_storage",
                   "_make_dep_token", "view_as_real", "view_as_complex")


def reads_layout(gm: Any) -> bool:
    """Some node's values may depend on its input's layout (``as_strided`` and friends)."""
    return any(r in target_name(node.target) for node in gm.graph.nodes
               if node.op in ("call_function", "call_method") for r in _LAYOUT_READERS)


#: modules whose Python functions in a graph follow torch's naming of in-place ops
_KNOWN_MODULES = ("torch", "operator", "_operator", "math")


def mutated_storages(gm: Any) -> set[Any] | None:
    """The storages a Dynamo or AOT graph writes in place (None: some node's writes are unknown).
    A write: an in-place method or function (a name ending in one underscore), an in-place operator
    or ``setitem`` (each its first argument), ``out=``, ``inplace=True``, or an ATen overload's
    argument its schema marks written; a submodule or higher-order op is not looked into."""
    out: set[Any] = set()
    for node in (n for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr")):
        target = node.target
        if node.op not in ("call_function", "call_method") or isinstance(target, torch._ops.HigherOrderOperator):
            return None
        out |= storages_of(node.kwargs.get("out"))  # none where there is no out=
        if isinstance(target, torch._ops.OpOverload):
            for i, a in enumerate(target._schema.arguments):
                if a.alias_info is not None and a.alias_info.is_write:
                    out |= storages_of(node.args[i] if i < len(node.args) else node.kwargs.get(a.name))
            continue
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        if not isinstance(name, str):
            return None
        if isinstance(target, types.FunctionType) and not (target.__module__ or "").startswith(_KNOWN_MODULES):
            return None  # Python code Dynamo kept as one node: what it writes is not known
        in_place = (target in _INPLACE_OPERATORS or node.kwargs.get("inplace") is True
                    or (name.endswith("_") and not name.endswith("__"))
                    or name.startswith("__i") or name in ("__setitem__", "__delitem__"))
        if in_place and node.args:
            out |= storages_of(node.args[0])
    return out


def storages_of(a: Any) -> set[Any]:
    """The storages of the tensors the nodes in ``a`` (a node's argument) hold."""
    return {storage_of(t) for n in nodes_in(a) for t in flat_tensors(value_of(n))}


def storage_of(t: torch.Tensor) -> Any:
    return t.untyped_storage()._cdata


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    return [value] if isinstance(value, torch.Tensor) else []


def target_name(target: Any) -> str:
    """How a node's target reads in the canonical form (a method's is its name)."""
    if isinstance(target, str | torch._ops.OpOverload | torch._ops.OpOverloadPacket | torch._ops.HigherOrderOperator):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    return f"{module}.{name}"
