"""Calling a kept generic artifact from a later trace's arguments (:mod:`verishape.compiler.widen.reuse`
proves that it may): each generic argument rebuilt from the new call's, sizes set to 1 as
constants, inputs in another layout copied into the generic one, sizes the new frame
returns as constants left out of the results, and each result given the strides the new trace
gives it (eager's), size-1 dimensions included (:class:`OutputStrides`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import sympy
import torch

from . import layout
from .canon import NotWidened
from .binding import Binding
from .sizes import at_one
from .snapshot import placeholder_source


def argument_map(k: Any, binding: Binding, gm: torch.fx.GraphModule, orders: dict[str, tuple[int, ...]]
                  ) -> list[Callable[[tuple[Any, ...]], Any]]:
    """For each argument of the generic graph, how to get it from the size-1 graph's
    arguments: the same input by source (copied into the generic layout where ``orders``
    names it), a size set to 1 as 1, or a size read off an input tensor of this call."""
    from torch._dynamo.source import TensorProperty, TensorPropertySource

    here: dict[str, int] = {}
    for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        src = placeholder_source(node)
        if src is not None:
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
            continue
        if src is None:
            raise NotWidened(f"generic graph argument {node.name} has no source")
        if src.name in orders:
            out.append(lambda args, i=here[src.name], o=orders[src.name]: layout.to_layout(args[i], o))
            continue
        if src.name in here:
            out.append(lambda args, i=here[src.name]: args[i])
            continue
        if (isinstance(src, TensorPropertySource) and src.prop is TensorProperty.STRIDE
                and src.base.name in orders):
            raise NotWidened(f"the generic graph reads a stride of {src.base.name}, an input in another layout")
        if (isinstance(value, torch.SymInt) and isinstance(src, TensorPropertySource)
                and src.prop in (TensorProperty.SIZE, TensorProperty.STRIDE) and src.base.name in here):
            i, d = here[src.base.name], src.idx
            out.append((lambda args, i=i, d=d: args[i].size(d)) if src.prop is TensorProperty.SIZE
                       else (lambda args, i=i, d=d: args[i].stride(d)))
            continue
        raise NotWidened(f"generic graph argument {src.name} is not an argument of the size-1 graph")
    return out


class OutputStrides:
    """The strides the new trace gives each of its graph's outputs: eager's at this call,
    size-1 dimensions included, as expressions in the new trace's symbols, with how to read
    each symbol off the call's arguments.

    Why at run time: the proof compares the generic graph's output strides at 1 with the new
    trace's, but a generic stride formula set to 1 is not what running the artifact gives on
    a size-1 dimension.  An input expanded along the batch (stride 0) and copied into the
    generic layout makes ``aten.mul`` return strides (1, 1) for shape (1, 4) under
    ``aot_eager`` where eager gives (4, 1) (issue 48).  A size-1 dimension's stride moves no
    address, so the result is re-viewed with eager's strides (``as_strided``: the same
    elements, the same storage, aliasing kept); a stride that differs on a longer dimension
    is copied into eager's layout where the result owns its storage, and said otherwise."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        placeholders = list(gm.graph.find_nodes(op="placeholder"))
        outputs = gm.graph.output_node().args[0]
        outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
        self.strides: list[tuple[sympy.Expr, ...] | None] = []
        free: set[sympy.Symbol] = set()
        for node in outputs:
            value = _value(node) if isinstance(node, torch.fx.Node) else None
            if isinstance(value, torch.Tensor):
                strides = tuple(sympy.sympify(st.node.expr if isinstance(st, torch.SymInt) else st)
                                for st in value.stride())
                free |= set().union(*(e.free_symbols for e in strides))
                self.strides.append(strides)
            else:
                self.strides.append(None)
        self.readers = {s: _reader(s, placeholders) for s in free}
        unread = sorted((str(s) for s, r in self.readers.items() if r is None))
        if unread:
            raise NotWidened(f"an output's strides name sizes this call does not pass ({', '.join(unread[:3])})")
        self.symbols = sorted(free, key=str)
        self.fns = [None if st is None or all(e.is_Integer for e in st) else _lambdified(self.symbols, st)
                    for st in self.strides]

    def expected(self, i: int, args: tuple[Any, ...]) -> tuple[int, ...] | None:
        strides = self.strides[i] if i < len(self.strides) else None
        if strides is None:
            return None
        fn = self.fns[i]
        if fn is None:
            return tuple(int(e) for e in strides)
        return tuple(int(v) for v in fn(*[self.readers[s](args) for s in self.symbols]))

    def fix(self, out: Any, args: tuple[Any, ...]) -> Any:
        """``out`` (the results in the new graph's order) with eager's strides."""
        items = out if isinstance(out, (list, tuple)) else (out,)
        fixed = list(items)
        for i, t in enumerate(items):
            if not isinstance(t, torch.Tensor) or (1 not in t.shape and t.numel()):
                continue  # every dimension longer than 1: its strides were compared by the proof
            want = self.expected(i, args)
            if want is None or tuple(t.stride()) == want:
                continue
            if t.numel() == 0 or all(n == 1 or a == b for n, a, b in zip(t.shape, t.stride(), want)):
                fixed[i] = t.as_strided(t.shape, want, t.storage_offset())
            elif not any(_shares(t, a) for a in args):
                fixed[i] = torch.empty_strided(t.shape, want, dtype=t.dtype, device=t.device).copy_(t)
            else:
                _say_once(f"verishape: a reused artifact's output {i} has strides {tuple(t.stride())} where eager's "
                          f"are {want}, and shares an input's storage: left as computed")
        if not isinstance(out, (list, tuple)):
            return fixed[0]
        return type(out)(fixed)


def _value(node: torch.fx.Node) -> Any:
    return node.meta.get("example_value", node.meta.get("val"))


def _reader(symbol: sympy.Symbol, placeholders: list[torch.fx.Node]) -> Callable[[tuple[Any, ...]], int] | None:
    """How to read ``symbol`` off the graph's arguments: a SymInt argument that is it, or a
    size or stride of a tensor argument that is it; None when no argument carries it."""
    for i, node in enumerate(placeholders):
        v = _value(node)
        if isinstance(v, torch.SymInt) and v.node.expr == symbol:
            return lambda args, i=i: int(args[i])
    for i, node in enumerate(placeholders):
        v = _value(node)
        if isinstance(v, torch.Tensor):
            for d, n in enumerate(v.shape):
                if isinstance(n, torch.SymInt) and n.node.expr == symbol:
                    return lambda args, i=i, d=d: args[i].size(d)
            for d, st in enumerate(v.stride()):
                if isinstance(st, torch.SymInt) and st.node.expr == symbol:
                    return lambda args, i=i, d=d: args[i].stride(d)
    return None


def _lambdified(symbols: list[sympy.Symbol], exprs: tuple[sympy.Expr, ...]) -> Callable[..., Any]:
    """A plain function of the symbols' values giving ``exprs``: lambdified where SymPy can
    print them as Python, else substituted each call (torch's own functions, FloorDiv and kin)."""
    try:
        fn = sympy.lambdify(symbols, list(exprs), modules="math")
        fn(*[2] * len(symbols))
        return fn
    except (TypeError, NameError, SyntaxError, ValueError, AttributeError, ZeroDivisionError):
        # a printing gap (torch's own functions): substitute instead, slower and exact
        return lambda *values: [e.xreplace(dict(zip(symbols, map(sympy.Integer, values)))) for e in exprs]


def _shares(t: torch.Tensor, other: Any) -> bool:
    return (isinstance(other, torch.Tensor) and other.numel() > 0
            and other.untyped_storage().data_ptr() == t.untyped_storage().data_ptr())


_said: set[str] = set()


def _say_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        logging.getLogger("verishape").warning(text)


def calling(compiled: Callable[..., Any], args: list[Callable[[tuple[Any, ...]], Any]],
            keep: tuple[int, ...] | None = None, strides: OutputStrides | None = None) -> Callable[..., Any]:
    """The generic artifact called with arguments rebuilt from the size-1 call's; with
    ``keep``, only those of its results (the sizes the generic graph returns, which the
    size-1 frame's bytecode returns as constants, left out); with ``strides``, each result
    given eager's strides (:class:`OutputStrides`)."""
    # Dynamo calls what a backend returns with the graph's arguments unpacked, whatever
    # ``_boxed_call`` says (``functools.wraps`` copies that flag onto unboxed wrappers)
    def generic_artifact_at_size_1(*size_1_args: Any) -> Any:
        out = compiled(*[a(size_1_args) for a in args])
        if keep is not None:
            out = type(out)(out[i] for i in keep) if isinstance(out, tuple) else [out[i] for i in keep]
        return strides.fix(out, size_1_args) if strides is not None else out

    generic_artifact_at_size_1._verishape_reused = compiled  # type: ignore[attr-defined]
    return generic_artifact_at_size_1
