"""Trace a copy of a frame at a narrowed size, inside the compile of the frame itself.

The proof step of :mod:`verishape.compiler.widen`: a *copy* of the frame's code object (so
Dynamo's cache for the user's code is untouched) is compiled with ``fullgraph=True`` and a
capturing backend, its inputs narrowed to the excluded size and the generic compile's other
dynamic dimensions still dynamic.  The backend records the Dynamo graph and replays the
user's backend's AOTAutograd call with recording compilers, in canonical form
(:mod:`verishape.compiler.canon`); nothing is lowered and the graph never runs.  How the
nested trace's symbols are named is the caller's choice (``make_rename``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import types
from collections.abc import Callable, Iterator
from typing import Any

import sympy
import torch

from .canon import Canon, NotWidened, canonical


class _Stop(Exception):
    """Raised by the captured size-1 graph instead of running it."""


@dataclasses.dataclass
class _Capture:
    aot_kwargs: dict[str, Any] | None
    #: the nested trace's ShapeEnv -> the renaming of its symbols to the generic names
    make_rename: Callable[[Any], Callable[[sympy.Symbol], sympy.Basic]] | None = None
    code: types.CodeType | None = None
    #: the generic Dynamo graph: when the size-1 one differs, AOTAutograd is not run
    expect_dynamo: Canon | None = None
    output_graph: Any = None
    dynamo_gm: Any = None
    aot_gm: Any = None
    graphs: int = 0
    error: str | None = None


def _capturing_backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
    from torch._dynamo.symbolic_convert import InstructionTranslator

    cap = _capture.get()
    assert cap is not None
    cap.graphs += 1
    tx = InstructionTranslator.current_tx()
    if tx.f_code is not cap.code:
        cap.error = "the size-1 trace compiled another frame"
        return _raise_stop
    if cap.graphs == 1:
        cap.output_graph = tx.output
        # canonical now: Dynamo drops graph metadata once the compile is done
        assert cap.make_rename is not None
        rename = cap.make_rename(cap.output_graph.shape_env)
        try:
            cap.dynamo_gm = canonical(gm, rename)
        except NotWidened as exc:
            cap.error = str(exc)
            return _raise_stop
        if cap.expect_dynamo is not None and cap.dynamo_gm != cap.expect_dynamo:
            return _raise_stop  # refused by the caller; the AOT trace would be wasted work
        if cap.aot_kwargs is not None:
            from torch._functorch.aot_autograd import aot_module_simplified

            def keep(fw: torch.fx.GraphModule, inputs: Any, *a: Any, **k: Any) -> Any:
                try:
                    cap.aot_gm = canonical(fw, rename)
                except NotWidened as exc:
                    cap.error = str(exc)
                return _raise_stop

            def training(fw: torch.fx.GraphModule, inputs: Any, *a: Any, **k: Any) -> Any:
                cap.error = "the size-1 trace needs autograd (training graph)"
                return _raise_stop

            aot_module_simplified(gm, example_inputs, fw_compiler=training, bw_compiler=training,
                                  inference_compiler=keep, **cap.aot_kwargs)
    return _raise_stop


def _raise_stop(*args: Any, **kwargs: Any) -> Any:
    raise _Stop()


def _resolve(source: Any, f_locals: dict[str, Any]) -> Any:
    """The object ``source`` names among the frame's locals (locals, items and
    attributes only)."""
    from torch._dynamo.source import (
        AttrSource,
        ConstDictKeySource,
        DictGetItemSource,
        GetItemSource,
        LocalSource,
    )

    if isinstance(source, LocalSource):
        return f_locals[source.local_name]
    if isinstance(source, GetItemSource) and not source.index_is_slice:
        return _resolve(source.base, f_locals)[source.index]
    if isinstance(source, DictGetItemSource) and type(source) is DictGetItemSource:
        # ``**kwargs`` of a module's forward: L['kwargs']['input_ids']
        mapping = _resolve(source.base, f_locals)
        if type(mapping) is not dict:
            raise NotWidened(f"input {source.name} is an item of a {type(mapping).__name__}, not of a dict")
        key = source.index
        if isinstance(key, ConstDictKeySource):
            key = list(mapping)[key.index]
        return mapping[key]
    if isinstance(source, AttrSource):
        return getattr(_resolve(source.base, f_locals), source.member)
    raise NotWidened(f"input {source.name} is not a local, item or attribute")


def _rebuild(value: Any, swap: dict[int, Any], depth: int = 0) -> Any:
    if isinstance(value, torch.Tensor):
        return swap.get(id(value), value)
    if depth > 4:
        return value
    if isinstance(value, list):
        return [_rebuild(v, swap, depth + 1) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(_rebuild(v, swap, depth + 1) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: _rebuild(v, swap, depth + 1) for k, v in value.items()}
    return value


def _call_arguments(code: types.CodeType, f_locals: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    names = code.co_varnames
    n = code.co_argcount
    args = [f_locals[name] for name in names[:n]]
    kwargs = {name: f_locals[name] for name in names[n:n + code.co_kwonlyargcount]}
    at = n + code.co_kwonlyargcount
    if code.co_flags & 0x04:  # *args
        args += list(f_locals[names[at]])
        at += 1
    if code.co_flags & 0x08:  # **kwargs
        kwargs.update(f_locals[names[at]])
    return args, kwargs


def trace_at(tx: Any, narrowed: list[Any], value: int, aot_kwargs: dict[str, Any] | None,
             dynamic: bool | None,
             make_rename: Callable[[Any], Callable[[sympy.Symbol], sympy.Basic]],
             expect_dynamo: Canon | None = None) -> _Capture:
    """Trace a copy of ``tx``'s frame with every input dimension in ``narrowed`` (size
    sources) set to ``value`` (narrowed copies of those inputs; other tensors are detached
    aliases, so the user's objects are not marked), the generic compile's other dynamic
    dimensions dynamic.  Returns the capture; the graph is never run."""
    code = tx.f_code
    closure = tuple(tx.closure) if code.co_freevars and tx.closure is not None else None
    if code.co_freevars and (closure is None or len(closure) != len(code.co_freevars)):
        raise NotWidened("the frame's closure is not available")
    if code.co_flags & 0x20 or code.co_flags & 0x80 or code.co_flags & 0x200:
        raise NotWidened("the frame is a generator or coroutine")
    f_locals = dict(tx.f_locals)
    dims: dict[int, tuple[torch.Tensor, set[int]]] = {}
    for source in narrowed:
        t = _resolve(source.base, f_locals)
        if not isinstance(t, torch.Tensor):
            raise NotWidened(f"input {source.base.name} is not a tensor")
        dims.setdefault(id(t), (t, set()))[1].add(source.idx)
    dynamic_dims = _dynamic_dims(tx.output)
    swap: dict[int, Any] = {}
    for key, (t, ds) in dims.items():
        if t.requires_grad and torch.is_grad_enabled():
            raise NotWidened("an input requires grad (training graph)")
        new = t.detach()
        for d in ds:
            new = new.narrow(d, 0, value)
        # a contiguous input keeps contiguous strides: narrowing two dims of a (2, 4) tensor
        # to (1, 1) keeps stride 4, which Dynamo would make a symbol of its own
        fmt = torch.contiguous_format if t.is_contiguous() else torch.preserve_format
        swap[key] = new.clone(memory_format=fmt)
    for v in f_locals.values():
        for t in _tensors(v):
            if id(t) not in swap and not isinstance(t, torch.nn.Parameter):
                swap[id(t)] = t.detach()
    for key, t in swap.items():
        for d in dynamic_dims.get(key, ()):
            if d < t.dim() and t.shape[d] != value:
                torch._dynamo.maybe_mark_dynamic(t, d)
    new_locals = {k: _rebuild(v, swap) for k, v in f_locals.items()}
    for source in narrowed:
        if _resolve(source.base, new_locals).shape[source.idx] != value:
            raise NotWidened(f"input {source.base.name} could not be narrowed (not reachable from the arguments)")
    args, kwargs = _call_arguments(code, new_locals)
    fn = types.FunctionType(code.replace(), tx.f_globals, code.co_name, None, closure)
    cap = _Capture(aot_kwargs, make_rename, fn.__code__, expect_dynamo)
    token = _capture.set(cap)
    try:
        # fullgraph: a graph break must not run part of the frame eagerly at size 1
        compiled = torch.compile(fn, backend=_capturing_backend, dynamic=dynamic, fullgraph=True)
        with torch._dynamo.config.patch(recompile_limit=8):
            compiled(*args, **kwargs)
    except _Stop:
        pass
    except torch._dynamo.exc.Unsupported as exc:
        raise NotWidened(f"the size-1 trace breaks the graph ({str(exc).splitlines()[0][:120]})") from None
    finally:
        _capture.reset(token)
    if cap.output_graph is None:
        raise NotWidened("the size-1 trace produced no graph")
    return cap


def _tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth <= 4 and isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v, depth + 1)
    elif depth <= 4 and isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, depth + 1)


def _dynamic_dims(output_graph: Any) -> dict[int, list[int]]:
    """id(real input tensor) -> its dimensions that were symbolic in the generic trace."""
    out: dict[int, list[int]] = {}
    for tf in output_graph.tracked_fakes:
        fake = tf.fake
        if not isinstance(fake, torch.Tensor):
            continue
        try:
            real = _resolve(tf.source, output_graph.root_tx.f_locals)
        except (NotWidened, KeyError, IndexError, AttributeError, TypeError):
            continue
        out[id(real)] = [d for d, n in enumerate(fake.shape) if not isinstance(n, int) and n.node.maybe_as_int() is None]
    return out


_capture: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar("verishape_widen_capture", default=None)


def tracing_at_excluded_size() -> bool:
    """Whether the current Dynamo trace is this module's trace of a frame copy at the
    excluded size (a proof step, not a compile of the user's code: the audit skips it)."""
    return _capture.get() is not None
