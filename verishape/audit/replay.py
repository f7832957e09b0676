"""Replay a counterexample: eager against the audited artifact, with its guards skipped.

This is what a deployment that drops guard evaluation would run at that input.  The
artifact is the cache entry Dynamo made for the audited compile (:class:`~.frame.Artifact`):
its transformed bytecode is called as a plain function, so the audited graph runs with no
guard check, no recompilation and no change to Dynamo's cache.  Replays are therefore
isolated from each other and from the script's own compiles: any order gives the same
outcomes, and no recompile limit can turn a replay into an eager run.  Each compiled
graph the bytecode calls is wrapped to count its calls; a replay that did not reach the
audited graph is ``not_replayed``, never ``agree``.

The eager reference runs the frame's original bytecode on the same inputs.  Inputs are
rebuilt at the counterexample's sizes from the frame's real locals (same dtype, device
and ``requires_grad``, fresh values from a fixed seed; inputs the counterexample does not
resize are cloned), once for each side, so an in-place update on one side cannot reach
the other.  No tensor may exceed ``MAX_NUMEL`` elements.
"""

from __future__ import annotations

import inspect
import math
import types
from collections.abc import Callable
from typing import Any

import torch

from .frame import Frame
from .space import Key, parse_path_source

MAX_NUMEL = 1 << 20

#: Code flags of frames that cannot be replayed as a plain call.
_NOT_PLAIN_CALLS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


class NotReplayable(Exception):
    """The replay cannot run the audited artifact at this input; the message says why."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _same(a: Any, b: Any, depth: int = 0) -> bool:
    """Equal outputs: tensors close, containers element by element, and other objects of
    one type by their attributes (a model's key/value cache holds the tensors to compare;
    its ``==`` is identity), a few levels deep."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (a.shape == b.shape and a.dtype == b.dtype
                and torch.allclose(a.detach(), b.detach(), equal_nan=True, atol=1e-5, rtol=1e-4))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], depth + 1) for k in a)
    try:
        if a is b or bool(a == b):
            return True
    except (RuntimeError, TypeError, ValueError):  # an ``==`` that compares tensors inside
        pass
    if type(a) is type(b) and depth < 6 and hasattr(a, "__dict__") and not isinstance(a, (type, types.ModuleType)):
        return _same(vars(a), vars(b), depth + 1)
    return False


# ---------------------------------------------------------------- inputs


#: Sizes to set on one argument: path to a tensor inside it (``()`` for the argument
#: itself) -> {dimension: size}.
Sizes = dict[tuple[Key, ...], dict[int, int]]


def _sizes_by_input(cex: dict[str, int | float], names: set[str]) -> dict[str, Sizes]:
    """``{"L['kwargs']['ids'].size()[0]": 5}`` -> ``{"kwargs": {("ids",): {0: 5}}}``; a
    source we cannot set is refused."""
    out: dict[str, Sizes] = {}
    for src, value in cex.items():
        parsed = parse_path_source(src)
        if parsed is None:
            if "L[" not in src:
                raise NotReplayable(f"{src} comes from tensor data, not from an input size")
            raise NotReplayable(f"cannot rebuild an input with {src} = {value} (only sizes of tensor arguments)")
        name, path, dim = parsed
        if name not in names:
            raise NotReplayable(f"input {name!r} of {src} was not captured")
        out.setdefault(name, {}).setdefault(path, {})[dim] = int(value)
    return out


def _fresh_tensor(value: torch.Tensor, shape: list[int], gen: torch.Generator) -> torch.Tensor:
    """New values of ``value``'s dtype at ``shape``.  Integer and boolean inputs are drawn
    from the range the captured tensor spans (token ids stay inside the vocabulary, a 0/1
    mask stays 0/1), so the replay exercises the program, not an out-of-range index."""
    if value.dtype.is_floating_point or value.dtype.is_complex:
        out = torch.randn(shape, generator=gen, dtype=value.dtype).to(value.device)
        return out.requires_grad_(value.requires_grad)
    if value.dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool().to(value.device)
    low, high = 0, 10
    if value.numel() and not value.is_meta:
        low, high = int(value.min()), int(value.max()) + 1
    return torch.randint(low, high, shape, generator=gen, dtype=value.dtype).to(value.device)


def _rebuild(value: Any, name: str, sizes: Sizes, gen: torch.Generator) -> Any:
    """A fresh copy of one input: resized and refilled where the counterexample says,
    otherwise a clone (so a side's in-place update stays on that side).  Containers (a
    ``**kwargs`` dict, an ``*args`` tuple, a list) are rebuilt element by element."""
    if type(value) in (dict, list, tuple):  # a subclass (a named tuple, ...) is passed as it is
        if sizes.get(()):
            raise NotReplayable(f"input {name!r} is a {type(value).__name__}, not a tensor")
        keys = list(value.keys()) if isinstance(value, dict) else list(range(len(value)))
        missing = sorted({str(p[0]) for p in sizes if p and p[0] not in keys})
        if missing:
            raise NotReplayable(f"input {name!r} has no element {', '.join(missing)}")
        items = [_rebuild(value[k], f"{name}[{k!r}]", {p[1:]: d for p, d in sizes.items() if p and p[0] == k}, gen)
                 for k in keys]
        if isinstance(value, dict):
            return dict(zip(keys, items))
        return tuple(items) if isinstance(value, tuple) else items
    own = sizes.get((), {})
    if not isinstance(value, torch.Tensor):
        if any(sizes.values()):
            raise NotReplayable(f"input {name!r} is a {type(value).__name__}, not a tensor or a dict, list "
                                "or tuple of tensors")
        return value
    shape = list(value.shape)
    for dim, size in own.items():
        if dim >= len(shape):
            raise NotReplayable(f"input {name!r} has no dimension {dim}")
        shape[dim] = size
    if not own:
        return value.detach().clone().requires_grad_(value.requires_grad)
    if any(d < 0 for d in shape):
        raise NotReplayable(f"negative size {shape} for input {name!r}")
    if math.prod(shape) > MAX_NUMEL:
        raise NotReplayable(f"{name} would have {math.prod(shape)} elements (cap {MAX_NUMEL})")
    return _fresh_tensor(value, shape, gen)


class _Call:
    """How to call a frame's code with its captured locals: positional, keyword-only,
    ``*args`` and ``**kwargs`` parameters, and the closure cells of its free variables."""

    def __init__(self, frame: Frame) -> None:
        code = frame.code
        if code.co_flags & _NOT_PLAIN_CALLS:
            raise NotReplayable(f"{code.co_name} is a generator or coroutine")
        n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
        self.positional = list(code.co_varnames[:n_pos])
        self.keyword = list(code.co_varnames[n_pos:n_pos + n_kw])
        extra = n_pos + n_kw
        self.star = code.co_varnames[extra] if code.co_flags & inspect.CO_VARARGS else None
        extra += bool(self.star)
        self.star_star = code.co_varnames[extra] if code.co_flags & inspect.CO_VARKEYWORDS else None
        self.names = [*self.positional, *self.keyword, *filter(None, (self.star, self.star_star))]
        missing = [n for n in [*self.names, *code.co_freevars] if n not in frame.local_scope]
        if missing:
            raise NotReplayable(f"{', '.join(missing)} of {code.co_name} not captured")
        self.frame = frame

    def function(self, code: types.CodeType, globals_: dict[str, Any]) -> Callable[..., Any]:
        cells = tuple(types.CellType(self.frame.local_scope[n]) for n in code.co_freevars)
        return types.FunctionType(code, globals_, code.co_name, None, cells or None)

    def inputs(self, cex: dict[str, int | float]) -> tuple[list[Any], dict[str, Any]]:
        """Fresh inputs at the counterexample, the same values at every call (fixed seed)."""
        scope = self.frame.local_scope
        sizes = _sizes_by_input(cex, set(self.names))
        gen = torch.Generator().manual_seed(0)
        value = {n: _rebuild(scope[n], n, sizes.get(n, {}), gen) for n in self.names}
        args = [value[n] for n in self.positional] + (list(value[self.star]) if self.star else [])
        kwargs = {n: value[n] for n in self.keyword}
        if self.star_star:
            kwargs.update(value[self.star_star])
        return args, kwargs

    def shapes(self, args: list[Any], kwargs: dict[str, Any]) -> dict[str, list[int]]:
        """The shape of every tensor input, also inside ``*args``/``**kwargs``
        (``kwargs['input_ids']``), as the replay built it."""
        values: dict[str, Any] = dict(zip(self.positional, args)) | {n: kwargs[n] for n in self.keyword}
        if self.star:
            values[self.star] = tuple(args[len(self.positional):])
        if self.star_star:
            values[self.star_star] = {k: v for k, v in kwargs.items() if k not in self.keyword}
        out: dict[str, list[int]] = {}

        def walk(label: str, v: Any) -> None:
            if isinstance(v, torch.Tensor):
                out[label] = list(v.shape)
            elif isinstance(v, dict):
                for k, item in v.items():
                    walk(f"{label}[{k!r}]", item)
            elif isinstance(v, (list, tuple)):
                for i, item in enumerate(v):
                    walk(f"{label}[{i}]", item)

        for n, v in values.items():
            walk(n, v)
        return out


def _counting(graph: Callable[..., Any], calls: list[int]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return graph(*args, **kwargs)

    return counted


# ---------------------------------------------------------------- the replay


def _run(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, str | None]:
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - what either side raises is its reported behaviour
        return None, _one_line(exc)


def replay(frame: Frame, cex: dict[str, int | float] | None) -> dict[str, Any]:
    """Run eager and the audited graph at ``cex``; the outcome says how they compare."""
    if not cex:
        return {"outcome": "not_replayed", "reason": "no counterexample"}
    artifact = frame.artifact
    if frame.error:
        return {"outcome": "not_replayed", "reason": "the frame has no compiled artifact"}
    if artifact is None:
        return {"outcome": "not_replayed",
                "reason": f"Dynamo's cache no longer holds compile {frame.compile_id} of {frame.name} "
                          "(the script reset the cache?): the audited artifact cannot be run"}
    if not artifact.graphs:
        return {"outcome": "not_replayed", "reason": "the frame compiled to no graph"}
    try:
        call = _Call(frame)
        eager_inputs = call.inputs(cex)
        compiled_inputs = call.inputs(cex)
    except NotReplayable as exc:
        return {"outcome": "not_replayed", "reason": str(exc)}
    scope = frame.global_scope if frame.global_scope is not None else {}
    want, eager_error = _run(call.function(frame.code, scope), *eager_inputs)
    # The artifact's globals are the frame's, with each compiled graph counted.
    calls = [0]
    namespace = dict(scope) | {n: _counting(g, calls) for n, g in artifact.graphs.items()}
    got, compiled_error = _run(call.function(artifact.code, namespace), *compiled_inputs)
    out: dict[str, Any] = {"mode": "cache_entry", "compile_id": str(frame.compile_id),
                           "inputs": call.shapes(*eager_inputs), "graph_calls": calls[0],
                           "eager_error": eager_error, "compiled_error": compiled_error}
    if calls[0] == 0:
        out["outcome"] = "not_replayed"
        out["reason"] = "the audited graph was not reached" + (f" ({compiled_error})" if compiled_error else "")
    elif eager_error and compiled_error:
        out["outcome"] = "both_fail"
    elif eager_error:
        out["outcome"] = "compiled_accepts_what_eager_rejects"
    elif compiled_error:
        out["outcome"] = "compiled_fails"
    else:
        out["outcome"] = "agree" if _same(got, want) else "differ"
    return out
