"""A comparable form of a frame's FX graphs (:func:`canonical`) for :mod:`verishape.compiler.widen.reuse` to compare
two traces in: size-only nodes folded, symbols renamed by input source, names and offsets that only say *when* Dynamo
generated something normalised (not the bytecode around the graph: the size-1 call runs its own)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from itertools import takewhile
from typing import Any

import sympy
import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .effects import is_functional, mutated_storages, reads_layout, storage_of, storages_of, target_name
from .snapshot import Snapshot, attribute, is_node, is_size_only, nodes_in, placeholder_source, value_of


class NotWidened(Exception):
    """Why a specialization was not widened (the message is the reason, for reports)."""


@dataclasses.dataclass(frozen=True)
class Canon:
    """A graph as two traces compare: an entry per kept node, and its outputs (each a kept node or a folded value)."""

    entries: tuple[Any, ...]
    outputs: tuple[Any, ...] = ()

    def fingerprint(self) -> str:
        return hashlib.sha256(repr((self.entries, self.outputs)).encode()).hexdigest()[:16]


def returned_sizes(generic: Canon, other: Canon) -> tuple[int, ...] | None:
    """Where two graphs differ only in sizes the generic one returns: the positions of the generic outputs ``other``
    returns too, in order (None where they differ otherwise).  A returned size (``x.shape[0] - 1``) is a graph
    output while symbolic; at 1 Dynamo folds it and the size-1 bytecode returns the constant.  So the dropped
    outputs must be folded values; the caller leaves them out of the generic artifact's results."""
    if generic.entries != other.entries:
        return None
    keep: list[int] = []  # also how many of ``other``'s outputs are matched
    for i, item in enumerate(generic.outputs):
        if len(keep) < len(other.outputs) and item == other.outputs[len(keep)]:
            keep.append(i)
        elif not (isinstance(item, tuple) and item and item[0] == "value"):
            return None
    return tuple(keep) if len(keep) == len(other.outputs) else None


class Canonicalizer:
    """Turns a graph into :class:`Canon`, every symbol through ``rename`` (the generic side: the
    widened symbol by 1, the others by their first input source; the size-1 side: by source).  A
    symbol ``rename`` does not cover (unbacked, or without a source) makes the graph incomparable."""

    def __init__(self, rename: Callable[[sympy.Symbol], sympy.Basic], relaid: frozenset[int] = frozenset()) -> None:
        self._rename = rename
        #: positions (among tensor placeholders) whose strides and offset are not compared: the caller
        #: copies those inputs into the generic layout (:mod:`verishape.compiler.widen.layout`)
        self._relaid = relaid
        #: storage of a folded whole-dimension scatter -> its src's (per graph, like every field :meth:`_prepare` sets)
        self._same_storage: dict[Any, Any] = {}

    def number(self, v: Any) -> Any:
        if not isinstance(v, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            return sympy.sympify(v) if isinstance(v, int) else v  # a bool: sympy.true or sympy.false
        if isinstance(v, torch.SymInt) and (constant := v.node.maybe_as_int()) is not None:
            return sympy.Integer(constant)
        e = v.node.expr
        out = e.xreplace({s: self._rename(s) for s in e.free_symbols})
        return sympy.expand(out) if isinstance(out, sympy.Expr) else out

    def scalar(self, v: Any) -> Any:
        return tuple(self.scalar(x) for x in v) if isinstance(v, (list, tuple, torch.Size)) else self.number(v)

    def tensor_meta(self, t: torch.Tensor, storages: dict[Any, int] | None, loose: bool = False) -> tuple[Any, ...]:
        """Sizes, strides, offset, dtype, device, layout, grad flag and storage identity (its index in ``storages``;
        None: left out).  ``loose`` (intermediates only: an output's strides are the caller's, an input's its
        guards'): a size-1 dimension's stride is left out.  Its only index is 0, so it moves no address (torch's
        contiguity checks skip it too), and at 1 ATen's choice of it differs from the generic formula (a clone of a
        (1, 7) slice of a (1, 8) tensor keeps stride 8, where (s, 7) is made contiguous)."""
        key = self._same_storage.get(storage_of(t), storage_of(t))  # fake tensors have a storage identity too
        alias: Any = "private" if storages is None else storages.setdefault(key, len(storages))
        sizes = self.scalar(t.shape)
        strides = tuple("size-1" if loose and n == 1 else st for n, st in zip(sizes, self.scalar(t.stride())))
        return ("tensor", sizes, strides, self.number(t.storage_offset()),
                str(t.dtype), str(t.device), str(t.layout), bool(t.requires_grad), alias)

    def meta(self, value: Any, intermediate: bool = False) -> Any:
        """``intermediate`` (not a graph output): strides compared loosely (:meth:`tensor_meta`), and its
        storage sharing left out where no output shares its storage and nothing in the graph writes to
        it (a copy and a view cannot be told apart there)."""
        if isinstance(value, torch.Tensor):
            hide = intermediate and self._observed is not None and storage_of(value) not in self._observed
            if hide and self._values_only:
                # only its values can be observed: sizes, dtype and device decide them
                return ("tensor", self.scalar(value.shape), str(value.dtype), str(value.device),
                        str(value.layout), bool(value.requires_grad), "private")
            return self.tensor_meta(value, None if hide else self._storages, loose=intermediate)
        if isinstance(value, (list, tuple)):
            return tuple(self.meta(v, intermediate) for v in value)
        return None if value is None else ("other", type(value).__name__)

    def constant(self, gm: torch.fx.GraphModule, target: str) -> Any:
        """A ``get_attr`` tensor: its metadata and its contents (a digest of the values;
        the same parameter object on both sides compares by identity of its data).  A graph (a
        higher-order op's branch or body): its own canonical form, its symbols renamed as this one's."""
        attr = attribute(gm, target)
        if isinstance(attr, (torch.fx.GraphModule, Snapshot)):
            sub = Canonicalizer(self._rename).graph(attr)
            return ("graph", sub.entries, sub.outputs)
        if not isinstance(attr, torch.Tensor) or isinstance(attr, torch._subclasses.FakeTensor):
            raise NotWidened(f"graph reads attribute {target} of type {type(attr).__name__}; not compared")
        meta = self.tensor_meta(attr, None)[:-1]  # a real tensor: numbers only, and no storage identity
        if attr.numel() <= 1 << 16:
            with unset_fake_temporarily():  # lowering runs under the frame's fake mode
                data = attr.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
            return meta, hashlib.sha256(data).hexdigest()
        return meta, ("data_ptr", attr.data_ptr())

    def _identity_view(self, node: torch.fx.Node, mine: torch.Tensor, theirs: torch.Tensor, loose: bool) -> bool:
        """An ATen view op whose result has its input's sizes, strides, offset, dtype and storage: it reads exactly
        the input's elements, so it is the input (folded on both sides).  The traces differ in these: a generic
        ``slice(x, 0, 0, end)`` is dropped at 1 or becomes ``alias``; ViT's ``cls_token.expand(batch, -1, -1)`` is
        dropped at batch 1 (the generic one gives that dimension stride 0).  ``loose``: :meth:`tensor_meta`'s."""
        if not (isinstance(node.target, torch._ops.OpOverload) and node.target.is_view):
            return False
        probe = dict(self._storages)  # both numbered as this graph would, neither registered
        return self.tensor_meta(mine, probe, loose) == self.tensor_meta(theirs, probe, loose)

    def _copy_of_input(self, node: torch.fx.Node, mine: torch.Tensor, theirs: torch.Tensor) -> bool:
        """``aten.clone(x)`` not returned, where neither it nor ``x`` can be observed but by value
        (:meth:`_unobserved`; an op that reads a layout could read past a copy's elements): it has ``x``'s
        values, whatever layout it was given.  At 1 ``contiguous()`` or ``reshape`` of an input contiguous
        there returns it where the generic graph copies (T5's decoder; a static cache's decode step)."""
        return node.target is torch.ops.aten.clone.default and self._unobserved(mine, theirs) and (
            (self.scalar(mine.shape), mine.dtype, mine.device) == (self.scalar(theirs.shape), theirs.dtype,
                                                                   theirs.device))

    def _full_scatter(self, node: torch.fx.Node) -> bool:
        """``aten.slice_scatter(base, src, dim, 0, end)`` over the whole of ``dim`` (step 1) whose ``src``
        has its result's sizes and strides: every element comes from ``src``, so the result *is* ``src``'s
        value.  Generic traces write ``t[:, 1:] = v`` through a full dim-0 slice and scatter it back; at 1
        ATen drops that slice.  Only where a fresh copy and ``src`` cannot be told apart: a functional
        (AOT) graph, or neither is written nor output (:meth:`_unobserved`); never a graph output."""
        if node.target is not torch.ops.aten.slice_scatter.default:
            return False
        base, src, dim, start, end, step = (list(node.args) + [None] * 6)[:6]
        dim = node.kwargs.get("dim", 0 if dim is None else dim)
        start = node.kwargs.get("start", start)
        end = node.kwargs.get("end", end)
        step = node.kwargs.get("step", 1 if step is None else step)
        if not (is_node(src) and src in self._index and is_node(base) and isinstance(dim, int)):
            return False
        mine, theirs, whole = value_of(node), value_of(src), value_of(base)
        if not all(isinstance(t, torch.Tensor) for t in (mine, theirs, whole)):
            return False
        if storage_of(mine) in self._output_storages or not (self._functional or self._unobserved(mine, theirs)):
            return False
        size = self.number(whole.shape[dim])
        first, last, stride = (self._folded.get(a) if is_node(a) else self.number(a)
                               for a in (0 if start is None else start, end, step))
        covers = end is None or (isinstance(last, sympy.Expr) and isinstance(size, sympy.Expr)
                                 and sympy.simplify(last - size).is_nonnegative is True)
        if first != 0 or stride != 1 or not covers or self.tensor_meta(mine, None) != self.tensor_meta(theirs, None):
            return False
        src_key = storage_of(theirs)
        self._same_storage[storage_of(mine)] = self._same_storage.get(src_key, src_key)
        return True

    def graph(self, gm: torch.fx.GraphModule) -> Canon:
        self._prepare(gm)
        entries: list[Any] = []
        returned: tuple[Any, ...] = ()
        position = -1
        for node in gm.graph.nodes:
            value = value_of(node)
            if node.op == "output" and len(node.args) == 1 and isinstance(node.args[0], (tuple, list)):
                returned = tuple(self._arg(x) for x in node.args[0])
                entries.append(("output", type(node.args[0]).__name__, self._arg(node.kwargs)))
                continue
            if node.op == "call_module":
                raise NotWidened(f"graph has a call_module node ({node.target}); not compared")
            if node.op == "get_attr":
                self._index[node] = len(entries)
                entries.append(("get_attr", node.target, self.constant(gm, node.target)))
                continue
            if node.op != "output" and is_size_only(value):
                self._folded[node] = self.scalar(value)
                continue
            if (same := self._same_value_as(node)) is not None:
                self._index[node] = self._index[same]
                continue
            target = target_name(node.target)
            args, kwargs = self._moot_causal(node, target)
            if (at := _BRANCH_OPERANDS.get(target)) is not None and len(args) > at:
                args = (*args[:at], self._without_sizes(args[at]), *args[at + 1:])
            if target in _RESHAPES and self._values_only and isinstance(value, torch.Tensor) and (
                    self._functional or self._unobserved(value, *(value_of(a) for a in args[:1] if is_node(a)))):
                # by value, a view, a view of a fresh copy and a reshape are one thing: the row-major reshape of the
                # input's values (where no write tells them apart), to the sizes it gives (-1 or a product: one reshape)
                target, args, kwargs = "reshape", (args[0], tuple(value.shape)), {}
            if node.op == "placeholder":  # its source and metadata (a relaid input's without strides and offset)
                position += isinstance(value, torch.Tensor)
                src, meta = placeholder_source(node), self.meta(value)
                if position in self._relaid and isinstance(value, torch.Tensor):
                    meta = (*meta[:2], "relaid", "relaid", *meta[4:])
                entry = ("placeholder", src.name if src is not None else None, meta)
            else:
                entry = (node.op, target, self._arg(args), self._arg(kwargs),
                         self.meta(value, intermediate=node not in self._outputs) if node.op != "output" else None)
            self._index[node] = len(entries)
            entries.append(entry)
        return Canon(tuple(entries), returned)

    def _prepare(self, gm: torch.fx.GraphModule) -> None:
        """Read what comparing ``gm`` depends on, and start its per-graph state empty."""
        returned = [node.args for node in gm.graph.find_nodes(op="output")]
        #: the graph's output nodes, and the storages they use (a scatter writing one is never folded)
        self._outputs = set(nodes_in(returned))
        self._output_storages = storages_of(returned)
        self._functional = is_functional(gm)
        written = set() if self._functional else mutated_storages(gm)
        #: the storages the graph writes (:func:`mutated_storages`) or an output uses (None: the writes are unknown):
        #: an intermediate's storage sharing is compared only where it could be observed
        self._observed = None if written is None else written | self._output_storages
        #: an intermediate nothing can observe compares by value alone (sizes, dtype, device; not strides)
        self._values_only = written is not None and not reads_layout(gm)
        #: the nodes compared so far: a kept node -> its entry's position, a folded size node -> its value
        self._index: dict[torch.fx.Node, int] = {}
        self._folded: dict[torch.fx.Node, Any] = {}
        #: the storages met so far -> their position (a tensor's alias)
        self._storages: dict[Any, int] = {}
        self._same_storage = {}

    def _unobserved(self, *values: Any) -> bool:
        """Only these tensors' values can be observed, not which storage they are in: no op reads a
        layout, the graph's writes are known and none reaches their storages, and no output shares them
        (a functional graph writes nothing; an AOT graph of a static cache writes the cache alone)."""
        return self._values_only and all(isinstance(v, torch.Tensor) and storage_of(v) not in self._observed
                                         for v in values)

    def _same_value_as(self, node: torch.fx.Node) -> torch.fx.Node | None:
        """The node whose value ``node``'s is, where the two cannot be told apart, else None.  Only an identity
        view folds where ``node`` is a graph output: a copy's storage and strides are the caller's to see."""
        source = node.args[0] if node.op == "call_function" and node.args else None
        mine, theirs = value_of(node), (value_of(source) if is_node(source) and source in self._index else None)
        pair = (mine, theirs) if isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor) else None
        if pair is not None and self._identity_view(node, *pair, loose=node not in self._outputs):
            return node.args[0]
        if node in self._outputs:
            return None
        if self._full_scatter(node):
            return node.args[1]
        if pair is not None and (self._copy_of_input(node, *pair) or self._unbroadcast_values(node, *pair)):
            return node.args[0]
        return None

    def _unbroadcast_values(self, node: torch.fx.Node, mine: torch.Tensor, theirs: torch.Tensor) -> bool:
        """A reshape that only drops leading size-1 dimensions, used only as the values of ``index_put``, which
        broadcasts them back to the indexed shape.  torch's indexing drops them before it calls ``index_put``
        (``y[:, :, i] = v`` with ``v`` of batch 1: (1, 2, 1, 8) becomes (2, 1, 8)), so the graph at batch 1 has a
        reshape the generic one has not (Gemma 2's static sliding-window cache).  It must view its input, or both be
        unobserved: a copy taken before a write to its input is not the input."""
        dropped = theirs.dim() - mine.dim()
        if (target_name(node.target) not in _RESHAPES or dropped <= 0
                or self.scalar(theirs.shape[dropped:]) != self.scalar(mine.shape)
                or any(self.number(d) != 1 for d in theirs.shape[:dropped])):
            return False
        viewed = storage_of(mine) == storage_of(theirs)
        return (viewed or self._unobserved(mine, theirs)) and bool(node.users) and all(
            u.target in _BROADCAST_VALUES and len(u.args) >= 3 and u.args[2] is node and u.args[0] is not node
            and node not in nodes_in((u.args[1], u.kwargs)) for u in node.users)

    def _without_sizes(self, a: Any) -> Any:
        """A branch's operand list less its sizes (:data:`_BRANCH_OPERANDS`): Dynamo passes a branch the symbols it
        reads (``(x, s0)``), and at 1, where the size is a constant in the branch, passes none.  The branch's
        placeholder for a size is folded to that size wherever the branch uses it (:meth:`graph`), so its value is
        compared there, in the branch's own canonical form (:meth:`constant`)."""
        if not isinstance(a, (list, tuple)):
            return a
        return type(a)(x for x in a if not (x in self._folded if is_node(x) else is_size_only(x)))

    def _arg(self, a: Any) -> Any:
        """A node's argument in comparable form: another node by position (or the value a
        size node was folded to), containers item by item, numbers renamed, constants by repr."""
        if is_node(a):
            return ("value", self._folded[a]) if a in self._folded else ("node", self._index[a])
        if isinstance(a, (list, tuple)):
            items = tuple(self._arg(x) for x in a)
            if items and all(i[0] == "value" for i in items):
                # a literal tuple of sizes and a folded size node holding one compare equal
                return ("value", tuple(i[1] for i in items))
            return (type(a).__name__, items)
        if isinstance(a, dict):
            return ("dict", tuple((k, self._arg(v)) for k, v in a.items()))
        if isinstance(a, slice):
            return ("slice", *(self._arg(x) for x in (a.start, a.stop, a.step)))
        if isinstance(a, (torch.SymInt, torch.SymBool, torch.SymFloat, bool, int)):
            return ("value", self.number(a))
        if isinstance(a, torch.Tensor):
            raise NotWidened("a tensor constant is an argument of a graph node")
        if isinstance(a, (float, str, type(None), type(Ellipsis), torch.dtype, torch.device, torch.layout,
                          torch.memory_format)):  # Ellipsis: ``x[..., :n]`` (LLaMA's rotary embedding)
            return ("const", type(a).__name__, repr(a))
        raise NotWidened(f"cannot compare an argument of type {type(a).__name__}")

    def _moot_causal(self, node: torch.fx.Node, target: str) -> tuple[Any, Any]:
        """``node``'s arguments, an attention call's ``is_causal`` read as False where the query and the key both have
        one position: the causal mask of a 1 x 1 score matrix is ``[[True]]``, so True and False compute the same there
        (Hugging Face decoders pass ``is_causal=q_len > 1``, BART: the generic graph says True at length 1, the length-1
        trace False).  Only the flag is normalised; every other argument and the output metadata are still compared."""
        query_key = [value_of(a) if is_node(a) else None for a in node.args[:2]]
        if "scaled_dot_product" not in target or len(query_key) < 2 or not all(
                isinstance(t, torch.Tensor) and t.dim() >= 2 and self.number(t.shape[-2]) == 1 for t in query_key):
            return node.args, node.kwargs
        if "is_causal" in node.kwargs:
            return node.args, {**node.kwargs, "is_causal": False}
        schema = getattr(node.target, "_schema", None)
        if schema is None:
            return node.args, node.kwargs
        # AOT writes a default or leaves it out depending on the value: spell out every positional argument
        positional = [a for a in schema.arguments if not a.kwarg_only]
        filled = takewhile(lambda a: a.name not in node.kwargs and a.has_default_value(), positional[len(node.args):])
        args = (*node.args, *(a.default_value for a in filled))
        return tuple(False if a.name == "is_causal" else v for a, v in zip(positional, args)), node.kwargs


def first_difference(generic: Canon, other: Canon, width: int = 160) -> str:
    """Where two canonical graphs first differ, for a refusal's reason (``""`` if equal)."""
    if generic.entries == other.entries and generic.outputs != other.outputs:
        return f" in the outputs: generic {str(generic.outputs)[:width]} vs {str(other.outputs)[:width]}"
    for n, (a, b) in enumerate(zip(generic.entries, other.entries)):
        if a != b:
            ra, rb = str(a), str(b)
            at = next((i for i, (x, y) in enumerate(zip(ra, rb)) if x != y), min(len(ra), len(rb)))
            start = max(0, at - width // 2)  # centred on the first differing character
            return f" at node {n} ({ra[:60]}...): generic ...{ra[start:start + width]} vs ...{rb[start:start + width]}"
    if len(generic.entries) != len(other.entries):
        return f": {len(generic.entries)} vs {len(other.entries)} nodes"
    return ""


#: higher-order ops whose argument at this position is passed, item by item, to the placeholders of the branches
#: they name (``cond(pred, true_fn, false_fn, operands)``, ``map_impl(body, xs, pos_args)``): only there is a size
#: operand compared inside the branch (another op's tuples, a block mask's sizes, are compared as they are)
_BRANCH_OPERANDS = {"cond": 3, "map_impl": 2}
#: ATen ops computing the row-major reshape of their input's values, whether they view it or a fresh copy
_RESHAPES = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
#: ATen ops that broadcast their third argument (the values) to the shape they index
_BROADCAST_VALUES = (torch.ops.aten.index_put.default, torch.ops.aten.index_put_.default)


def canonical(gm: torch.fx.GraphModule, rename: Callable[[sympy.Symbol], sympy.Basic],
              relaid: frozenset[int] = frozenset()) -> Canon:
    """``gm`` as :class:`Canon` (``rename`` and ``relaid``: :class:`Canonicalizer`'s).  Kept, in order: tensor
    placeholders and every node whose value holds a tensor or nothing (asserts and other effects are compared, never
    dropped), with op, target, arguments and value metadata (:meth:`Canonicalizer.meta`).  Folded: nodes whose value
    is a number or a tuple of numbers, replaced at each use by that value.  Expressions are expanded (``1*s1`` equals
    ``s1``); a higher-order op's branch is a graph of its own (:meth:`Canonicalizer.constant`).  Raises
    :class:`NotWidened` for what it cannot compare (submodules, tensor constants, unnamed symbols)."""
    return Canonicalizer(rename, relaid).graph(gm)
