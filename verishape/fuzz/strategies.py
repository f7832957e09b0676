"""Hypothesis strategies for shapes, strides, layouts and mutated op cases.

Every choice shrinks toward the plain case (no mutation, contiguous layout, the first
seed), so a shrunk finding differs from a known-good sample only where it must.  Sizes are
biased to 0, 1 and 2, where broadcasting, specialization and empty-tensor paths live.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from hypothesis import strategies as st

from .inputs import STRIDE_KINDS, Case, Layout, TensorSpec, build
from .sizes import MAX_SIDE, cap_for_rank

SMALL = (0, 1, 2, 3)


def sizes(max_side: int = MAX_SIDE) -> st.SearchStrategy[int]:
    """One dimension: usually 0, 1, 2 or 3, sometimes anything up to ``max_side``."""
    return st.one_of(st.sampled_from(SMALL), st.integers(0, max_side))


def shapes(min_rank: int = 0, max_rank: int = 4, max_side: int | None = None) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes whose element count stays small (each side capped by the rank)."""
    @st.composite
    def draw_shape(draw: st.DrawFn) -> tuple[int, ...]:
        rank = draw(st.integers(min_rank, max_rank))
        cap = cap_for_rank(rank) if max_side is None else max_side
        return tuple(draw(sizes(cap)) for _ in range(rank))
    return draw_shape()


def layouts(rank: int) -> st.SearchStrategy[Layout]:
    """Contiguous, permuted, strided (padded rows / doubled strides), or both."""
    if rank == 0:
        return st.just(Layout())

    @st.composite
    def draw_layout(draw: st.DrawFn) -> Layout:
        kind = draw(st.integers(0, 3))
        if kind <= 1:
            return Layout()
        perm = None
        if rank > 1 and (kind == 2 or draw(st.booleans())):
            p = tuple(draw(st.permutations(range(rank))))
            perm = None if p == tuple(range(rank)) else p
        stride = "dense" if kind == 2 else draw(st.sampled_from(STRIDE_KINDS[1:]))
        return Layout(perm, stride)
    return draw_layout()


def strides(shape: Sequence[int]) -> st.SearchStrategy[tuple[int, ...]]:
    """Strides a real tensor of ``shape`` can have (from a drawn layout)."""
    def realize(layout: Layout) -> tuple[int, ...]:
        t = build(list(shape), layout, lambda base: torch.empty(base, device="meta"))
        return tuple(t.stride())
    return layouts(len(shape)).map(realize)


def tensor_specs(dtype: torch.dtype = torch.float32, min_rank: int = 0, max_rank: int = 4) -> st.SearchStrategy[TensorSpec]:
    """A tensor recipe: a shape with a layout and a few values."""
    @st.composite
    def draw_spec(draw: st.DrawFn) -> TensorSpec:
        shape = draw(shapes(min_rank, max_rank))
        return TensorSpec(shape, dtype, draw(layouts(len(shape))), (0.5, 1.5, -1.0) if dtype.is_floating_point else (1, 0, 2))
    return draw_spec()


def mutated_cases(seeds: Sequence[Case]) -> st.SearchStrategy[Case]:
    """A seed case with a few sizes changed and layouts drawn.

    A mutation replaces a size ``v`` by a new size ``w``: by default in every dimension of
    the case that had size ``v`` (matching dims usually must stay matched for the op to be
    valid), or only in one dimension.  Shrinks to the first seed, unchanged.
    """
    if not seeds:
        raise ValueError("no seed cases")

    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        case = seeds[draw(st.integers(0, len(seeds) - 1))]
        shapes_ = [list(s) for s in case.shapes()]
        slots = [(i, d) for i, s in enumerate(shapes_) for d in range(len(s))]
        if slots:
            for _ in range(draw(st.integers(0, 2))):
                leaf, dim = slots[draw(st.integers(0, len(slots) - 1))]
                old = shapes_[leaf][dim]
                new = draw(st.one_of(st.sampled_from((0, 1, 2, max(old - 1, 0), old + 1)),
                                     st.integers(0, cap_for_rank(len(shapes_[leaf])))))
                if draw(st.booleans()):
                    shapes_[leaf][dim] = new
                else:
                    for i, d in slots:
                        if shapes_[i][d] == old:
                            shapes_[i][d] = new
        case = case.with_shapes(shapes_)
        args, kwargs = case.map_specs(
            lambda i, spec: TensorSpec(spec.shape, spec.dtype, draw(layouts(len(spec.shape))), spec.pool))
        return Case(tuple(args), dict(kwargs))
    return draw_case()
