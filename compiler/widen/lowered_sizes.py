"""Every size the generic artifact computes with, and what it must be at 1 (docs/compile.md, "Every other decision
of the lowering").

Inductor's plain SymPy tests on a kept size (``reduction_numel == 0``, ``is_zero_elements()``, ``size == 1``) never
see ranges: on ``s - 1`` they take the general path, which is what a compile at 1 does only where every size stays
positive (``x[1:].max()`` at batch 1 reduces over no element: its initial value, where eager raises).  So every size
the generic artifact computes with that holds a kept size, taken where it is final (the AOT graph's dimensions and
divisors; after code generation, Inductor's loop, reduction and index ranges, index divisors and moduli, buffer and
extern input dimensions), must be at least 1 at 1, proved like the other goals (:mod:`verishape.compiler.widen.goals`).
A structure not read marks the log incomplete, which refuses: what was not read was not checked.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable
from typing import Any

import sympy
import torch

from . import over_ranges
from .effects import flat_tensors
from .sizes import at_one
from .snapshot import Snapshot, attribute

#: SymPy functions whose arguments after the first divide (divisor, and modulus where given)
_DIVIDING = ("FloorDiv", "CleanDiv", "CeilDiv", "ModularIndexing", "Mod", "PythonMod", "IntTrueDiv", "FloatTrueDiv")


@dataclasses.dataclass
class SizeUses:
    """The sizes (and divisors) a generic compile computes with: references filled while it
    lowers, read once, at 1.  ``incomplete`` names the first structure that could not be read."""

    #: (expr, kind, where): kind is "size" or "divisor"
    entries: list[tuple[sympy.Basic, str, str]] = dataclasses.field(default_factory=list)
    incomplete: str | None = None
    #: how many of Inductor's schedulers were read (0 after an Inductor lowering: not read)
    scheduled: int = 0
    #: the AOT graph the lowering was given was read (:func:`from_graph`), and whether it
    #: calls anything (a graph that does not is run as it is, never lowered)
    graph_read: bool = False
    graph_calls: bool = True

    def add_all(self, exprs: Iterable[Any], kind: str, where: str) -> None:
        self.entries.extend((e, kind, where) for e in exprs if isinstance(e, sympy.Basic) and not e.is_number)

    def refuse(self, why: str) -> None:
        if self.incomplete is None:
            self.incomplete = why

    def add_indexes(self, exprs: Iterable[Any], where: str) -> None:
        """The divisors and moduli inside index expressions."""
        for expr in exprs:
            if isinstance(expr, sympy.Basic) and not expr.is_number:
                for sub in sympy.preorder_traversal(expr):
                    if type(sub).__name__ in _DIVIDING:
                        self.add_all(sub.args[1:], "divisor", where)


def goals(uses: Iterable[tuple[sympy.Basic, str, str]], widened: set[sympy.Symbol],
          sub: dict[sympy.Symbol, sympy.Basic]) -> list[tuple[sympy.Basic, str]]:
    """``expr >= 1`` at 1 for every use that holds a widened symbol, deduplicated, with a description; goals True
    once the sizes are set are dropped, a False one is kept (the caller refuses on it)."""
    out: list[tuple[sympy.Basic, str]] = []
    seen: set[sympy.Basic] = set()
    for expr, kind, where in uses:
        if expr in seen or not (expr.free_symbols & widened):
            continue
        seen.add(expr)
        value = sympy.sympify(at_one(expr, sub, f"the {kind} {expr} of {where}"))
        goal = sympy.Ge(value, 1) if not value.is_number else sympy.true if value >= 1 else sympy.false
        if goal is not sympy.true:
            out.append((goal, f"the {kind} {expr} of {where} is {value} at 1 (the general path needs at least 1)"))
    return out


# ---------------------------------------------------------------------------- the AOT graph

#: ATen and Python division ops whose second argument divides
_DIVISION_TARGETS = ("aten.div", "aten.floor_divide", "aten.remainder", "aten.fmod", "aten.true_divide")
_PY_DIVISION = (operator.floordiv, operator.mod, operator.truediv)


def from_graph(gm: Any, uses: SizeUses) -> None:
    """Every tensor dimension of ``gm``'s nodes (the AOT graph, and the graphs its ``get_attr`` nodes name: a
    higher-order op's branches) and every size-derived divisor of its division nodes."""
    uses.graph_read = True
    uses.graph_calls = any(n.op == "call_function" for n in gm.graph.nodes)
    _graph_sizes(gm, uses)


def _graph_sizes(gm: Any, uses: SizeUses) -> None:
    """:func:`from_graph`'s reading of one graph and, first, of each graph it names."""
    for node in gm.graph.nodes:
        if node.op == "get_attr" and isinstance(sub := attribute(gm, node.target), (torch.fx.GraphModule, Snapshot)):
            _graph_sizes(sub, uses)
        for t in flat_tensors(node.meta.get("val", node.meta.get("example_value"))):
            sizes = over_ranges.exprs(t.shape)  # a static size is a number: not a use
            uses.add_all(sizes, "size", f"the AOT graph node {node.name}")
            uses.add_indexes(sizes, f"the AOT graph node {node.name}")
        if node.op != "call_function" or len(node.args) < 2:
            continue
        target, divisor = node.target, node.args[1]
        if target in _PY_DIVISION or str(target).startswith(_DIVISION_TARGETS):
            if hasattr(divisor, "meta"):  # an FX node or a snapshot's
                divisor = divisor.meta.get("val", divisor.meta.get("example_value"))
            if isinstance(divisor, (torch.SymInt, torch.SymFloat)):
                uses.add_all([divisor.node.expr], "divisor", f"the AOT graph node {node.name} ({target})")


# ---------------------------------------------------------------------------- Inductor's scheduled nodes


def from_scheduler(scheduler: Any, uses: SizeUses) -> None:
    """Read every scheduled node after code generation (its loops, index expressions and
    output layouts are final then), and the graph's buffers."""
    from torch._inductor import ir, scheduler as sched
    from torch._inductor.virtualized import V

    for group in getattr(scheduler, "nodes", ()):
        for node in group.get_nodes():
            name = node.get_name()
            if isinstance(node, sched.SchedulerNode):
                _loops(node, name, uses)
            elif isinstance(node, sched.ExternKernelSchedulerNode):
                for inp in getattr(node.node, "inputs", ()) or ():
                    _layout(inp, f"an input of extern kernel {name}", uses)
            elif not isinstance(node, sched.NopKernelSchedulerNode):
                uses.refuse(f"a scheduled node of a kind this does not read ({type(node).__name__} {name})")
            for buf in node.get_outputs():
                _layout(buf.node, f"buffer {buf.get_name()}", uses)
    for buf in getattr(V.graph, "buffers", ()):
        _layout(buf, f"buffer {buf.get_name()}", uses)
    for out in getattr(V.graph, "graph_outputs", ()) or ():
        if isinstance(out, ir.IRNode):
            _layout(out, "a graph output", uses)


def _loops(node: Any, name: str, uses: SizeUses) -> None:
    sizes, body = getattr(node, "_sizes", None), getattr(node, "_body", None)
    if sizes is None or body is None:
        uses.refuse(f"scheduled node {name} has no loop sizes or body")
        return
    iteration, reduction = sizes
    uses.add_all(iteration, "size", f"the loop ranges of {name}")
    uses.add_all(reduction, "size", f"the reduction ranges of {name}")
    uses.add_all(getattr(body, "var_ranges", {}).values(), "size", f"the index ranges of {name}")
    exprs = getattr(body, "indexing_exprs", None)
    if exprs is None:
        uses.refuse(f"scheduled node {name} has no index expressions")
        return
    uses.add_indexes(exprs.values(), f"an index of {name}")


def _layout(node: Any, where: str, uses: SizeUses) -> None:
    """Sizes of ``node``'s layout (and the divisors in them, and in its offset and strides)."""
    try:
        layout = node.get_layout()
    except (AttributeError, NotImplementedError, AssertionError):
        return  # no layout of its own (a NoneLayout op, a multi-output holder: its outputs are buffers)
    size = getattr(layout, "size", None)
    if size is None:
        return
    uses.add_all(size, "size", where)
    uses.add_indexes((*size, *getattr(layout, "stride", ()), getattr(layout, "offset", 0)), where)
