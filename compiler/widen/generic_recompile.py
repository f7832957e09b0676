"""A frame compiled again is compiled generic: every size of its input tensors dynamic.

Automatic dynamic (``dynamic=None``) compiles a frame static first and, on each recompile,
makes dynamic only the sizes that changed since the compiles before.  A served decoder
shows why that costs compiles: the first decode step's KV cache is a new input (static at
its first length), the batch has not changed yet when the cache length does, and a batch of
1 then arrives before anything is generic in the batch; each size that changes later is one
more compile, and Dynamo's recompile limit (8) is reached within a handful of requests.

Here a frame's *second and later* compiles (``frame_compile_id > 0``: the frame has been
called with inputs its first artifact does not take) give every size of every input tensor
a symbol (``DimDynamic.DYNAMIC``, Dynamo's own automatic-dynamic kind: no duck sizing, and
a size the trace pins, such as a head dimension fixed by the weights, is specialized back by
the trace with a guard, as ``maybe_mark_dynamic`` allows).  Sizes of 1 stay specialized
(0/1 specialization); the widening proofs (:mod:`verishape.compiler.widen.reuse`) then run
the generic artifact at 1, and in another layout, instead of compiling again.

What is left alone: the first compile (static, as stock); tensors Dynamo keeps static
(parameters and buffers, ``dynamic=False``, ``torch._dynamo.mark_static``); a frame of a
backend other than verishape's, or with widening off; sizes already dynamic or unbacked.
Nothing here decides what an artifact computes: Dynamo traces and guards the symbols as it
does with ``mark_dynamic``, so this is a compile policy, not a soundness question.  Its
cost: a frame recompiled for a reason other than a size (a global, a flag) gets generic
kernels where stock would keep static ones.  ``generic_recompiles=False`` keeps stock's
policy.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

from verishape.core import torch_seam

log = logging.getLogger("verishape")

#: where Dynamo decides, per input tensor, which sizes get a symbol
CONTEXT = ("torch._dynamo.variables.builder", "_automatic_dynamic")

_lock = threading.Lock()
_installed = False


def install() -> None:
    """Wrap Dynamo's per-tensor decision (idempotent).  A torch without it keeps stock's
    policy, said once as a warning."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    import torch._dynamo.variables.builder  # noqa: F401 - the module the decision lives in

    if torch_seam.wrap(*CONTEXT, _generic_on_recompile) is None:
        log.warning("verishape: this torch has no %s.%s: recompiles make only the sizes that changed "
                    "dynamic, as stock does", *CONTEXT)


def wants_generic(compiler_fn: Any, depth: int = 8) -> bool:
    """The frame's backend (Dynamo's wrappers walked down) is a verishape backend with
    generic recompiles on."""
    fn = compiler_fn
    for _ in range(depth):
        if fn is None:
            return False
        if hasattr(fn, "generic_recompiles"):
            return bool(fn.generic_recompiles)
        fn = getattr(fn, "__wrapped__", None) or getattr(fn, "compiler_fn", None)
    return False


def is_recompile() -> bool:
    """The compile under way is not its frame's first (``frame_compile_id > 0``)."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    return bool(compile_id is not None and getattr(compile_id, "frame_compile_id", None))


def generic_sizes(context: Any, tensor: Any) -> Any:
    """``context`` with every static size of ``tensor`` made dynamic, except the sizes
    ``torch._dynamo.mark_static`` pinned; the same object when nothing changes."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    sizes = getattr(context, "dynamic_sizes", None)
    if sizes is None:
        return context
    pinned = getattr(tensor, "_dynamo_static_indices", ())
    chosen = [DimDynamic.DYNAMIC if d is DimDynamic.STATIC and i not in pinned else d for i, d in enumerate(sizes)]
    if chosen == list(sizes):
        return context
    return dataclasses.replace(context, dynamic_sizes=chosen)


def _generic_on_recompile(original: Any) -> Any:
    from torch._dynamo import config

    def _automatic_dynamic(e: Any, tx: Any, source: Any, static_shapes: bool, *args: Any, **kwargs: Any) -> Any:
        context = original(e, tx, source, static_shapes, *args, **kwargs)
        if (static_shapes or not config.automatic_dynamic_shapes or config.assume_static_by_default is False
                or not wants_generic(getattr(tx.output, "compiler_fn", None)) or not is_recompile()):
            return context
        return generic_sizes(context, e)

    _automatic_dynamic._verishape_original = original  # type: ignore[attr-defined]
    return _automatic_dynamic
