"""The input layout of each compile of a frame: which tensors its call brought, by path (:func:`walk`), recorded by
frame compile id (Note [A frame's inputs that vary earn the generic policy]).  Read by generic_recompile and candidate,
so it imports neither.
"""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Any

import torch
from torch._guards import CompileContext

#: how deep :func:`walk` looks into the frame's arguments (a dict of keyword
#: arguments, a cache object, its list of layers, a layer, a tensor), and how many objects
_DEPTH, _OBJECTS = 5, 2000


def walk(f_locals: dict[str, Any]) -> tuple[frozenset[int], frozenset[tuple[Any, ...]]]:
    """The sizes (>= 2) that two or more distinct input tensors share, those reachable from the frame's arguments
    through dicts, lists, tuples and plain objects' attributes, never into an ``nn.Module`` (its parameters and buffers
    stay static anyway); and the call's *layout of inputs*: each input tensor's path from the arguments (keys, indices,
    attribute names) with its rank."""
    counts: Counter[int] = Counter()
    layout: set[tuple[Any, ...]] = set()
    seen: set[int] = set()
    stack: list[tuple[Any, tuple[Any, ...]]] = [(v, (k,)) for k, v in f_locals.items()]
    while stack and len(seen) < _OBJECTS:
        value, path = stack.pop()
        if id(value) in seen or isinstance(value, (torch.nn.Module, type, str, bytes, int, float, bool)):
            continue
        seen.add(id(value))
        if isinstance(value, torch.Tensor):
            counts.update({n for n in value.shape if isinstance(n, int) and n >= 2})
            layout.add((*path, value.dim()))
            continue
        if len(path) > _DEPTH:
            continue
        if isinstance(value, dict):
            children = [(k if isinstance(k, (str, int)) else type(k).__name__, v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            children = list(enumerate(value))
        else:
            children = list(getattr(value, "__dict__", {}).items())
        stack.extend((c, (*path, k)) for k, c in children)
    return frozenset(n for n, c in counts.items() if c >= 2), frozenset(layout)


#: the input layouts of each code's compiles this Dynamo session, by frame compile id
#: (id 0 starts again after a reset of Dynamo, and clears what was there)
_layouts: weakref.WeakKeyDictionary[Any, dict[int, frozenset[tuple[Any, ...]]]] = weakref.WeakKeyDictionary()


def frame_compile_id() -> int | None:
    """The frame compile id of the compile under way (0: the frame's first, again after a Dynamo reset; None: none)."""
    n = getattr(CompileContext.current_compile_id(), "frame_compile_id", None)
    return n if isinstance(n, int) else None


def inputs_vary(code: Any, layout: frozenset[tuple[Any, ...]]) -> bool:
    """Records this compile's input layout for ``code``; whether the frame's compiles so far, this one
    included, have brought more than one (Note [A frame's inputs that vary earn the generic policy])."""
    n = frame_compile_id()
    if n is None:
        return True
    seen = _layouts.setdefault(code, {})
    if n == 0:
        seen.clear()
    seen[n] = layout
    return any(i not in seen for i in range(n)) or len({seen[i] for i in range(n + 1)}) > 1


def _paths(layout: frozenset[tuple[Any, ...]]) -> frozenset[tuple[Any, ...]]:
    """A layout's input tensors by path (their ranks left out)."""
    return frozenset(path[:-1] for path in layout)


def other_tensors_than_all(code: Any, compile_ids: list[Any], f_locals: dict[str, Any] | None = None) -> bool:
    """This call reaches its input tensors by other paths than every compile in ``compile_ids`` did
    (as :func:`inputs_vary` recorded): their graphs take other inputs, no proof serves this call
    from them.  The call's layout: the compile under way's as recorded, or read off ``f_locals``
    where given.  False where a layout was not recorded."""
    seen = _layouts.get(code, {})
    ids = [getattr(c, "frame_compile_id", None) for c in compile_ids]
    if not ids or any(i not in seen for i in ids):
        return False
    now = seen.get(frame_compile_id()) if f_locals is None else walk(f_locals)[1]
    return now is not None and all(_paths(seen[i]) != _paths(now) for i in ids)


def new_tensors(code: Any) -> bool:
    """The compile under way reaches input tensors by other paths than every earlier compile of the frame
    did (a first decode step): a candidate there would be refused (``candidate.other_inputs``), so none is
    traced.  False where this compile's layout or every earlier one was not recorded."""
    seen, n = _layouts.get(code, {}), frame_compile_id()
    earlier = [_paths(seen[i]) for i in range(n or 0) if i in seen]
    return n in seen and bool(earlier) and _paths(seen[n]) not in earlier
