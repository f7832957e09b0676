"""Keeping a generic compile for a later size-1 call: what :mod:`verishape.compiler.widen.reuse`'s proof needs of it
(its Dynamo and AOT inference graphs, artifact, inputs, guards and the lowering's answers,
:mod:`verishape.compiler.widen.questions`), recorded while the user's backend compiles it.  Where torch's cache served
the artifact, the answers are read from its record (:mod:`verishape.compiler.widen.record`) and the AOT graph traced
again (never lowered) when size 1 arrives, unless a verdict answers (:mod:`verishape.compiler.widen.verdict`)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import re
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import sympy
import torch
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
from torch._guards import CompileContext, TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensor

from verishape.core import torch_names, torch_seam
from verishape.core.shape_env import SymbolicAtOne, VeriShapeEnv

from . import questions as questions_
from . import lowered_sizes, record, recompute
from .canon import NotWidened
from .sizes import eligible, group_name
from .snapshot import Snapshot
from .traces import aot_inference_graph

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from .traces import Trace

log = logging.getLogger("verishape")
KNOWN_BACKENDS = ("eager", "aot_eager", "inductor")
_AOT_BACKENDS = ("aot_eager", "inductor")


@dataclasses.dataclass
class Kept:
    """A generic compile, kept for a later size-1 call (see the module docstring)."""

    env: ShapeEnv
    candidates: frozenset[sympy.Symbol]
    backend: str
    dynamo: Snapshot
    aot: Snapshot | None
    aot_kwargs: dict[str, Any] | None
    questions: questions_.QuestionLog | None
    compiled: Callable[..., Any]
    inputs: list[tuple[str, Any]]
    #: non-shape guards (:func:`guard_keys`), read when kept: Dynamo empties the trace's guards once its entry is built
    guard_keys: frozenset[tuple[str, str]]
    compile_id: Any
    #: seconds the user's backend took to compile it (what a reuse saves)
    compile_s: float = 0.0
    #: served from torch's cache: the key its widening record is stored under, read when size 1 arrives
    cache_key: str | None = None
    #: served from AOTAutograd's cache: the graph and inputs it was given, to trace the inference graph again at size 1
    aot_source: tuple[Any, list[Any]] | None = None
    #: why no proof may use this kept compile any more (its env gained facts)
    spoiled: str | None = None
    #: traced with sizes kept symbolic at 1 (:mod:`verishape.compiler.widen.candidate`):
    #: never run as traced, so it is also tried for calls with no size at 1
    candidate: bool = False
    #: for a candidate, what its attempt kept symbolic at 1: :func:`_traced_again` answers in that scope too
    at_one: SymbolicAtOne | None = None
    #: every key torch's caches file the artifact under (verdicts are filed under them)
    artifact_keys: tuple[str, ...] = ()
    #: the Dynamo source of each of ``inputs`` (read off a later call's arguments)
    sources: tuple[Any, ...] = ()
    #: Dynamo's context of the compile that kept it (:func:`_weakly`): a candidate lives as long as that
    #: compile's later attempts, whose entry it is proved for
    context: Any = None
    #: a candidate lowered here: the answers its trace gave without a guard before the
    #: lowering (Dynamo's and AOTAutograd's; the lowering's are in ``questions``), which may
    #: stand in for an AOT trace (Note [A candidate's answers stand in for its AOT trace])
    unguarded: tuple[tuple[sympy.Basic, bool], ...] | None = None
    #: the global state its lowering was made under, as Dynamo's global-state guard serializes it
    #: (grad mode, autocast, determinism, default dtype, threads; None: this torch has no such guard)
    global_state: str | None = None
    #: the backend object that compiled it (weakly): Dynamo serves an entry only to the backend that made
    #: it, whose options (``fallback_random``, a mode) are part of what its artifact computes
    owner: Any = None

    def from_cache(self) -> None:
        """An artifact torch's cache served: read its lowering's answers from the record beside it;
        raises :class:`NotWidened` with the reason where it is missing or does not belong."""
        if self.spoiled is not None:
            raise NotWidened(self.spoiled)
        if self.questions is None and self.cache_key is not None:
            try:
                self.questions = record.load(self.cache_key, self.env, self.candidates)
            except record.Dropped as exc:
                raise NotWidened(f"the generic artifact came from torch's cache: {exc}") from None

    @property
    def has_aot(self) -> bool:
        """Whether the backend lowers an AOTAutograd inference graph (compared at reuse)."""
        return self.backend in _AOT_BACKENDS

    def aot_graph(self) -> Snapshot | None:
        """The kept AOT inference graph (None for a backend without one); for an artifact torch's
        cache served, traced again when first asked for (where no verdict answers the comparison)."""
        if self.spoiled is not None:
            raise NotWidened(self.spoiled)
        if self.aot is None and self.has_aot:
            self.aot = _traced_again(self)  # refuses where nothing was kept to trace
        return self.aot


@dataclasses.dataclass
class _Recording:
    """A generic compile under way, as :class:`Kept` (its ``aot_source`` holds real inputs: :func:`_fake_source`)."""

    env: ShapeEnv
    candidates: frozenset[sympy.Symbol]
    dynamo: Snapshot
    aot: Snapshot | None = None
    aot_kwargs: dict[str, Any] | None = None
    aot_calls: int = 0
    questions: questions_.QuestionLog | None = None
    #: when the user's backend started compiling (:attr:`Kept.compile_s`)
    started: float = dataclasses.field(default_factory=time.perf_counter)
    #: the keys torch's caches store the artifact under ("aot:..." AOTAutograd's, "fx:..."
    #: Inductor's FX graph cache's), where they were computed
    keys: list[str] = dataclasses.field(default_factory=list)
    aot_source: tuple[Any, list[Any]] | None = None
    unguarded: tuple[tuple[sympy.Basic, bool], ...] | None = None

    def refuse(self, why: str) -> None:
        """Say in the frame's decision log why a size-1 call will not run this compile (as far as ``why`` says)."""
        self.env.verishape_log.not_widened.append((group_name(self.env, tuple(sorted(self.candidates, key=str))), why))


_recording: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar("verishape_widen_rec", default=None)
_kept: weakref.WeakKeyDictionary[types.CodeType, list[Kept]] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


def observe_aot(mod: Any, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The backend's ``aot_module_simplified`` hook: while a generic compile is recorded, keep the call's graph, inputs
    and options, and wrap its inference compiler to copy the graph it receives and log the lowering's shape answers."""
    rec = _recording.get()
    if rec is None:
        return kwargs
    torch_seam.wrap_once(torch_names.AOT_CACHE_KEY, _learn_key, "no widening records are kept, so a process "
                         "served from torch's caches compiles size 1 as stock")
    rec.aot_calls += 1
    rec.aot_source = (mod, list(args))
    rec.aot_kwargs = {k: v for k, v in kwargs.items() if k not in ("fw_compiler", "bw_compiler", "inference_compiler")}
    inner = kwargs.get("inference_compiler") or kwargs["fw_compiler"]

    def record_then_compile(gm: torch.fx.GraphModule, example_inputs: Any, *args: Any, **kw: Any) -> Any:
        rec.aot = Snapshot(gm)  # before lowering rewrites gm
        at_one = VeriShapeEnv.symbolic_at_one_of(rec.env)
        if at_one is not None:  # Note [A candidate's answers stand in for its AOT trace]
            rec.unguarded = tuple(dict.fromkeys(at_one.defaulted))
        hits = counters["inductor"]["fxgraph_cache_hit"]
        with questions_.recording(rec.env, rec.candidates) as qlog:
            out = inner(gm, example_inputs, *args, **kw)
        # served from Inductor's FX graph cache: lowered out of sight (its record is read by key at size 1)
        rec.questions = qlog if counters["inductor"]["fxgraph_cache_hit"] == hits else None
        if rec.questions is not None:
            # the sizes the AOT graph computes with join the lowering's: the record holds
            # every size the proof reads, and a warm start need not trace the graph again
            lowered_sizes.from_graph(rec.aot, rec.questions.sizes)
        fx_key = getattr(out, "_fx_graph_cache_key", None)
        if isinstance(fx_key, str):
            rec.keys.append("fx:" + fx_key)
        return out

    # wrapped like ``inner``: AOTAutograd treats its serializable compilers specially
    wrapped = (SerializableAOTDispatchCompiler(inner.output_code_ty, record_then_compile)
               if isinstance(inner, SerializableAOTDispatchCompiler) else record_then_compile)
    return {**kwargs, "inference_compiler": wrapped}


@contextlib.contextmanager
def recording(env: ShapeEnv, backend_name: str, gm: torch.fx.GraphModule) -> Iterator[_Recording | None]:
    """Around the user's backend call of a compile: record what a later size-1 call's proof needs
    (None: no size of this frame can be widened).  Torch's caches stay on: an artifact they serve is
    kept with the key of its widening record (:meth:`Kept.from_cache`)."""
    candidates = frozenset(eligible(env)) if backend_name in KNOWN_BACKENDS and not _unseen_answers(env) else frozenset()
    if not candidates:
        yield None
        return
    rec = _Recording(env, candidates, Snapshot(gm))
    token = _recording.set(rec)
    try:
        yield rec
    finally:
        _recording.reset(token)


def _unseen_answers(env: ShapeEnv) -> bool:
    """torch's aggressive guard-free semantics is on (``torch_names.GUARD_FREE_MODE``), or it keeps results of answers
    where they cannot be cleared (``questions.forget_answers``): then not every answer the lowering acts on is seen."""
    module_name, name = torch_names.GUARD_FREE_MODE
    if getattr(sys.modules.get(module_name), name, 0):
        return True
    if questions_.answer_memos(env) is None:
        recompute.say_once("answer memos", "verishape: this torch lacks one of %s (a memo of answers to clear); "
                           "nothing is kept for size 1", ", ".join((*torch_names.ANSWER_MEMOS,
                                                                    f"ShapeEnv.{torch_names.FAKE_TENSOR_CACHE}")))
        return True
    return False


def keep(rec: _Recording, tx: Trace, compiled: Callable[..., Any], backend_name: str, owner: object,
         candidate: bool = False) -> None:
    """After the user's backend compiled the generic graph: keep it for a size-1 call."""
    # served by AOTAutograd's cache: one AOTAutograd call, whose key is known, and no inference graph lowered here
    served = (backend_name == "inductor" and rec.aot_calls == 1 and rec.aot is None and rec.aot_source is not None
              and any(key.startswith("aot:") for key in rec.keys))
    if backend_name in _AOT_BACKENDS and (rec.aot_calls != 1 or (rec.aot is None and not served)):
        rec.refuse("no AOTAutograd inference graph was compiled (a training graph, or one served from the AOTAutograd "
                   "cache without its key): nothing kept for size 1")
        return
    # the key of the entry that served the artifact: AOTAutograd's where its cache did, else the FX graph cache's
    cache_key = (next((key for key in rec.keys if key.startswith("aot:" if served else "fx:")), None)
                 if rec.questions is None else None)
    if rec.questions is not None and rec.keys:
        _save_record(rec)
    elif not served and cache_key is not None:
        _copy_record(rec, cache_key)
    kept = Kept(rec.env, rec.candidates, backend_name, rec.dynamo, rec.aot, rec.aot_kwargs, rec.questions,
                compiled, [(tf.source.name, tf.fake) for tf in tx.output.tracked_fakes], guard_keys(tx.output.guards),
                CompileContext.current_compile_id(), time.perf_counter() - rec.started, cache_key,
                _fake_source(rec, detached=candidate) if served else None,
                candidate=candidate, at_one=VeriShapeEnv.symbolic_at_one_of(rec.env) if candidate else None,
                artifact_keys=tuple(rec.keys), sources=tuple(tf.source for tf in tx.output.tracked_fakes),
                context=_weakly(CompileContext.try_get()), global_state=global_state(tx),
                owner=_weakly(owner), unguarded=rec.unguarded if candidate and rec.questions is not None else None)
    kept_count()  # drops what Dynamo no longer holds (a reset, an evicted entry)
    with _kept_lock:
        _kept.setdefault(tx.f_code, []).append(kept)


def _fake_source(rec: _Recording, detached: bool) -> tuple[Any, list[Any]] | None:
    """The graph AOTAutograd was given, with Dynamo's fake inputs in place of the call's real ones (kept, those would
    keep a served model's activations and caches alive).  ``detached``: a module over a copy of its graph (a candidate's
    trace ends in a restart, and Dynamo then clears the graph's nodes), attributes shared, with what AOTAutograd reads
    of a Dynamo graph: the module's metadata and parameter sources, each input's source."""
    assert rec.aot_source is not None
    mod, args = rec.aot_source
    fakes = [n.meta.get("example_value", n.meta.get("val")) for n in rec.dynamo.graph.find_nodes(op="placeholder")]
    if len(fakes) != len(args):
        return None
    if not detached:
        return mod, fakes
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    graph.output(graph.graph_copy(mod.graph, copies))
    copy = torch.fx.GraphModule(mod, graph)
    copy.meta = dict(mod.meta)
    if hasattr(mod, "_param_name_to_source"):
        copy._param_name_to_source = mod._param_name_to_source
    for old, new in copies.items():
        if hasattr(old, "_dynamo_source"):
            new._dynamo_source = old._dynamo_source
    return copy, fakes


def _copy_record(rec: _Recording, fx: str) -> None:
    """Lowered out of sight by Inductor's FX graph cache in this process: the record that cache's key ``fx`` names also
    goes under AOTAutograd's key (see :func:`record.copy`)."""
    for key in (k for k in rec.keys if k.startswith("aot:")):
        try:
            record.copy(fx, key, rec.env)
        except OSError as exc:
            log.warning("verishape: the widening record for %s was not copied: %r", key[:24], exc)


def _save_record(rec: _Recording) -> None:
    """Write the lowering's answers under each of the artifact's cache keys.  A record that cannot be
    written costs a warm process its reuse, never this compile: logged, and the frame's log says so."""
    try:
        remote = record.save(rec.keys, rec.questions, rec.env)
    except (OSError, record.Unrecordable) as exc:
        log.warning("verishape: the widening record was not written: %r", exc)
        rec.refuse(f"the widening record was not written ({type(exc).__name__}: {exc}"[:200] + "): a process served "
                   "this artifact from torch's cache compiles size 1 as stock")
        return
    for why in remote:
        log.warning("verishape: %s", why)
        rec.refuse(f"{why}; the widening record was not written there: a machine served this artifact remotely "
                   "compiles size 1 as stock")


def _learn_key(original: Callable[..., Any]) -> Callable[..., Any]:
    """AOTAutograd's cache key function, such that a recorded compile learns the key its artifact is cached under."""
    def autograd_cache_key(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        rec = _recording.get()
        if rec is not None and isinstance(out, tuple) and out and isinstance(out[0], str):
            rec.keys.append("aot:" + out[0])
        return out

    return autograd_cache_key


def facts(env: ShapeEnv) -> tuple[Any, ...]:
    """What a proof reads of an env's facts: its guards, ranges, replacements, divisibility
    facts and runtime asserts (compared before and after a trace: a fact it added)."""
    return (len(env.guards), dict(env.var_to_range), dict(env.replacements), len(getattr(env, "divisible", ())),
            sum(len(v) for v in getattr(env, "deferred_runtime_asserts", {}).values()))


def _traced_again(k: Kept) -> Snapshot:
    """The AOT inference graph of an artifact AOTAutograd's cache served, traced again (never lowered) from the
    graph and fake inputs it was given.  Tracing must not need a fact the cached entry does not check: where it adds
    a guard, range or replacement, the kept compile is spoiled (this reuse and every later one refused)."""
    if k.aot_source is None:
        raise NotWidened("the inputs of the cached generic artifact's graph were not kept")
    mod, args = k.aot_source
    modes = {a.fake_mode for a in args if isinstance(a, FakeTensor)}
    if len(modes) != 1:
        raise NotWidened("the cached generic artifact's inputs are not fake tensors of one trace")
    before = facts(k.env)
    at_one = k.env.keeping_symbolic_at_one(k.at_one) if k.at_one is not None else contextlib.nullcontext()
    try:
        with at_one, tracing(TracingContext(modes.pop())):
            return aot_inference_graph(mod, args, k.aot_kwargs or {}, Snapshot,
                                       "the cached generic artifact needs autograd (training graph)",
                                       "tracing the cached generic artifact's AOT graph again gave no inference graph")
    finally:  # a trace that ended in a refusal spoils it too
        if facts(k.env) != before:
            k.spoiled = ("tracing the cached generic artifact's AOT graph again added a guard, range or replacement "
                         "its cache entry does not check")
            raise NotWidened(k.spoiled)  # noqa: B012 - the spoiled env outranks the trace's own answer


def alive(code: types.CodeType) -> list[Kept]:
    """The kept compiles of ``code`` whose cache entry Dynamo still holds (the others are dropped)."""
    # a candidate's compile is the one whose stock attempt is under way (its entry comes after), and it
    # lives as long as that entry: found by the compile's context, not its id (reset by a Dynamo reset)
    now = CompileContext.try_get()
    with _kept_lock:
        kept = _kept.pop(code, [])
        ids = {str(e.compile_id) for e in torch_seam.cache_entries(code)} if kept else set()
        alive = [k for k in kept if str(k.compile_id) in ids or (now is not None and k.context() is now)]
        if alive:
            _kept[code] = list(alive)  # the caller's list is its own (a later keep appends to the table's)
    return alive


def kept_count() -> int:
    """How many generic compiles are kept and still in Dynamo's cache (the others are dropped)."""
    with _kept_lock:
        codes = list(_kept.keys())
    return sum(len(alive(code)) for code in codes)


def _weakly(obj: object) -> Callable[[], object]:
    """A reference to ``obj`` that does not keep it alive where it can be weak."""
    try:
        return weakref.ref(obj)
    except TypeError:  # (None, or an object without weak references: held)
        return lambda: obj


def global_state(tx: Trace) -> str | None:
    """The global state ``tx`` was traced under, as Dynamo's global-state guard serializes it, or None."""
    guard = getattr(tx.output, "global_state_guard", None)
    return guard.__getstate__() if guard is not None else None


def guard_keys(guards: Any) -> frozenset[tuple[str, str]]:
    """The non-shape guards of a trace, by name and kind (its shape guards are proved)."""
    return frozenset((_BY_ID.sub(r"\1_c", _BUILTINS_DICT.sub("__builtins_dict__", g.name)), guard_kind(g))
                     for g in guards if guard_kind(g) != "SHAPE_ENV")


def guard_kind(guard: Any) -> str:
    fn = guard.create_fn
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", repr(fn))


#: the global Dynamo installs the frame's builtins dict under, numbered across traces
#: (``OutputGraph.install_builtins_dict_in_fglobals``): two traces of one frame name it apart
_BUILTINS_DICT = re.compile(r"__builtins_dict___\d+")
#: a global Dynamo installs for an object by its id, suffixed with the compile's number
#: (``OutputGraph.install_global_by_id``: ``_<id>_c<n>``): two compiles name one object apart
_BY_ID = re.compile(r"(_\d+)_c\d+\b")
