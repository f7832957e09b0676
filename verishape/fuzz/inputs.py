"""Op inputs as data: tensor specs with layouts, rebuilt at any sizes, real or fake.

A fuzz case is an argument tree (args, kwargs) whose tensor leaves are :class:`TensorSpec`.
Keeping tensors as recipes rather than values is what lets one case be materialized at the
drawn sizes, traced with symbolic sizes, rebuilt at solver-picked sizes, and printed as a
standalone repro: every one of those goes through :func:`build`, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

#: Real inputs are kept small: no tensor (with its padding) may exceed this many elements.
MAX_NUMEL = 2**16

#: How input strides are produced.  ``pad`` widens the innermost stored dimension by one and
#: narrows it back (non-contiguous rows and a storage offset of 1); ``double`` allocates a
#: trailing dimension of 2 and selects index 0 (every stride doubled).
STRIDE_KINDS = ("dense", "pad", "double")


@dataclasses.dataclass(frozen=True)
class Layout:
    """A layout recipe: an optional permutation of the storage order and a stride kind."""

    perm: tuple[int, ...] | None = None
    stride: str = "dense"

    def is_contiguous(self) -> bool:
        return self.perm is None and self.stride == "dense"

    def source(self) -> str:
        parts = []
        if self.perm is not None:
            parts.append(f"perm={self.perm!r}")
        if self.stride != "dense":
            parts.append(f"stride={self.stride!r}")
        return ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A tensor leaf: shape, dtype, layout and a small value pool cycled to fill it.

    The pool (at most 16 values taken from the OpInfo sample) keeps values realistic
    (index tensors stay mostly in range) while staying printable in a repro.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    layout: Layout = Layout()
    pool: tuple[Any, ...] = ()

    def with_shape(self, shape: Sequence[int]) -> TensorSpec:
        return dataclasses.replace(self, shape=tuple(int(s) for s in shape))

    def source(self) -> str:
        extra = self.layout.source()
        pool = f", pool={self.pool!r}" if self.pool else ""
        return f"T({self.shape!r}, {self.dtype}{', ' + extra if extra else ''}{pool})"


def T(shape: Sequence[int], dtype: torch.dtype, perm: tuple[int, ...] | None = None,
      stride: str = "dense", pool: tuple[Any, ...] = ()) -> TensorSpec:
    """The constructor repro snippets use (short on purpose)."""
    return TensorSpec(tuple(shape), dtype, Layout(perm, stride), tuple(pool))


@dataclasses.dataclass(frozen=True)
class Case:
    """One call of the op under test: ``fn(*args, **kwargs)`` with spec leaves."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def leaves(self) -> list[TensorSpec]:
        return [x for x in pytree.tree_leaves((self.args, self.kwargs)) if isinstance(x, TensorSpec)]

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(s.shape for s in self.leaves())

    def map_specs(self, fn: Callable[[int, TensorSpec], Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Replace each spec leaf (numbered in flatten order) by ``fn(index, spec)``."""
        counter = iter(range(1 << 30))
        return pytree.tree_map(
            lambda x: fn(next(counter), x) if isinstance(x, TensorSpec) else x,
            (self.args, self.kwargs),
        )

    def with_shapes(self, shapes: Sequence[Sequence[int]]) -> Case:
        args, kwargs = self.map_specs(lambda i, s: s.with_shape(shapes[i]))
        return Case(tuple(args), dict(kwargs))


def stored_sizes(sizes: Sequence[Any], layout: Layout) -> list[Any]:
    """Sizes of the allocation behind a tensor of ``sizes`` with ``layout``."""
    perm = layout.perm or tuple(range(len(sizes)))
    base = [sizes[p] for p in perm]
    if layout.stride == "pad" and base:
        base[-1] = base[-1] + 1
    elif layout.stride == "double":
        base.append(2)
    return base


def build(sizes: Sequence[Any], layout: Layout, alloc: Callable[[list[Any]], torch.Tensor]) -> torch.Tensor:
    """Apply ``layout`` to a fresh allocation; works for ints and SymInts alike."""
    base = stored_sizes(sizes, layout)
    t = alloc(base)
    if layout.stride == "pad" and sizes:
        t = t.narrow(-1, 1, base[-1] - 1)
    elif layout.stride == "double":
        t = t.select(-1, 0)
    if layout.perm is not None:
        inverse = sorted(range(len(layout.perm)), key=lambda i: layout.perm[i])
        t = t.permute(inverse)
    return t


def storage_numel(spec: TensorSpec) -> int:
    return math.prod(stored_sizes(list(spec.shape), spec.layout))


def real_tensor(spec: TensorSpec) -> torch.Tensor:
    """A real CPU tensor for ``spec``, values cycled from its pool."""
    t = build(spec.shape, spec.layout, lambda base: torch.empty(base, dtype=spec.dtype))
    n = t.numel()
    if n:
        pool = list(spec.pool) or [1]
        values = torch.tensor(pool, dtype=spec.dtype).repeat(n // len(pool) + 1)[:n]
        t.copy_(values.reshape(t.shape))
    return t


def real_inputs(case: Case) -> tuple[tuple[Any, ...], dict[str, Any]]:
    args, kwargs = case.map_specs(lambda i, s: real_tensor(s))
    return tuple(args), dict(kwargs)


def too_large(case: Case) -> bool:
    return any(storage_numel(s) > MAX_NUMEL for s in case.leaves())


def pool_of(t: torch.Tensor, limit: int = 16) -> tuple[Any, ...]:
    """The first ``limit`` values of a sample tensor, as Python numbers."""
    flat = t.detach().reshape(-1)[:limit]
    if flat.is_complex():
        return tuple(complex(round(v.real, 3), round(v.imag, 3)) for v in flat.tolist())
    if flat.is_floating_point():
        return tuple(round(v, 3) for v in flat.tolist())
    return tuple(flat.tolist())


def from_sample(args: Any, kwargs: Any) -> Case:
    """Turn real sample arguments (e.g. an OpInfo SampleInput) into a spec case."""
    def leaf(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if x.layout != torch.strided or x.device.type != "cpu" or x.is_quantized:
                raise UnsupportedSample(f"tensor with layout {x.layout} on {x.device}")
            return TensorSpec(tuple(x.shape), x.dtype, Layout(), pool_of(x))
        return x
    a, k = pytree.tree_map(leaf, (tuple(args), dict(kwargs)))
    case = Case(tuple(a), dict(k))
    case_source(case)  # printable, or UnsupportedSample
    return case


class UnsupportedSample(Exception):
    """A sample that cannot be represented as specs (sparse, quantized, unprintable args)."""


def to_source(x: Any) -> str:
    """Python source re-creating an argument, for repro snippets; raises
    :class:`UnsupportedSample` for values that cannot be printed faithfully."""
    if isinstance(x, TensorSpec):
        return x.source()
    if x is None or isinstance(x, (bool, int, str)):
        return repr(x)
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else f"float({str(x)!r})"
    if isinstance(x, complex):
        return f"complex({to_source(x.real)}, {to_source(x.imag)})"
    if isinstance(x, (torch.dtype, torch.memory_format, torch.layout)):
        return str(x)
    if isinstance(x, torch.device):
        return f"torch.device({str(x)!r})"
    if x is Ellipsis:
        return "..."
    if isinstance(x, slice):
        return f"slice({to_source(x.start)}, {to_source(x.stop)}, {to_source(x.step)})"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(to_source(v) for v in x)
        if isinstance(x, list):
            return f"[{inner}]"
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{to_source(k)}: {to_source(v)}" for k, v in x.items()) + "}"
    raise UnsupportedSample(f"cannot print argument of type {type(x).__name__}")


def case_source(case: Case) -> str:
    return f"Case(args={to_source(tuple(case.args))}, kwargs={to_source(dict(case.kwargs))})"
