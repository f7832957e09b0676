"""An input's layout, widened: a call whose tensors have other strides than the generic trace's runs the generic
artifact on copies laid out as it was compiled for, where proved (the graphs one apart from the layout, the input
neither written nor shared, the generic layout dense): docs/compile.md, "Beyond 0/1: an input's layout, a served
decoder loop (issue 38)"."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from .canon import Canonicalizer, NotWidened
from .effects import mutated_storages, reads_layout, storage_of, storages_of
from .snapshot import placeholder_source, value_of


def differing(generic: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """The inputs whose canonical sizes agree and strides or storage offset do not; :class:`NotWidened`
    where anything else differs (an input only one side tracks, another size, a scalar)."""
    if generic.keys() != here.keys():
        raise NotWidened("the two traces track different inputs")
    out = [name for name, g in generic.items() if g != here[name]]
    for name in out:
        g, h = generic[name], here[name]
        # a canonical tensor input (``reuse._canon_inputs``): ("tensor", sizes, strides, offset)
        if not (isinstance(g, tuple) and isinstance(h, tuple) and len(g) == len(h) == 4
                and g[0] == h[0] == "tensor" and g[1] == h[1]):
            raise NotWidened(f"input {name} differs from the generic trace in more than its layout")
    return sorted(out)


def dense_order(fake: torch.Tensor, canon: Canonicalizer, hints: dict[sympy.Symbol, Any]) -> tuple[int, ...]:
    """The order of dimensions (outermost first, read off the strides at the generic compile's hints)
    whose dense layout gives ``fake``'s strides for every value of its sizes, checked on the canonical
    expressions (a size-1 dimension skipped: its only index is 0); :class:`NotWidened` where not dense."""
    if canon.number(fake.storage_offset()) != 0:
        raise NotWidened("the generic input starts at an offset into its storage")
    sizes, strides = canon.scalar(fake.shape), canon.scalar(fake.stride())
    at_hint = [int(st.node.expr.xreplace(hints)) if isinstance(st, torch.SymInt) else int(st) for st in fake.stride()]
    order = tuple(sorted(range(fake.dim()), key=lambda d: (-at_hint[d], d)))
    inner: sympy.Expr = sympy.Integer(1)
    for d in reversed(order):
        if sizes[d] != 1 and sympy.expand(strides[d] - inner) != 0:
            raise NotWidened(f"the generic input's layout is not dense (dimension {d}: stride {strides[d]}, "
                             f"{inner} in order {order})")
        inner = sympy.expand(inner * sizes[d])
    return order


def unobserved(gm: torch.fx.GraphModule, names: list[str]) -> None:
    """:class:`NotWidened` unless the graph neither writes these inputs' storage nor returns anything sharing it, and no
    op reads a layout (``as_strided`` reads storage positions a copy holds other values at): then the copy the artifact
    runs on can not be told from the input.  Checked here on the Dynamo graph, by the caller on the AOT graph where it
    traces one (Note [A copy into the generic layout needs no AOT trace])."""
    by_source = {src.name: node for node in gm.graph.find_nodes(op="placeholder")
                 if (src := placeholder_source(node)) is not None}
    if reads_layout(gm):
        raise NotWidened("an op of the graph reads its input's layout (as_strided and the like): "
                         "an input's layout is not widened")
    written = mutated_storages(gm)
    if written is None:
        raise NotWidened("what the graph writes is not known: an input's layout is not widened")
    returned = set().union(*(storages_of(node.args) for node in gm.graph.find_nodes(op="output")))
    for name in names:
        node = by_source.get(name)
        if node is None:
            raise NotWidened(f"input {name} (another layout) is not an argument of the graph")
        key = storage_of(value_of(node))
        if key in written:
            raise NotWidened(f"the graph writes to input {name}: its layout is not widened")
        if key in returned:
            raise NotWidened(f"the graph returns a tensor sharing input {name}'s storage: its layout is not widened")


#: a layout reuse must pay back within this many calls: their copies must cost less than the
#: compile it saves (its entry serves every later call in the layout: each decode step)
PAYBACK_CALLS = 1000
#: bytes a copy moves per second, by device type (read and write; a conservative figure,
#: below what this CPU and an H100 measure), for the estimate
COPY_BYTES_PER_S = {"cpu": 2e9, "cuda": 5e11}


def pays_back(fakes: list[torch.Tensor], compile_s: float) -> sympy.Basic | None:
    """:class:`NotWidened` where copying these inputs on :data:`PAYBACK_CALLS` calls costs more than ``compile_s``, the
    generic compile's; else that line as a bound on the bytes copied in the new trace's symbols (None where static), a
    guard for the new entry.  Speed, not soundness (docs/compile.md; ``benchmarks/layout_copy_cost.py``)."""
    moved, symbolic = 0, sympy.Integer(0)
    for t in fakes:
        numel = t.numel()
        n = numel if isinstance(numel, int) else numel.node.hint
        if n is None:
            raise NotWidened("the size of an input in another layout has no hint: its copy is not costed")
        moved += int(n) * t.element_size()
        symbolic += (numel.node.expr if isinstance(numel, torch.SymInt) else sympy.Integer(numel)) * t.element_size()
    rate = COPY_BYTES_PER_S.get(fakes[0].device.type, COPY_BYTES_PER_S["cpu"]) if fakes else 1.0
    cost = moved / rate * PAYBACK_CALLS
    if cost > compile_s:
        raise NotWidened(f"copying {moved / 2**20:.1f} MiB into the generic layout on every call would cost more "
                         f"over {PAYBACK_CALLS} calls (about {cost:.1f} s) than the compile it saves "
                         f"({compile_s:.1f} s): compiled as stock")
    static = not symbolic.free_symbols or PAYBACK_CALLS <= 0
    return None if static else sympy.Le(symbolic, int(compile_s * rate / PAYBACK_CALLS))


def to_layout(t: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    """A copy of ``t`` laid out densely in ``order`` (outermost first), keeping ``t``'s own stride on
    each size-1 dimension: it addresses nothing, but an eager op reads it for its output's strides
    (issue 48: ``x * 2`` of an input expanded along the batch, copied at 1, gave (1, 1), eager (4, 1))."""
    strides = [0] * t.dim()
    inner = 1
    for d in reversed(order):  # innermost first: each stride is the product of the sizes inside it
        strides[d] = t.stride(d) if t.shape[d] == 1 else inner
        inner *= t.shape[d]
    return torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device).copy_(t)
