"""A recompile at size 1 compiles a candidate generic in that size; stock traces decide its use.

The first attempt of a recompile at which a dynamic size is 1 traces a *candidate*: those sizes keep a symbol
(:meth:`VeriShapeEnv.keeping_symbolic_at_one`, a scope this module owns for each attempt, :class:`KeptAtOne`).  The
user's backend compiles it and it is kept, never run as traced (Note [A candidate is never run as traced]; every way
its attempt ends leads to a restart, :func:`_restart_after_candidate`): it is used only through
:mod:`verishape.compiler.widen.reuse`'s proofs against stock's own traces.  Traced only where an earlier compile
of the frame took the same tensors (:func:`other_inputs`) and no generic compile that took them is kept
(:func:`mark_sizes`).  The design and its measurements: ``docs/compile.md``, "A candidate at 1".
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import sympy
import torch
from torch._dynamo.exc import TensorifyScalarRestartAnalysis
from torch._dynamo.source import TensorProperty, TensorPropertySource
from torch._dynamo.utils import counters
from torch._guards import CompileContext
from torch.fx.experimental.symbolic_shapes import DimDynamic

from verishape.compiler import declared as declared_sizes
from verishape.core import torch_names, torch_seam
from verishape.core.shape_env import VeriShapeEnv

from . import input_layouts
from .kept import alive

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from .traces import Trace

log = logging.getLogger("verishape")

#: set on the compile's own context (Dynamo's ``CompileContext``, one per compile, kept
#: across its attempts) once its candidate attempt is over: the next attempt is stock's
_DONE = "_verishape_candidate_done"


def install() -> None:
    """Wrap Dynamo's trace of a frame, so that a candidate attempt ends in a restart (idempotent; a torch
    without it traces no candidate)."""
    torch_seam.wrap_once(torch_names.TRACE_ATTEMPT, _restart_after_candidate, "no candidate is traced at size 1")


def wanted() -> bool:
    """The compile under way has not made its candidate attempt yet (and this torch ends every one in a restart)."""
    ctx = CompileContext.try_get()
    return ctx is not None and not getattr(ctx, _DONE, False) and _ended_by_restart


@dataclasses.dataclass
class KeptAtOne:
    """One attempt's sizes kept symbolic at 1 (the core's ``SymbolicAtOne``): filled by :func:`mark_sizes` as Dynamo
    wraps the inputs, and by the env as it makes their symbols and answers their questions; the attempt is a
    candidate once a symbol was made.  Or (:func:`raised_at_two`) the declared sizes at 1 this attempt traces at 2."""

    sources: set[str] = dataclasses.field(default_factory=set)
    symbols: set[sympy.Symbol] = dataclasses.field(default_factory=set)
    defaulted: list[tuple[sympy.Basic, bool]] = dataclasses.field(default_factory=list)
    #: sizes traced at 2 (source names), and each tensor's hint overrides as they were
    raised: set[str] = dataclasses.field(default_factory=set)
    overridden: list[tuple[Any, dict[int, int] | None]] = dataclasses.field(default_factory=list)

    def restore(self) -> None:
        """Each raised tensor's hint overrides as they were before the attempt."""
        for tensor, before in reversed(self.overridden):
            if before is None:
                tensor.__dict__.pop("_dynamo_hint_overrides", None)
            else:
                tensor._dynamo_hint_overrides = before
        self.overridden.clear()


#: whether Dynamo's trace of a frame is wrapped by :func:`_restart_after_candidate` (set when wrapped)
_ended_by_restart = False


def _restart_after_candidate(original: Any) -> Any:
    """Dynamo's trace of a frame, such that a candidate attempt never ends as a trace Dynamo would install: however it
    ends (the backend's restart, a graph break's speculation restart, an error, or done with no graph for the backend),
    the next attempt is stock's, from scratch.  Only the root translator's run is concerned (inlined calls pass)."""
    global _ended_by_restart

    def run(self: Any) -> Any:
        output = getattr(self, "output", None)
        if (output is None or getattr(output, "root_tx", None) is not self
                or not isinstance(output.shape_env, VeriShapeEnv) or not wanted()):
            return original(self)
        env = output.shape_env
        # whether this is a candidate attempt is known only once its inputs are wrapped
        kept = KeptAtOne()
        _raise_at_first_compile(self)
        with env.keeping_symbolic_at_one(kept):
            try:
                result = original(self)
            except TensorifyScalarRestartAnalysis:
                if not is_candidate(env) or getattr(CompileContext.try_get(), _DONE, False):
                    raise  # not a candidate, or ours from the backend (restart() cleared the speculation log)
                restart("a restart inside the candidate's trace", compiled=False, tx=self)
            except Exception as exc:  # noqa: BLE001 - a graph break's restart, an error: stock's attempt decides
                if not is_candidate(env):
                    raise
                restart(f"its trace ended in {type(exc).__name__}", compiled=False, tx=self, cause=exc)
            finally:
                kept.restore()  # the next attempt wraps the same tensors: as they came
            if not is_candidate(env):
                return result
            restart("its trace ended without a compile", compiled=False, tx=self)

    _ended_by_restart = True
    return run


def mark_sizes(env: ShapeEnv, code: Any, tensor: Any, source: Any, context: Any) -> None:
    """In a candidate attempt: every size of ``tensor`` that ``context`` makes dynamic and that is 1 keeps a symbol."""
    kept = VeriShapeEnv.symbolic_at_one_of(env)  # None outside a candidate attempt's scope
    sizes = getattr(context, "dynamic_sizes", None)
    if kept is None or sizes is None or not wanted() or raising():
        return  # (an attempt at 2 keeps nothing at 1)
    at_one = [i for i, d in enumerate(sizes) if d is DimDynamic.DYNAMIC and tensor.shape[i] == 1]
    if not at_one:
        return
    # only while no compile generic in a size that took this call's tensors is kept: a call at 1 is proved
    # against it, and a candidate would mostly cost a trace (one that took other tensors, a decoder's
    # decode step beside its prefill, serves no call of this program)
    ids = [k.compile_id for k in alive(code) if k.candidates]
    if not ids or input_layouts.other_tensors_than_all(code, ids):
        kept.sources.update(TensorPropertySource(source, TensorProperty.SIZE, i).name for i in at_one)


#: the tensor inputs (source names) of each frame's compiles, as sets of them
_inputs_seen: dict[Any, set[frozenset[str]]] = {}


def _tensor_inputs(tx: Trace) -> frozenset[str]:
    # (a view input's ``_base`` is tracked or not, as Dynamo fakes the view: not an input of its own)
    return frozenset(tf.source.name for tf in tx.output.tracked_fakes
                     if isinstance(tf.fake, torch.Tensor) and not tf.source.name.endswith("._base"))


def note_inputs(tx: Trace) -> None:
    """After a compile of the frame (not a candidate's): the tensors it took (a frame's first compile, again
    after a reset of Dynamo, forgets those of the compiles before)."""
    seen = _inputs_seen.setdefault(tx.f_code, set())
    if input_layouts.frame_compile_id() == 0:
        seen.clear()
    seen.add(_tensor_inputs(tx))


def other_inputs(tx: Trace) -> bool:
    """The candidate's frame takes tensors no earlier compile of it took: not the same program at another
    size (a decoder's first decode step adds the KV cache), so a candidate there would mostly be refused
    against the stock trace: not compiled.  A prefill after decode steps is the first compile's program."""
    return _tensor_inputs(tx) not in _inputs_seen.get(tx.f_code, ())


def is_candidate(env: ShapeEnv) -> bool:
    """This trace kept a size symbolic at 1, or traced a declared size at 1 at 2 (inside its attempt's scope)."""
    return bool(getattr(VeriShapeEnv.symbolic_at_one_of(env), "symbols", None)) or is_raised(env)


def is_raised(env: ShapeEnv) -> bool:
    """This trace traced declared sizes at 1 at 2 (:func:`raised_at_two`)."""
    return bool(getattr(VeriShapeEnv.symbolic_at_one_of(env), "raised", None))


#: on the compile's own context: the declared variables its next attempt traces at 2 (a declared size at 1 with
#: nothing kept to serve it is traced at 2, as a candidate: Note [A declared size at 1 is compiled at 2])
_RAISE = "_verishape_raise"


def raising() -> frozenset[str]:
    """The declared variables the attempt under way traces at 2 where they are 1."""
    return frozenset(getattr(CompileContext.try_get(), _RAISE, ())) if wanted() else frozenset()


def raised_at_two(env: ShapeEnv, tensor: Any, source: Any) -> Callable[[int, Any], bool] | None:
    """For a candidate attempt at 2: the choice of which of ``tensor``'s declared sizes at 1 it traces at 2, each
    given the hint 2 for this trace (restored when the attempt ends; none outside its scope); None otherwise."""
    raised = raising()
    if not raised:
        return None

    def at_two(i: int, dim: Any) -> bool:
        kept = VeriShapeEnv.symbolic_at_one_of(env)
        if dim.name not in raised or not isinstance(kept, KeptAtOne):
            return False
        before = getattr(tensor, "_dynamo_hint_overrides", None)
        kept.overridden.append((tensor, dict(before) if before is not None else None))
        tensor._dynamo_hint_overrides = {**(before or {}), i: 2}
        kept.raised.add(TensorPropertySource(source, TensorProperty.SIZE, i).name)
        return True
    return at_two


def _raise_at_first_compile(tx: Trace) -> None:
    """Nothing kept can serve this call (none kept, or each took other input tensors) and its declared
    leading variables are 1: the first attempt is the one at 2 (Note [A declared size at 1 is compiled at 2])."""
    ctx = CompileContext.try_get()
    if ctx is None or getattr(ctx, _RAISE, None) is not None:
        return
    declared = declared_sizes.of_backend(getattr(tx.output, "compiler_fn", None))
    f_locals = getattr(tx, "f_locals", None) or {}
    if declared is None or not (at_one := declared.leading_at_one_in(f_locals, tx.f_code)):
        return
    ids = [k.compile_id for k in alive(tx.f_code)]  # (the walk of the arguments only where a leading size is 1)
    if not ids or input_layouts.other_tensors_than_all(tx.f_code, ids, f_locals):
        setattr(ctx, _RAISE, at_one)


def raise_after_refusal(tx: Trace, at_one: frozenset[str]) -> str | None:
    """Nothing kept serves this trace, whose declared leading variables ``at_one`` are 1: why the frame is to be traced
    again with them at 2 (the caller restarts Dynamo's analysis; Note [A declared size at 1 is compiled at 2]), or None
    (nothing to raise, or this compile's attempt at 2 was made)."""
    ctx = CompileContext.try_get()
    if not at_one or ctx is None or not wanted() or getattr(ctx, _RAISE, None) is not None:
        return None
    setattr(ctx, _RAISE, at_one)
    return f"declared sizes at 1 ({', '.join(sorted(at_one))}) with nothing kept to serve them: traced at 2"


def pinned(env: ShapeEnv) -> str | None:
    """Why the candidate's trace serves no size other than 1 (a guard false with its sizes at 2, the others at
    their hints; a replacement or range fixing one), or None."""
    at_one = VeriShapeEnv.symbolic_at_one_of(env)
    symbols = frozenset(at_one.symbols) if at_one is not None else frozenset()
    raised = getattr(at_one, "raised", set())
    # a size kept at 1 or traced at 2 that the trace pinned (every symbol made has its entry in var_to_sources)
    for s, sources in env.var_to_sources.items():
        r = env.replacements.get(s)
        if getattr(r, "is_number", False) and (s in symbols or any(src.name in raised for src in sources)):
            return f"{s} replaced by {r}"
    for s in symbols:
        if (vr := env.var_to_range.get(s)) is not None and vr.upper < 2:
            return f"{s} ranges over {vr}"
    hints = {**env.backed_var_to_val, **dict.fromkeys(symbols, sympy.Integer(2))}
    for g in env.guards:
        try:
            at_two = env.replace(g.expr).xreplace(hints)
        except ZeroDivisionError:
            return f"the guard {g.expr} divides by zero at 2"
        if at_two is sympy.false:
            return f"the guard {g.expr} is false at 2"
    return None


def restart(why: str, compiled: bool, tx: Trace | None = None, cause: BaseException | None = None) -> None:
    """Trace the frame again, as stock (the candidate attempt is over).  Counted:
    ``counters["verishape"]["candidates"]`` (compiled and kept) or ``["candidates_dropped"]``
    (traced, not compiled; Dynamo's ``unique_graphs`` counts its trace all the same)."""
    if (ctx := CompileContext.try_get()) is not None:
        setattr(ctx, _DONE, True)
    counters["verishape"]["candidates" if compiled else "candidates_dropped"] += 1
    log.info("verishape: candidate attempt over (%s); tracing again as stock", why)
    retrace(tx, f"verishape candidate: {why}", cause)


def retrace(tx: Trace | None, why: str, cause: BaseException | None = None) -> NoReturn:
    """Make Dynamo trace the frame again from scratch (the attempt under way is dropped; ``cause``, the error
    that ended it, is the restart's cause)."""
    # the next attempt may branch where this one did not: Dynamo's replay of this attempt's
    # speculation (where it graph-broke) would not match it
    if tx is not None and getattr(tx, "speculation_log", None) is not None:
        tx.speculation_log.clear()
    # the one restart a backend may raise that Dynamo's compiler call passes on (2.11 to 2.13)
    raise TensorifyScalarRestartAnalysis(restart_reason=why) from cause
