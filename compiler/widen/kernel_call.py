"""An extern kernel's fake run, recorded while a generic compile is lowered and run again at a
widened point (a layout computation of :mod:`verishape.compiler.widen.recompute`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree

from . import over_ranges
from .over_ranges import at_point, exprs


@dataclasses.dataclass
class KernelCall(over_ranges.Recorded):
    """A call of Inductor's ``ExternKernel.process_kernel``: an extern (fallback) kernel's fake
    run on its inputs' layouts, whose outputs' layouts the lowering fixes."""

    kernel: Any
    #: the flattened arguments: ("tensor", sizes, strides, dtype, device), ("size", expr),
    #: ("value", python value), or None for what cannot be rebuilt (generators, objects)
    flat: list[Any]
    spec: Any
    outputs: list[Any] | None = None
    why = "an extern kernel's output layout, the same at 1 on every dimension larger than 1"

    def __getstate__(self) -> dict[str, Any]:
        """For a widening record (:mod:`verishape.compiler.widen.record`): the kernel by its
        operator's name, the argument structure as pytree's text form.  A kernel that is not
        an ATen-style operator cannot be named: the record is not written."""
        if not isinstance(self.kernel, torch._ops.OpOverload):
            raise TypeError(f"an extern kernel {self.kernel!r} that is not an operator cannot be recorded")
        return {**self.__dict__, "kernel": str(self.kernel), "spec": pytree.treespec_dumps(self.spec)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, kernel=_operator(state["kernel"]), spec=pytree.treespec_loads(state["spec"]))

    def _right_at(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        """Whether torch's fake kernel, run on the inputs at ``sub`` (over the ranges of sizes
        that stay symbolic: :mod:`over_ranges`), gives the recorded outputs there (sizes and
        values equal, strides equal where the size is not 1)."""
        if self.outputs is None or any(a is None for a in self.flat):
            return False
        try:
            outputs = [_map(o, lambda e: at_point(e, sub)) for o in self.outputs]
            inputs = [_map(a, lambda e: at_point(e, sub)) for a in self.flat]
            symbols = over_ranges.Symbols([e for spec in (*inputs, *outputs) for e in sizes_of(spec)], self.ranges)
            with FakeTensorMode(shape_env=symbols.env):
                flat = [torch.empty_strided(a[1], a[2], dtype=a[3], device=a[4]) if a[0] == "tensor" else a[1]
                        for a in (_map(spec, symbols.value) for spec in inputs)]
                bound = pytree.tree_unflatten(flat, self.spec)
                got = over_ranges.decided(lambda: pytree.tree_leaves(self.kernel(*bound["args"], **bound["kwargs"])))
        except Exception:  # noqa: BLE001 - not a number, undecided, or the kernel refuses these sizes at 1: not moot
            return False
        got_specs = [_map(spec_of(g), lambda e: e.xreplace(symbols.back)) for g in got]
        return len(got_specs) == len(outputs) and all(map(_agrees, outputs, got_specs))


def _agrees(want: Any, have: Any) -> bool:
    """Whether an output's spec is the recorded one (strides only where the size is not 1; None: not a spec)."""
    if have is None or want[0] != have[0]:
        return False
    if want[0] == "tensor":
        return len(want[1]) == len(have[1]) and all(map(over_ranges.same, want[1], have[1])) and all(
            n == 1 or over_ranges.same(a, b) for n, a, b in zip(want[1], want[2], have[2], strict=True))
    if want[0] == "size":
        return over_ranges.same(want[1], have[1])
    return want[1] == have[1]


def _operator(name: str) -> Any:
    """The operator ``namespace.name.overload`` (an OpOverload) looked up in ``torch.ops``; ValueError for others."""
    parts = name.split(".")
    if len(parts) != 3 or not all(p.isidentifier() for p in parts):
        raise ValueError(f"{name!r} does not name an operator overload")
    op = getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    if not isinstance(op, torch._ops.OpOverload):
        raise ValueError(f"{name!r} is not an operator overload")
    return op


def sizes_of(spec: Any) -> list[sympy.Expr]:
    """A spec's sizes and strides (a size argument's one; none for a value)."""
    if spec[0] == "tensor":
        return [*spec[1], *spec[2]]
    return [spec[1]] if spec[0] == "size" else []


def _map(spec: Any, f: Callable[[Any], Any]) -> Any:
    """A spec (or None) with ``f`` applied to each of its sizes and strides."""
    if spec is None:
        return None
    if spec[0] == "tensor":
        return ("tensor", tuple(map(f, spec[1])), tuple(map(f, spec[2])), *spec[3:])
    if spec[0] == "size":
        return ("size", f(spec[1]))
    return spec


def spec_of(value: Any) -> Any:
    """A flattened argument or output as a spec (see :class:`KernelCall`)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", exprs(value.shape), exprs(value.stride()), value.dtype, value.device)
    if isinstance(value, (torch.SymInt, sympy.Expr)):
        return ("size", value.node.expr if isinstance(value, torch.SymInt) else value)
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device, torch.layout,
                                           torch.memory_format)):
        return ("value", value)
    return None

