"""Keep a user's check when the ShapeEnv replaces a data value by a size.

``torch._check(n == x.size(0))`` with ``n = t.item()`` makes the ShapeEnv *replace* the
unbacked symbol ``u`` of ``n`` by the size's symbol ``s`` (``_maybe_guard_rel``).  The
deferred runtime assert ``Eq(u, s)`` is still recorded, un-replaced, but two later steps
lose the comparison with the value actually produced at runtime (PyTorch issues 141248
and 151127):

* make_fx's ``dedupe_symints`` (run at the end of every make_fx trace, e.g. AOTAutograd's)
  merges SymInt nodes by their *replaced* expression, so the ``_local_scalar_dense`` node
  that reads ``n`` becomes the graph input for ``s``; the assert compares ``s`` with
  itself, and Inductor, which emits ``Eq(u, s)`` at the node that binds ``u``, finds no
  such node any more;
* ``insert_deferred_runtime_asserts`` hash-conses the binding node under its replaced
  expression, so ``Eq(u, s + 1)`` is lowered as ``n == n``.

A bad input (data value != size) then returns a value computed with the size where eager
raises.  verishape owns the runtime asserts of its frames, so it keeps the comparison:

1. :func:`note_replacement` (called by ``VeriShapeEnv._set_replacement``) records
   ``Eq(u, target)`` in terms of the original unbacked symbol whenever a data-dependent
   integer symbol is replaced.  The replacement is stock's own consequence of a runtime
   assert, so asserting it rejects only inputs on which that assert (eager's
   ``torch._check``) fails.
2. :func:`insert_replacement_asserts` adds, right after the node that binds ``u``, an
   ``_assert_scalar(value == target)`` whose target is computed from graph inputs only
   (never from the binding node).  It runs after every stock runtime-assert pass (Dynamo's
   graph, export's final graph), so compile, audit and export artifacts all carry it.
3. :func:`install` wraps ``dedupe_symints`` so that, in graphs of a VeriShapeEnv, nodes
   that carry such a value (or are computed from one) are not merged into an input: the
   AOTAutograd graph keeps the comparison, and Inductor, which emits ``Eq(u, s)`` at the
   node that binds ``u``, finds that node.

Nothing stock checks is weakened: the pass only adds asserts and the dedupe wrapper only
keeps nodes stock would have merged.  Anything the pass cannot lower (a keypath it does
not know, a target with a symbol no graph input provides) is left to stock.
"""

from __future__ import annotations

import functools
import logging
import operator
import threading
import weakref
from collections.abc import Callable
from typing import Any

import sympy
import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import CallMethodKey, ShapeEnv, resolve_unbacked_bindings
from torch.types import py_sym_types
from torch.utils._sympy.symbol import SymT, symbol_is_type

from . import torch_names

log = logging.getLogger("verishape")

#: Replacements that do not come from a check: ``find`` re-resolves an existing one; the
#: renames tie a re-trace's fresh symbol to the one it re-creates; ``eliminate_unbacked``
#: trusts a memoized value (asserting it could reject an input eager accepts).
_NOT_A_CHECK = frozenset({"find", "rename_unbacked_to", "rename_unbacked_to_dest", "eliminate_unbacked"})

#: env -> {original unbacked symbol: its replacement when first replaced}.  Kept outside
#: the env so ShapeEnv's field-by-field comparisons (recorded-event replay) see no change.
_records: weakref.WeakKeyDictionary[ShapeEnv, dict[sympy.Symbol, sympy.Expr]] = weakref.WeakKeyDictionary()
_records_lock = threading.Lock()

ASSERT_PREFIX = "Runtime assertion failed for expression"


def note_replacement(env: ShapeEnv, symbol: sympy.Symbol, target: sympy.Expr, reason: str) -> None:
    """Record ``Eq(symbol, target)`` if ``symbol`` is a data-dependent integer that the
    env has just replaced (stock may decline a replacement; then nothing is recorded)."""
    if reason in _NOT_A_CHECK or not isinstance(symbol, sympy.Symbol):
        return
    if not symbol_is_type(symbol, SymT.UNBACKED_INT) or symbol in getattr(env, "unbacked_inputs", ()):
        return  # an unbacked *input* (mark_unbacked) is bound by the caller, not by data
    if env.replacements.get(symbol) != target:
        return
    with _records_lock:
        record = _records.setdefault(env, {})
        if symbol not in record:  # the first equality is the user's; later ones are refinements of it
            record[symbol] = target
    install()


def replaced_unbacked(env: ShapeEnv) -> dict[sympy.Symbol, sympy.Expr]:
    """The recorded ``{u: target}`` equalities of ``env`` (a copy)."""
    with _records_lock:
        return dict(_records.get(env, {}))


def _origin(env: ShapeEnv, symbol: sympy.Symbol) -> sympy.Symbol:
    """Follow re-trace renamings (AOTAutograd's fresh ``u`` -> the one Dynamo bound)."""
    renamings = getattr(env, "unbacked_renamings", {})
    seen = {symbol}
    while symbol in renamings:
        symbol = renamings[symbol]
        if symbol in seen:
            break
        seen.add(symbol)
    return symbol


# ---------------------------------------------------------------------------- dedupe guard

_install_lock = threading.Lock()
_installed = False

def install() -> None:
    """Hook the two torch steps involved (idempotent).  Both hooks call stock first and
    change nothing for a ShapeEnv without recorded replacements (every stock env).

    * ``insert_deferred_runtime_asserts``: afterwards, :func:`insert_replacement_asserts`;
    * make_fx's ``dedupe_symints`` (imported from its module at each trace): the nodes
      that carry a replaced data value are hidden from it.
    """
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        import importlib

        from torch._inductor.fx_passes import dedupe_symint_uses
        from torch.fx.passes import runtime_assert

        stock_pass = runtime_assert.insert_deferred_runtime_asserts
        wrapped_pass = _with_replacement_asserts(stock_pass)
        for name in torch_names.ASSERT_PASS_MODULES:
            module = importlib.import_module(name)
            if getattr(module, "insert_deferred_runtime_asserts", None) is stock_pass:
                module.insert_deferred_runtime_asserts = wrapped_pass  # type: ignore[attr-defined]
        dedupe_symint_uses.dedupe_symints = _keeping_data_values(dedupe_symint_uses.dedupe_symints)
        _installed = True


def _with_replacement_asserts(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def insert_deferred_runtime_asserts(gm: fx.GraphModule, shape_env: ShapeEnv, *args: Any, **kwargs: Any) -> None:
        original(gm, shape_env, *args, **kwargs)
        insert_replacement_asserts(gm, shape_env)

    return insert_deferred_runtime_asserts


def _keeping_data_values(original: Callable[[fx.Graph], Any]) -> Callable[[fx.Graph], Any]:
    def dedupe_symints(graph: fx.Graph) -> Any:
        """Stock dedupe, with the nodes that carry a replaced data value hidden from it."""
        hidden = [(node, node.meta.pop("val")) for node in _data_value_nodes(graph)]
        try:
            return original(graph)
        finally:
            for node, val in hidden:
                node.meta["val"] = val

    dedupe_symints.__wrapped__ = original  # type: ignore[attr-defined]
    return dedupe_symints


def _data_value_nodes(graph: fx.Graph) -> list[fx.Node]:
    """SymInt/SymBool nodes whose raw expression holds a recorded unbacked symbol, and the
    symbolic nodes computed from them (the comparison an assert reads)."""
    keep: set[fx.Node] = set()
    for node in graph.nodes:
        val = node.meta.get("val")
        if not isinstance(val, py_sym_types) or not val.node.is_symbolic():
            continue
        env = val.node.shape_env
        with _records_lock:
            record = _records.get(env)
        if not record:
            continue
        raw = getattr(val.node, "_expr", None)
        symbols = raw.free_symbols if isinstance(raw, sympy.Basic) else set()
        if any(_origin(env, s) in record for s in symbols) or any(n in keep for n in node.all_input_nodes):
            keep.add(node)
    return [n for n in graph.nodes if n in keep]


# ---------------------------------------------------------------------------- the assert pass

def insert_replacement_asserts(gm: fx.GraphModule, env: ShapeEnv) -> int:
    """After each node that binds a recorded ``u``, assert ``value == target`` with the
    target computed from graph inputs.  Returns the number of asserts added."""
    record = replaced_unbacked(env)
    if not record:
        return 0
    graph = gm.graph
    val_key = _val_key(graph)
    inputs = _InputSymbols(graph, val_key)
    added = 0
    for node in list(graph.nodes):
        bindings = resolve_unbacked_bindings(env, node.meta.get("unbacked_bindings"))
        for symbol, keypath in (bindings or {}).items():
            origin = _origin(env, symbol)
            if origin not in record:
                continue
            target = env.replace(record[origin])  # only the target side: u itself stays
            if _assert_after(graph, node, tuple(keypath), origin, target, inputs, val_key):
                added += 1
    if added:
        graph.lint()
        gm.recompile()
    return added


def _val_key(graph: fx.Graph) -> str:
    for node in graph.nodes:
        if "example_value" in node.meta:
            return "example_value"
        if "val" in node.meta:
            return "val"
    return "val"


class _InputSymbols:
    """Graph nodes for the symbols of graph inputs: SymInt placeholders first, then
    ``sym_size``/``sym_stride`` of tensor placeholders, created where first needed."""

    def __init__(self, graph: fx.Graph, val_key: str) -> None:
        self.graph = graph
        self.val_key = val_key
        self.nodes: dict[sympy.Symbol, fx.Node] = {}
        self.lazy: dict[sympy.Symbol, tuple[Any, fx.Node, int]] = {}
        for ph in graph.find_nodes(op="placeholder"):
            val = ph.meta.get(val_key)
            if isinstance(val, torch.SymInt) and isinstance(val.node.expr, sympy.Symbol):
                self.nodes.setdefault(val.node.expr, ph)
        for ph in graph.find_nodes(op="placeholder"):
            val = ph.meta.get(val_key)
            if isinstance(val, torch.Tensor):
                for op, values in ((torch.ops.aten.sym_size.int, val.size()),
                                   (torch.ops.aten.sym_stride.int, val.stride())):
                    for dim, v in enumerate(values):
                        if isinstance(v, torch.SymInt) and isinstance(v.node.expr, sympy.Symbol):
                            self.lazy.setdefault(v.node.expr, (op, ph, dim))

    def env_for(self, expr: sympy.Basic) -> dict[sympy.Symbol, fx.Node] | None:
        """Nodes for every free symbol of ``expr`` (size reads are created at the current
        insertion point), or None when some symbol is not an input's."""
        if any(s not in self.nodes and s not in self.lazy for s in expr.free_symbols):
            return None
        out = {}
        for s in expr.free_symbols:
            if s in self.nodes:
                out[s] = self.nodes[s]
            else:
                op, ph, dim = self.lazy[s]
                out[s] = self.graph.call_function(op, (ph, dim))
                _fill_meta(out[s], self.val_key)
        return out


def _assert_after(graph: fx.Graph, binder: fx.Node, keypath: tuple[Any, ...], symbol: sympy.Symbol,
                  target: sympy.Expr, inputs: _InputSymbols, val_key: str) -> bool:
    if not _lowerable_keypath(keypath) or not _reifiable(target):
        log.debug("verishape: cannot lower Eq(%s, %s) at %s; stock asserts only", symbol, target, binder)
        return False
    message = f"{ASSERT_PREFIX} Eq({symbol}, {target}) (verishape: the data value must equal its replacement)"
    if _already_asserted(binder, message):
        return False  # a re-trace (export's run_decompositions) carried ours over
    with graph.inserting_before(binder.next):  # right after the binder, in program order
        env = inputs.env_for(target)
        if env is None:
            log.debug("verishape: no graph input provides %s; stock asserts only", target)
            return False
        value = _read_binding(graph, binder, keypath, val_key)
        lowered = _lower(graph, target, env, val_key)
        cond = graph.call_function(operator.eq, (value, lowered))
        _fill_meta(cond, val_key)
        check = graph.call_function(torch.ops.aten._assert_scalar.default, (cond, message))
    # The new nodes belong to the user's line that produced the value.
    node = binder.next
    while node is not check.next:
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in binder.meta and key not in node.meta:
                node.meta[key] = binder.meta[key]
        node = node.next
    return True


def _already_asserted(binder: fx.Node, message: str) -> bool:
    """Whether an assert with ``message`` already reads ``binder``'s value."""
    for user in binder.users:
        reads = [user] + [u for u in user.users if user.target is not operator.eq]
        for cond in reads:
            if cond.target is operator.eq and any(
                    a.target is torch.ops.aten._assert_scalar.default and a.args[1:2] == (message,)
                    for a in cond.users):
                return True
    return False


def _lowerable_keypath(keypath: tuple[Any, ...]) -> bool:
    if not keypath:
        return True
    if (len(keypath) == 2 and isinstance(keypath[0], CallMethodKey) and keypath[0].name in ("size", "stride")
            and isinstance(keypath[1], torch.utils._pytree.SequenceKey)):
        return True
    return len(keypath) == 1 and isinstance(keypath[0], torch.utils._pytree.SequenceKey)


def _reifiable(target: sympy.Expr) -> bool:
    """Integer arithmetic that Python evaluates exactly (the replacements torch makes
    for unbacked symbols: a symbol, a constant, sums and products of them)."""
    return all(isinstance(a, (sympy.Symbol, sympy.Integer, sympy.Add, sympy.Mul))
               for a in sympy.preorder_traversal(target))


def _read_binding(graph: fx.Graph, binder: fx.Node, keypath: tuple[Any, ...], val_key: str) -> fx.Node:
    if not keypath:
        return binder
    if isinstance(keypath[0], CallMethodKey):
        op = torch.ops.aten.sym_size.int if keypath[0].name == "size" else torch.ops.aten.sym_stride.int
        node = graph.call_function(op, (binder, keypath[1].idx))
    else:
        node = graph.call_function(operator.getitem, (binder, keypath[0].idx))
    _fill_meta(node, val_key)
    return node


def _lower(graph: fx.Graph, expr: sympy.Expr, env: dict[sympy.Symbol, fx.Node], val_key: str) -> Any:
    """``expr`` as FX nodes over ``env`` (ints stay ints)."""
    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return env[expr]
    args = [_lower(graph, a, env, val_key) for a in expr.args]
    op = operator.add if isinstance(expr, sympy.Add) else operator.mul
    acc = args[0]
    for a in args[1:]:
        acc = graph.call_function(op, (acc, a))
        _fill_meta(acc, val_key)
    return acc


def _fill_meta(node: fx.Node, val_key: str) -> None:
    """Give a new node the fake value its inputs imply, as Dynamo's own nodes have."""
    args = []
    for a in node.args:
        if isinstance(a, fx.Node):
            if val_key not in a.meta:
                return
            args.append(a.meta[val_key])
        else:
            args.append(a)
    node.meta[val_key] = node.target(*args)  # type: ignore[operator]
