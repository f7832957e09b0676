"""A graph's nodes copied as plain records before a backend's passes rewrite it in place
(:class:`Snapshot`: what widening keeps of a dynamic compile's Dynamo and AOT graphs), and
helpers that treat them like FX nodes (:mod:`verishape.compiler.widen.canon`)."""

from __future__ import annotations

import operator
from typing import Any

import torch


#: what widening reads of a node's metadata (:func:`value_of`, :func:`placeholder_source`)
_READ_META = ("val", "example_value", "grapharg")


class SnapNode:
    """One node of a :class:`Snapshot`: what :func:`canonical` and the widening checks read
    of an FX node (its arguments point at the snapshot nodes ``mapping`` made of theirs)."""

    __slots__ = ("op", "target", "args", "kwargs", "meta", "name", "users")

    def __init__(self, node: torch.fx.Node, mapping: dict[torch.fx.Node, SnapNode]) -> None:
        self.op, self.target, self.name = node.op, node.target, node.name
        self.meta = {key: node.meta[key] for key in _READ_META if key in node.meta}
        # FX's immutable_list and immutable_dict keep their types (the canonical form names them)
        self.args, self.kwargs = torch.fx.node.map_arg((node.args, node.kwargs), mapping.__getitem__)
        #: the nodes whose arguments name this one, in graph order (as FX's ``Node.users``)
        self.users: dict[SnapNode, None] = {}
        for used in nodes_in((self.args, self.kwargs)):
            used.users.setdefault(self, None)

    def __repr__(self) -> str:
        return f"SnapNode({self.name})"


class Snapshot:
    """A graph's nodes as plain records (op, target, arguments, the metadata widening reads, values shared) and the
    module attributes its ``get_attr`` nodes name (a higher-order op's branch as a snapshot of its own): enough for
    everything read later (``snapshot.graph.nodes``, ``find_nodes``, :func:`attribute`).  Not ``Graph.graph_copy``, which builds and validates FX nodes (seconds on a
    large model), nor the module and all metadata: a kept compile lives as long as its cache entry, and the lowered
    graph's stack traces and provenance are objects stock frees after the compile and every full GC would walk."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        mapping: dict[torch.fx.Node, SnapNode] = {}
        for n in gm.graph.nodes:
            mapping[n] = SnapNode(n, mapping)
        self.nodes = list(mapping.values())  # in graph order
        # a branch or body of a higher-order op (``torch.cond``'s ``cond_true_0``) is a graph too: kept as one
        self._attributes = {n.target: _kept(attribute(gm, n.target)) for n in self.nodes if n.op == "get_attr"}

    @property
    def graph(self) -> Snapshot:
        return self

    def find_nodes(self, *, op: str) -> list[SnapNode]:
        return [n for n in self.nodes if n.op == op]


def _kept(attr: Any) -> Any:
    """A ``get_attr`` attribute as a snapshot keeps it: a graph module as its own :class:`Snapshot` (a backend's
    passes rewrite subgraphs in place too), anything else as it is."""
    return Snapshot(attr) if isinstance(attr, torch.fx.GraphModule) else attr


def attribute(gm: Any, target: str) -> Any:
    """The module attribute a ``get_attr`` node names (a dotted path), of a graph module or
    a :class:`Snapshot` (which kept those it names)."""
    return gm._attributes[target] if isinstance(gm, Snapshot) else operator.attrgetter(target)(gm)


def is_node(a: Any) -> bool:
    """An FX node or a :class:`Snapshot`'s node."""
    return isinstance(a, (torch.fx.Node, SnapNode))


def nodes_in(a: Any) -> list[Any]:
    """The nodes (FX or a :class:`Snapshot`'s) in ``a``, a node's arguments, in order."""
    found: list[Any] = []
    torch.fx.node.map_aggregate(a, lambda x: found.append(x) if is_node(x) else None)
    return found


def placeholder_source(node: Any) -> Any:
    """The input source Dynamo bound a placeholder to (its ``grapharg``), or None (an AOT
    graph's placeholders have none)."""
    return getattr(node.meta.get("grapharg"), "source", None)


def value_of(node: Any) -> Any:
    """The fake value Dynamo or AOTAutograd recorded for a node."""
    return node.meta["val"] if "val" in node.meta else node.meta.get("example_value")


def is_size_only(value: Any) -> bool:
    """A node whose value is a number or a structure of numbers (``sym_size``, ``size()``, arithmetic on sizes).  At
    size 1 Dynamo folds these into constants, so they are replaced by their value everywhere they are used."""
    if isinstance(value, (list, tuple, torch.Size)):
        return len(value) > 0 and all(is_size_only(v) for v in value)
    return isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat, int, float, bool))
