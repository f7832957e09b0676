"""Calling a kept generic artifact from a later trace's arguments, once
:mod:`verishape.compiler.widen.reuse` proved that it may."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch._dynamo.source import TensorProperty, TensorPropertySource

from . import layout
from .canon import NotWidened
from .binding import Binding
from .sizes import at_one
from .snapshot import placeholder_source

if TYPE_CHECKING:
    from .kept import Kept


def argument_map(k: Kept, binding: Binding, gm: torch.fx.GraphModule, orders: dict[str, tuple[int, ...]]
                  ) -> list[Callable[[tuple[Any, ...]], Any]]:
    """For each argument of the generic graph, how to read it off the size-1 graph's arguments: the same input by source
    (copied into the generic layout where ``orders`` names it), a size set to 1 as 1, or a size of an input tensor."""
    here: dict[str, int] = {}
    for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        if (src := placeholder_source(node)) is not None:
            here.setdefault(src.name, i)
    point = binding.point(k.env)
    constants = {s for s, v in point.items() if v.is_number}
    out: list[Callable[[tuple[Any, ...]], Any]] = []
    for node in k.dynamo.graph.find_nodes(op="placeholder"):
        src = placeholder_source(node)
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.SymInt) and value.node.expr.free_symbols <= constants:
            constant = int(at_one(value.node.expr, point, f"generic graph argument {node.name} = {value.node.expr}"))
            out.append(lambda args, c=constant: c)
        elif src is None:
            raise NotWidened(f"generic graph argument {node.name} has no source")
        elif src.name in orders:
            out.append(lambda args, i=here[src.name], o=orders[src.name]: layout.to_layout(args[i], o))
        elif src.name in here:
            out.append(lambda args, i=here[src.name]: args[i])
        elif isinstance(src, TensorPropertySource) and src.prop is TensorProperty.STRIDE and src.base.name in orders:
            raise NotWidened(f"the generic graph reads a stride of {src.base.name}, an input in another layout")
        elif (isinstance(value, torch.SymInt) and isinstance(src, TensorPropertySource)
                and src.prop in (TensorProperty.SIZE, TensorProperty.STRIDE) and src.base.name in here):
            read = torch.Tensor.size if src.prop is TensorProperty.SIZE else torch.Tensor.stride
            out.append(lambda args, i=here[src.base.name], d=src.idx, read=read: read(args[i], d))
        else:
            raise NotWidened(f"generic graph argument {src.name} is not an argument of the size-1 graph")
    return out


def calling(compiled: Callable[..., Any], args: list[Callable[[tuple[Any, ...]], Any]],
            keep: tuple[int, ...] | None = None) -> Callable[..., Any]:
    """The generic artifact called with arguments rebuilt from the size-1 call's; with ``keep``,
    only those results (sizes the size-1 frame's bytecode returns as constants left out)."""
    # Dynamo calls what a backend returns with the graph's arguments unpacked, whatever
    # ``_boxed_call`` says (``functools.wraps`` copies that flag onto unboxed wrappers)
    def generic_artifact_at_size_1(*size_1_args: Any) -> Any:
        out = compiled(*[a(size_1_args) for a in args])
        if keep is None:
            return out
        return type(out)(out[i] for i in keep) if isinstance(out, tuple) else [out[i] for i in keep]

    generic_artifact_at_size_1._verishape_reused = compiled  # type: ignore[attr-defined]
    return generic_artifact_at_size_1
