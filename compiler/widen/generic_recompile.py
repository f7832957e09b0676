"""A frame compiled again is compiled generic in the sizes its input tensors share (why, what is left alone and at
what cost: docs/compile.md, "A frame compiled again is compiled generic in the sizes its inputs share").  From a
frame's second compile on, once its calls have brought more than one layout of inputs
(Note [A frame's inputs that vary earn the generic policy]), every size (>= 2) two or more of its input tensors
share gets a symbol of Dynamo's automatic-dynamic kind, and so does an int argument beside them
(:func:`_int_gets_symbol`).  A call headed for a reuse at 1 (:func:`arrives_at_one`) takes stock's choices; a frame
whose arrivals at 1 keep being refused (:data:`FRUITLESS_ARRIVALS`) stops.  A compile policy, not a soundness
question: Dynamo traces and guards the symbols as with ``mark_dynamic``.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch._dynamo import config
from torch._dynamo.source import LocalSource
from torch._dynamo.utils import counters
from torch._guards import CompileContext, TracingContext
from torch.fx.experimental.symbolic_shapes import DimDynamic

from verishape.compiler import declared as declared_sizes
from verishape.compiler import frames
from verishape.core import torch_names, torch_seam

from . import candidate, input_layouts
from .kept import Kept, alive
from .sizes import bound_sources

if TYPE_CHECKING:
    from .traces import Trace


def install() -> None:
    """Wrap Dynamo's per-tensor decision and its wrapping of ints (idempotent; a torch without them keeps stock's)."""
    torch_seam.wrap_once(torch_names.AUTOMATIC_DYNAMIC, _generic_on_recompile, "recompiles make only the sizes that "
                         "changed dynamic, as stock does")
    torch_seam.wrap_once(torch_names.WRAP_INT, _generic_int_on_recompile, "recompiles make only the ints that changed "
                         "dynamic, as stock does")
    candidate.install()


def wants_generic(compiler_fn: Any) -> bool:
    """The frame's backend is a verishape backend with generic recompiles on: a ``VerishapeBackend`` says so itself;
    the named backend (``backend="verishape"``) from the ``mode`` and ``options`` torch's wrapper holds for it."""
    fn, held = frames.verishape_backend(compiler_fn)
    wanted = getattr(fn, "generic_recompiles", False)
    return bool(wanted(held) if callable(wanted) else wanted)


def declared_of(tx: Trace) -> declared_sizes.Declared | None:
    """The sizes the frame's backend declares (``shapes_spec``, :mod:`verishape.compiler.declared`), or None."""
    return declared_sizes.of_backend(getattr(tx.output, "compiler_fn", None))


def is_recompile() -> bool:
    """The compile under way is not its frame's first (``frame_compile_id > 0``)."""
    return bool(input_layouts.frame_compile_id())


class _Call(NamedTuple):
    """What the compile under way reads off its call's arguments, once per trace (:func:`_call_of`)."""

    shared: frozenset[int]  # the sizes it makes symbols of
    other_tensors: bool  # the call reaches input tensors no earlier compile of the frame did


#: the compile under way's :class:`_Call`, computed once per Dynamo output graph (held
#: weakly: an output graph is neither hashable nor kept alive by this)
_last: tuple[Any, _Call] = (lambda: None, _Call(frozenset(), False))


#: arrivals at 1 in a row every kept compile of a frame refused before its recompiles take stock's
#: choices: the first is traced again with the generic policy, a second says its generic compiles do not pay
FRUITLESS_ARRIVALS = 2
#: per frame (its code): the arrivals at 1 every kept compile refused since its last reuse
_refused_arrivals: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def reused(tx: Trace) -> None:
    """A kept compile of the frame served this call: its generic compiles pay."""
    _refused_arrivals.pop(getattr(tx.output, "root_tx", tx).f_code, None)


def _fruitless(code: Any) -> bool:
    """The frame's arrivals at 1 were refused :data:`FRUITLESS_ARRIVALS` times in a row."""
    return _refused_arrivals.get(code, 0) >= FRUITLESS_ARRIVALS


#: on the compile's own context (kept across its attempts): "attempt" while an attempt
#: takes stock's choices for a reuse at 1 (:func:`arrives_at_one`), "refused" once every
#: reuse refused it (the next attempt takes the generic policy, :func:`retrace_after_refusal`)
_ARRIVAL = "_verishape_arrival"


def _call_of(tx: Trace) -> _Call:
    """The compile under way's :class:`_Call` (its shared sizes where the generic policy applies, else
    none).  Asked on the frame's first compile too, which records its input layout
    (Note [A frame's inputs that vary earn the generic policy])."""
    global _last
    ref, call = _last
    if ref() is tx.output:
        return call
    root = getattr(tx.output, "root_tx", tx)
    f_locals = getattr(root, "f_locals", {}) or {}
    shared, layout = input_layouts.walk(f_locals)
    vary = input_layouts.inputs_vary(root.f_code, layout)
    if not is_recompile():  # a frame's first compile (again, after a reset): nothing refused yet
        _refused_arrivals.pop(root.f_code, None)
    raising = bool(candidate.raising())
    found = frozenset()
    # a candidate at 2 is traced as the frame's later compiles will be, so that they
    # are proved against it (Note [A declared size at 1 is compiled at 2])
    if raising or (is_recompile() and vary and not _fruitless(root.f_code)):
        ctx = CompileContext.try_get()
        if (ctx is not None and getattr(ctx, _ARRIVAL, None) != "refused" and not raising
                and arrives_at_one(root.f_code, call_arguments(tx))):
            setattr(ctx, _ARRIVAL, "attempt")
        else:
            found = shared
    call = _Call(found, input_layouts.new_tensors(root.f_code))
    _last = (weakref.ref(tx.output), call)
    return call


def retrace_after_refusal(tx: Trace) -> str | None:
    """Every reuse refused an attempt that took stock's choices for a reuse at 1: why the frame is to be
    traced again with the generic policy (the caller restarts Dynamo's analysis), so that what compiles is
    as generic as it would have been; None where the attempt was no such attempt, the policy would give no
    symbol anyway, or this refusal makes the frame's arrivals fruitless (:data:`FRUITLESS_ARRIVALS`).
    Counted: ``counters["verishape"]["arrivals_retraced"]``, ``["generic_policy_stopped"]``."""
    ctx = CompileContext.try_get()
    if ctx is None or getattr(ctx, _ARRIVAL, None) != "attempt":
        return None
    setattr(ctx, _ARRIVAL, "refused")
    root = getattr(tx.output, "root_tx", tx)
    _refused_arrivals[root.f_code] = _refused_arrivals.get(root.f_code, 0) + 1
    if _fruitless(root.f_code):
        counters["verishape"]["generic_policy_stopped"] += 1
        return None  # its generic compiles do not pay: this trace, stock's, compiles
    if not input_layouts.walk(getattr(root, "f_locals", {}) or {})[0]:  # no size its input tensors share
        return None
    counters["verishape"]["arrivals_retraced"] += 1
    return "every reuse at 1 refused the trace that took stock's choices; tracing with the generic policy"


def arrives_at_one(code: Any, call: _CallArguments) -> bool:
    """Some size a kept generic compile of ``code`` keeps for 1 is 1 at every source in this call, and
    every size it has as a constant is that constant: the trace is headed for a reuse at 1, so it takes
    stock's choices (the reuse binds a size the new trace has as a constant to that constant, so a
    static trace serves as well, at stock's cost).  A source this cannot read keeps the generic policy."""
    return any(sources and all(call.size(src) == 1 for src in sources) and call.same_constants(k)
               for k in alive(code) for symbol in k.candidates for sources in [bound_sources(k.env, symbol)])


class _CallArguments:
    """A call's arguments, read through Dynamo's sources as its guards read them."""

    def __init__(self, f_globals: dict[str, Any], f_locals: dict[str, Any]) -> None:
        self.scope = {"L": f_locals, "G": f_globals}  # how sources name a frame's locals and globals
        self.cache: dict[Any, Any] = {}

    def value(self, src: Any) -> Any:
        """The value ``src`` names, or None where it cannot be read."""
        try:
            return src.get_value(self.scope, self.scope, self.cache) if hasattr(src, "get_value") else None
        except Exception:  # noqa: BLE001 - an input this cannot read: the generic policy, as before
            return None

    def size(self, src: Any) -> Any:
        """The size a tensor-size source names, or None."""
        base, idx = getattr(src, "base", None), getattr(src, "idx", None)
        shape = getattr(self.value(base), "shape", None) if base is not None and idx is not None else None
        return shape[idx] if shape is not None and idx < len(shape) else None

    def same_constants(self, k: Kept) -> bool:
        """Every size the kept trace has as a constant is that constant now (else the new
        trace has it symbolic or another number, and the reuse is refused anyway)."""
        return all(isinstance(now, torch.Tensor) and now.dim() == fake.dim()
                   and all(n == m for n, m in zip(fake.shape, now.shape) if isinstance(n, int))
                   for src, (_, fake) in zip(k.sources, k.inputs) if isinstance(fake, torch.Tensor)
                   for now in [self.value(src)])


def call_arguments(tx: Trace) -> _CallArguments:
    """The arguments of the call ``tx`` traces (its root frame's locals and globals)."""
    root = getattr(tx.output, "root_tx", tx)
    return _CallArguments(getattr(root, "f_globals", None) or {}, getattr(root, "f_locals", None) or {})


def generic_sizes(context: Any, tensor: Any, shared: frozenset[int]) -> Any:
    """``context`` with every static size of ``tensor`` that is in ``shared`` made dynamic, except the sizes
    ``torch._dynamo.mark_static`` pinned; the same object when nothing changes."""
    sizes = getattr(context, "dynamic_sizes", None)
    if sizes is None or not shared:
        return context
    pinned = getattr(tensor, "_dynamo_static_indices", ())
    chosen = [DimDynamic.DYNAMIC if d is DimDynamic.STATIC and i not in pinned and tensor.shape[i] in shared else d
              for i, d in enumerate(sizes)]
    return context if chosen == list(sizes) else dataclasses.replace(context, dynamic_sizes=chosen)


def _policy_applies(tx: Trace, source: Any) -> bool:
    """The input named by ``source`` is one the generic policy may make dynamic: automatic dynamic is on
    (static by default), the backend is verishape's with generic recompiles, and the input is reached from
    the frame's arguments (a local, not a global)."""
    return (config.automatic_dynamic_shapes and config.assume_static_by_default is not False
            and wants_generic(getattr(tx.output, "compiler_fn", None)) and source is not None
            and isinstance(source.get_base() if hasattr(source, "get_base") else source, LocalSource))


def _generic_on_recompile(original: Any) -> Any:
    def _automatic_dynamic(e: Any, tx: Trace, source: Any, static_shapes: bool, *args: Any, **kwargs: Any) -> Any:
        context = original(e, tx, source, static_shapes, *args, **kwargs)
        declared = None if static_shapes or source is None else declared_of(tx)
        code = getattr(tx.output, "root_tx", tx).f_code
        if declared is not None:
            context = declared_sizes.symbolic_context(declared, context, e, source, code,
                                                      candidate.raised_at_two(tx.output.shape_env, e, source))
        if static_shapes or not _policy_applies(tx, source):
            return context
        call = _call_of(tx)  # asked on the first compile too: it records the input layout
        if not (is_recompile() or candidate.raising()):
            return context
        context = generic_sizes(context, e, call.shared)
        if not call.other_tensors:  # a candidate there would be refused: none is traced
            candidate.mark_sizes(tx.output.shape_env, code, e, source, context)
        return context

    return _automatic_dynamic


def _generic_int_on_recompile(original: Any) -> Any:
    def wrap_symint(builder: Any, value: int, *args: Any, **kwargs: Any) -> Any:
        asked = not args and kwargs.get("dynamism") is None and type(value) is int and value >= 2
        dim = _declared_int(builder, value) if asked else None
        if dim is not None or (asked and _int_gets_symbol(builder)):
            kwargs["dynamism"] = DimDynamic.DYNAMIC
        out = original(builder, value, *args, **kwargs)
        if dim is not None:
            declared_sizes.constrain(builder.tx.output.shape_env, getattr(out, "sym_num", None), dim)
        return out

    return wrap_symint


def _declared_int(builder: Any, value: int) -> Any:
    """The declared variable (``shapes_spec``) of an int argument (2 or more) whose value is in its range, or None."""
    declared = declared_of(builder.tx) if builder.source is not None else None
    if declared is None:
        return None
    dim = declared.leaf(builder.source, getattr(builder.tx.output, "root_tx", builder.tx).f_code)
    return dim if isinstance(dim, declared_sizes.Dim) and dim.holds(value) else None


def _int_gets_symbol(builder: Any) -> bool:
    """An int argument (>= 2, reached from the frame's arguments, which stock's automatic
    dynamic would wrap as a constant or a symbol) of a generic recompile gets a symbol: it
    often *is* a size no input tensor carries yet (a static cache's ``max_cache_len``; why
    and what is left alone: docs/compile.md, "An int argument of a generic recompile")."""
    if config.specialize_int or getattr(TracingContext.try_get(), "force_unspec_int_unbacked_size_like", False):
        return False
    return _policy_applies(builder.tx, builder.source) and bool(_call_of(builder.tx).shared)
