"""An extern kernel's fake run, recorded while a generic compile is lowered and run again
at a widened point (:mod:`verishape.compiler.widen.recompute` wraps
``ExternKernel.process_kernel``; questions asked inside it are moot where it gives the
recorded outputs there)."""

from __future__ import annotations

import dataclasses
from typing import Any

import sympy
import torch

from . import over_ranges
from .over_ranges import NotANumber, at_point, exprs


@dataclasses.dataclass
class KernelCall:
    """One call of Inductor's ``ExternKernel.process_kernel`` during a recorded lowering:
    an extern (fallback) kernel's fake run on its inputs' layouts, whose outputs' layouts
    the lowering fixes for the real kernel's results."""

    kernel: Any
    #: the flattened arguments: ("tensor", sizes, strides, dtype, device), ("size", expr),
    #: ("value", python value), or None for what cannot be rebuilt (generators, objects)
    flat: list[Any]
    spec: Any
    outputs: list[Any] | None = None
    done: bool = False
    #: the ranges of the symbols in the arguments, where it was asked
    ranges: dict[sympy.Symbol, Any] = dataclasses.field(default_factory=dict)
    why = "an extern kernel's output layout, the same at 1 on every dimension larger than 1"

    def __getstate__(self) -> dict[str, Any]:
        """For a widening record (:mod:`verishape.compiler.widen.record`): the kernel by its
        operator's name, the argument structure as pytree's text form.  A kernel that is not
        an ATen-style operator cannot be named: the record is not written."""
        from torch.utils import _pytree as pytree

        if not isinstance(self.kernel, torch._ops.OpOverload):
            raise TypeError(f"an extern kernel {self.kernel!r} that is not an operator cannot be recorded")
        return {**self.__dict__, "kernel": str(self.kernel), "spec": pytree.treespec_dumps(self.spec)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from torch.utils import _pytree as pytree

        self.__dict__.update(state, kernel=_operator(state["kernel"]), spec=pytree.treespec_loads(state["spec"]))

    def right_at(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        """Whether torch's fake kernel, run on the inputs at ``sub``, gives the recorded
        outputs there (sizes and values equal, strides equal where the size is not 1).
        Sizes that stay symbolic at ``sub`` range over theirs (:mod:`over_ranges`): the
        kernel's fake run must be decided by them, and the outputs equal for every value."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.utils import _pytree as pytree

        if not self.done or self.outputs is None or any(a is None for a in self.flat):
            return False
        try:
            outputs = [_at(o, sub) for o in self.outputs]
            inputs = [_at(a, sub) for a in self.flat]
            symbols = over_ranges.Symbols([e for spec in (*inputs, *outputs) for e in _sizes(spec)], self.ranges)
            with FakeTensorMode(shape_env=symbols.env):
                flat = [torch.empty_strided([symbols.value(e) for e in a[1]], [symbols.value(e) for e in a[2]],
                                            dtype=a[3], device=a[4]) if a[0] == "tensor"
                        else symbols.value(a[1]) if a[0] == "size" else a[1] for a in inputs]
                bound = pytree.tree_unflatten(flat, self.spec)
                got = over_ranges.decided(
                    lambda: pytree.tree_leaves(self.kernel(*bound["args"], **bound["kwargs"])))
        except Exception:  # noqa: BLE001 - not a number, undecided, or the kernel refuses these sizes at 1: not moot
            return False
        got_specs = [_back(spec_of(g), symbols) for g in got]
        if len(got_specs) != len(outputs) or any(g is None for g in got_specs):
            return False
        for want, have in zip(outputs, got_specs):
            if want[0] != have[0]:
                return False
            if want[0] == "tensor":
                if len(want[1]) != len(have[1]) or not all(map(over_ranges.same, want[1], have[1])) or not all(
                        n == 1 or over_ranges.same(a, b) for n, a, b in zip(want[1], want[2], have[2], strict=True)):
                    return False
            elif want[0] == "size":
                if not over_ranges.same(want[1], have[1]):
                    return False
            elif want[1] != have[1]:
                return False
        return True


def _operator(name: str) -> Any:
    """The operator ``namespace.name.overload`` (an OpOverload), looked up in ``torch.ops``;
    ValueError for anything else."""
    parts = name.split(".")
    if len(parts) != 3 or not all(p.isidentifier() for p in parts):
        raise ValueError(f"{name!r} does not name an operator overload")
    op = getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    if not isinstance(op, torch._ops.OpOverload):
        raise ValueError(f"{name!r} is not an operator overload")
    return op


def _sizes(spec: Any) -> list[sympy.Expr]:
    if spec[0] == "tensor":
        return [*spec[1], *spec[2]]
    return [spec[1]] if spec[0] == "size" else []


def _back(spec: Any, symbols: over_ranges.Symbols) -> Any:
    """A spec of the throwaway env's values, in the recorded symbols."""
    if spec is None:
        return None
    if spec[0] == "tensor":
        return ("tensor", tuple(e.xreplace(symbols.back) for e in spec[1]),
                tuple(e.xreplace(symbols.back) for e in spec[2]), *spec[3:])
    if spec[0] == "size":
        return ("size", spec[1].xreplace(symbols.back))
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


def _at(spec: Any, sub: dict[sympy.Symbol, sympy.Basic]) -> Any:
    """A spec with its sizes at ``sub`` (expressions; :class:`NotANumber` where one divides
    by a size that is 0 there)."""
    if spec[0] == "tensor":
        return ("tensor", [at_point(e, sub) for e in spec[1]], [at_point(e, sub) for e in spec[2]], *spec[3:])
    if spec[0] == "size":
        return ("size", at_point(spec[1], sub))
    return spec
