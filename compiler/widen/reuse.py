"""Batch 1 from the batch-N graph: a size-1 call runs the kept generic artifact, when proved.

A call that misses the cache because kept sizes (:mod:`verishape.compiler.widen.kept`) are 1, or inputs are in another
layout (:mod:`verishape.compiler.widen.layout`), is traced as stock traces it; :func:`reuse` then proves the generic
artifact computes what that trace does and returns it, called with arguments rebuilt from the call's; else the backend
compiles as stock, the reason in the frame's decision log.  docs/compile.md, "Batch 1 from the batch-N graph (on by
default)" and "Beyond 0/1: an input's layout, a served decoder loop (issue 38)".
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sympy
import torch
from torch._dynamo.source import TensorProperty, TensorPropertySource
from torch._dynamo.utils import counters

from verishape.core import torch_seam

from . import calling, layout, limit, verdict
from .kept import Kept, alive, facts, global_state, guard_keys, guard_kind
from .canon import Canon, Canonicalizer, NotWidened, canonical, first_difference, returned_sizes
from .effects import reads_layout
from .binding import Binding, bind
from .generic_recompile import call_arguments
from .sizes import Group, at_one, bound_sources, group_name, merged_group, source_names
from .snapshot import is_size_only, placeholder_source, value_of
from .goals import AtOne, install, prove_at_one
from .traces import aot_inference_graph

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from .traces import Trace

log = logging.getLogger("verishape")

#: a symbol -> its canonical form on one side of a comparison (:class:`Canonicalizer`)
Rename = Callable[[sympy.Symbol], sympy.Basic]


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What proves that the size-1 call may run the generic artifact (the compared graphs'
    fingerprints, the goals proved at 1, the solver's proof), built by :func:`_prove` once all hold."""

    #: the value the group's sizes take (None: no size moves, only a layout)
    value: int | None
    #: the first input source of each size set to 1 (``group_name`` order)
    sources: tuple[str, ...]
    dynamo: str
    aot: str | None
    reused: str
    #: what was proved at the point (:class:`verishape.compiler.widen.goals.AtOne`)
    at_one: AtOne
    #: reads of optimization hints of the sizes set to 1 (heuristics: speed only)
    hints: int = 0
    time_s: float = 0.0
    #: sizes the generic graph returns that the size-1 frame returns as constants
    dropped_outputs: int = 0
    #: inputs in another layout (strides, offset) than the generic trace's, copied into it to run
    restrided: tuple[str, ...] = ()
    #: guards (carried ones, a copy's pay-back line) in the new trace's symbols, installed once
    #: the proof holds, never before: a refusal leaves the trace as stock would compile it
    install: tuple[sympy.Basic, ...] = ()
    #: the artifact came from torch's cache, its answers from the record (:mod:`verishape.compiler.widen.record`)
    from_cache: bool = False
    #: the artifact is a candidate (:mod:`verishape.compiler.widen.candidate`), never run as traced
    candidate: bool = False
    #: that candidate traced declared sizes at 1 at 2 (Note [A declared size at 1 is compiled at 2])
    raised: bool = False

    @property
    def proof(self) -> Any:
        return self.at_one.record

    def describe(self, timed: bool = True) -> str:
        at_one, relaid = self.at_one, self.restrided
        graphs = f"dynamo graph {self.dynamo}" + (f", aot graph {self.aot}" if self.aot else "") + (
            f"; the call's AOT graph not traced: the candidate's {at_one.unguarded} unguarded answer(s) implied"
            if at_one.unguarded is not None else
            "; the call's AOT graph not traced: the artifact runs on copies in its own layout"
            if relaid and self.value is None and not self.candidate else "")
        first = (f"{head(self.sources, self.value, relaid, self.raised)} ({graphs}) "
                 f"and runs the artifact of compile {self.reused}")
        if self.candidate and self.value is not None:
            first += (" (a candidate traced at 2 for declared sizes at 1" if self.raised else
                      " (a candidate traced with the size symbolic at 1") + ", in that compile's first attempt)"
        parts = [first, relaid and f"{len(relaid)} input(s) copied into the generic layout ({', '.join(relaid[:2])}"
                 + (", ..." if len(relaid) > 2 else "") + ")",
                 at_one.carried and f"{len(at_one.carried)} guard(s) carried into this entry's guards",
                 f"{len(at_one.goals)} generic guard(s), range(s) and lowering answer(s) ({at_one.answers} answer(s)) "
                 "implied " + (f"at {self.value}" if self.value is not None else "at this call"),
                 self.hints and f"{self.hints} optimization hint read(s), heuristics",
                 self.from_cache and "the artifact came from torch's cache, its lowering's answers from the widening "
                 "record beside it",
                 timed and f"{self.time_s * 1e3:.0f} ms"]
        return "; ".join(p for p in parts if p)


def head(sources: tuple[str, ...], value: int | None, restrided: tuple[str, ...], raised: bool = False) -> str:
    """What a reuse admits, in words: :meth:`Evidence.describe`'s start, and where its proof is filed."""
    if value is None and not restrided:
        return ("the trace equals the generic graph of a candidate compiled "
                + ("at 2 for declared sizes at 1" if raised else "with sizes symbolic at 1"))
    if value is None:
        return f"{restrided[0]} widened to admit its layout: the trace equals the generic graph"
    together = f" (with {', '.join(sources[1:])} at {value} too)" if len(sources) > 1 else ""
    return f"{sources[0]} widened to admit {value}{together}: the size-{value} trace equals the generic graph"


def reuse(env: ShapeEnv, tx: Trace, gm: torch.fx.GraphModule, example_inputs: Any, backend_name: str,
          prover: Any, owner: object) -> Callable[..., Any] | None:
    """The kept generic artifact adapted to this trace's arguments, where proved; None (compile as
    stock) where nothing is reused.  ``owner``: the backend compiling; only its own kept compiles run."""
    now = {tf.source.name: tf.fake for tf in tx.output.tracked_fakes}
    for k in reversed(alive(tx.f_code)):
        if k.backend != backend_name or k.owner() is not owner:
            continue  # another backend's compile (Kept.owner): never this call's to run
        if (group := _arrived(k, now, env, tx)) is None:
            continue
        name = group_name(k.env, group)
        start = time.perf_counter()
        try:
            if backend_name == "inductor" and (why := torch_seam.widening_refused()):
                raise NotWidened(why)
            if backend_name == "inductor" and k.questions is None and k.cache_key is None:
                raise NotWidened("the generic graph was served from Inductor's FX graph cache: the shape answers "
                                 "its lowering acted on were not seen")
            fn, ev = _prove(k, group, env, tx, now, gm, example_inputs, prover)
        except NotWidened as exc:  # Note [Proof or stock]: not proved, so the backend compiles as stock
            env.verishape_log.not_widened.append((name, str(exc)))
            log.info("verishape: %s not widened: %s", name, exc)
            continue
        except Exception as exc:  # noqa: BLE001 - reported as a refusal and logged; the backend compiles as stock
            log.warning("verishape: proving the reuse at size 1 of %s failed, compiling as stock: %r", name, exc)
            env.verishape_log.not_widened.append((name, f"the proof failed: {exc!r}"[:300]))
            continue
        ev = dataclasses.replace(ev, time_s=time.perf_counter() - start)
        count = counters["verishape"]
        count["reused"] += 1
        count["reused_at_size_1" if group else "reused_relaid" if ev.restrided else "reused_generic"] += 1
        if ev.at_one.unguarded is not None:  # Note [A candidate's answers stand in for its AOT trace]
            count["aot_trace_stood_in"] += 1
        elif ev.restrided and not group and not ev.candidate:  # Note [A copy into the generic layout needs no AOT trace]
            count["aot_trace_not_needed"] += 1
        limit.note()
        env.verishape_log.widened.append(ev)
        if ev.proof is not None:
            env.verishape_log.add(ev.proof)
        log.info("verishape: %s", ev.describe())
        return fn
    return None


def _bound(k: Kept, group: Group, env: ShapeEnv, tx: Trace, now: dict[str, Any]
           ) -> tuple[Binding, dict[str, Any], list[str], tuple[Rename, Rename]]:
    """The new trace's binding of ``k``'s symbols, ``group`` at 1 (constants: ``constant``); its inputs (``now``, those
    it tracks), each int input ``k`` has a symbol for and the trace specialized at its value (both sides list the same
    inputs); those in another layout; both renamings."""
    matched = {g.name for g in tx.output.guards if guard_kind(g) in _VALUE_GUARDS}
    call = call_arguments(tx)

    def constant(src: Any) -> int | None:
        """A tensor input's static size, stride or offset (:func:`_size_now`), or an int input's value at this call
        where the trace specialized it (a guard pins the new entry to it), else None: a kept compile's symbol for it (a
        generic recompile's ``max_cache_len``) binds to it as to a constant size."""
        if isinstance(src, TensorPropertySource):
            return _size_now(now, src)
        value = call.value(src) if getattr(src, "name", None) in matched else None
        return value if type(value) is int else None

    binding = bind(k.env, group, env, constant)
    fakes = now | {name: value for src, (name, fake) in zip(k.sources, k.inputs)
                   if name not in now and isinstance(fake, torch.SymInt) and (value := constant(src)) is not None}
    renames = binding.generic_rename(k.env), binding.nested_rename(env)
    relaid = layout.differing(_canon_inputs(dict(k.inputs), Canonicalizer(renames[0])),
                              _canon_inputs(fakes, Canonicalizer(renames[1])))
    return binding, fakes, relaid, renames


#: Dynamo's guards that pin an input to its value at the trace (an int it specialized)
_VALUE_GUARDS = ("CONSTANT_MATCH", "EQUALS_MATCH")


def _size_now(now: dict[str, Any], source: Any) -> int | None:
    """The static value the trace gives ``source`` (a tensor input's size, stride or offset), else None."""
    fake = now.get(source.base.name) if isinstance(source, TensorPropertySource) else None
    if not isinstance(fake, torch.Tensor):
        return None
    if source.prop is TensorProperty.STORAGE_OFFSET:
        n = fake.storage_offset()
    elif source.idx is None or source.idx >= fake.dim():
        return None
    else:
        n = fake.shape[source.idx] if source.prop is TensorProperty.SIZE else fake.stride()[source.idx]
    return n if isinstance(n, int) else n.node.maybe_as_int()


def _arrived(k: Kept, now: dict[str, Any], env: ShapeEnv, tx: Trace) -> Group | None:
    """The kept candidates whose every input size is 1 in this trace (the pattern that arrived); None where one size of
    a candidate is 1 and another is not, or where none is, ``k`` is no candidate and the call's inputs do not differ
    from the generic trace's in some tensors' layout alone.  Silent: any other miss is not this module's to report."""
    ones = {symbol: [_size_now(now, src) == 1 for src in bound_sources(k.env, symbol)] for symbol in k.candidates}
    if any(any(one) and not all(one) for one in ones.values()):
        return None
    out = [symbol for symbol, one in ones.items() if all(one)]
    if out or k.candidate:
        return tuple(sorted(out, key=lambda s: (source_names(k.env, s), str(s))))
    try:
        return () if _bound(k, (), env, tx, now)[2] else None
    except NotWidened:
        return None


def _prove(k: Kept, group: Group, env: ShapeEnv, tx: Trace, now: dict[str, Any], gm: torch.fx.GraphModule,
           example_inputs: Any, prover: Any) -> tuple[Callable[..., Any], Evidence]:
    """The checks (docs/architecture.md, "Following a guard"), cheapest first: a refusal after the
    costly AOT trace would pay it on top of the stock compile.  Premises are the size-1 trace's guards
    as Dynamo left them: the AOT trace only adds guards, so they are a subset of those installed."""
    _refuse_if_excluded(k.env, group)
    _same_global_state(k, tx)
    binding, fakes, relaid, (generic_rename, rename) = _bound(k, group, env, tx, now)
    # each input in another layout: the dense order of the generic trace's layout (proved)
    c, generic_fakes = Canonicalizer(generic_rename), dict(k.inputs)
    orders = {name: layout.dense_order(generic_fakes[name], c, k.env.backed_var_to_val) for name in relaid}
    line = None
    if relaid:
        layout.unobserved(gm, relaid)
        line = layout.pays_back([fakes[name] for name in relaid], k.compile_s)
    what = "at size 1" if group else "in its layout"
    positions = _tensor_positions(k.dynamo, relaid)
    dynamo_generic = canonical(k.dynamo, generic_rename, positions)
    keep = _same_graph(dynamo_generic, canonical(gm, rename, _tensor_positions(gm, relaid)), f"Dynamo graph {what}")
    if missing := _not_checked(k.guard_keys, guard_keys(tx.output.guards)):
        raise NotWidened(f"the generic frame checks guards the size-1 trace does not: {sorted(missing)[:3]}")
    k.from_cache()
    args = calling.argument_map(k, binding, gm, orders)
    sources = tuple(source_names(k.env, s)[0] for s in group)
    value = 1 if group else None
    raised = bool(getattr(k.at_one, "raised", None))
    # Note [A candidate's answers stand in for its AOT trace]: only with no size set and no
    # layout moved, for a candidate lowered in this process (its unguarded answers all seen)
    stand_in = not group and not relaid and k.unguarded is not None
    proved = prove_at_one(k, binding, env, prover, head(sources, value, tuple(relaid), raised), stand_in)
    # Note [A copy into the generic layout needs no AOT trace]: the artifact runs on copies
    # in its own layout, a call its own entry admits; a candidate or a size set still traces
    aot = None if relaid and not group and not k.candidate else _same_aot_graph(
        k, env, gm, example_inputs, binding, (generic_rename, rename), positions, what, proved)
    dropped = len(dynamo_generic.outputs) - len(keep)
    ev = Evidence(value, sources, dynamo_generic.fingerprint(), aot, str(k.compile_id), proved,
                  hints=sum(k.questions.heuristic_hints.values()) if k.questions is not None else 0,
                  dropped_outputs=dropped, restrided=tuple(relaid),
                  install=((line,) if line is not None else ()) + proved.install,
                  from_cache=k.cache_key is not None, candidate=k.candidate, raised=raised)
    install(env, list(ev.install))
    return calling.calling(k.compiled, args, keep if dropped else None), ev


def _same_global_state(k: Kept, tx: Trace) -> None:
    """The generic artifact was lowered under the new trace's global state (Dynamo's guard on
    it, which a lowering reads: docs/compile.md); else refused."""
    now = global_state(tx)
    if k.global_state is None or now is None:
        raise NotWidened("this torch's Dynamo keeps no global-state guard: the generic artifact's global state is unknown")
    if now != k.global_state:
        before, after = json.loads(k.global_state), json.loads(now)
        differ = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
        raise NotWidened(f"the generic artifact was compiled under another global state ({', '.join(differ)})")


def _same_graph(generic: Canon, here: Canon, what: str) -> tuple[int, ...]:
    """The generic graph's outputs the new graph returns too; refused where the graphs differ."""
    keep = returned_sizes(generic, here)
    if keep is None:
        raise NotWidened(f"the {what} differs from the generic graph{first_difference(generic, here)}")
    return keep


def _same_aot_graph(k: Kept, env: ShapeEnv, gm: torch.fx.GraphModule, example_inputs: Any, binding: Binding,
                    renames: tuple[Rename, Rename], positions: frozenset[int], what: str, proved: AtOne) -> str | None:
    """The new trace's AOT inference graph (traced, never lowered) equals the kept one: its
    fingerprint (None: no AOT graph).  A verdict (:mod:`verishape.compiler.widen.verdict`) answers
    it untraced; one that held adding no fact to the env is filed.  Where ``proved`` stood in for it, no
    trace is made (Note [A candidate's answers stand in for its AOT trace]); filed unless it carries a guard."""
    if not k.has_aot:
        return None
    aot_kwargs = _without_specializations(k.aot_kwargs or {})
    trace_key = verdict.key(k, env, gm, aot_kwargs, binding, positions)
    if (found := verdict.lookup(k, trace_key)) is not None:
        return found
    kept_aot = k.aot_graph()
    if positions and len(_tensors(kept_aot)) != len(_tensors(k.dynamo)):
        raise NotWidened("the AOT graph's tensor inputs are not the Dynamo graph's: an input's layout is not widened")
    aot_generic = canonical(kept_aot, renames[0], positions)
    added = bool(proved.install)
    if proved.unguarded is None:
        before = facts(env)
        _same_graph(aot_generic, _aot_inference_graph(gm, example_inputs, aot_kwargs, renames[1], positions),
                    f"AOT graph {what}")
        added = facts(env) != before
    if not added:
        verdict.remember(k, trace_key, aot_generic.fingerprint())
    return aot_generic.fingerprint()


def _tensor_positions(graph: Any, names: list[str]) -> frozenset[int]:
    """The positions, among the graph's tensor placeholders, of those bound to ``names``."""
    out = frozenset(i for i, node in enumerate(_tensors(graph))
                    if (src := placeholder_source(node)) is not None and src.name in names)
    if len(out) != len(names):
        raise NotWidened("an input in another layout is not a tensor argument of the graph")
    return out


def _tensors(graph: Any) -> list[Any]:
    return [n for n in graph.graph.find_nodes(op="placeholder") if isinstance(value_of(n), torch.Tensor)]


def _aot_inference_graph(gm: torch.fx.GraphModule, example_inputs: Any, aot_kwargs: dict[str, Any],
                         rename: Rename, relaid: frozenset[int] = frozenset()) -> Canon:
    """``gm``'s AOTAutograd inference graph under ``aot_kwargs``, canonical; traced, never lowered."""
    def read(fw: torch.fx.GraphModule) -> Canon:
        if relaid and reads_layout(fw):
            raise NotWidened("an op of the AOT graph reads its input's layout: an input's layout is not widened")
        return canonical(fw, rename, relaid)

    return aot_inference_graph(gm, example_inputs, aot_kwargs, read, "the size-1 trace needs autograd (training graph)",
                               "the size-1 trace produced no AOT inference graph")


#: Inductor decompositions that turn a matrix product into pointwise work (``bmm`` into a multiply
#: and a sum) where a dimension is statically 1, and otherwise keep the op (``NotImplemented``)
SIZE_ONE_SPECIALIZATIONS = ("bmm", "mm", "addmm", "baddbmm")


def _without_specializations(aot_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The generic AOT options less :data:`SIZE_ONE_SPECIALIZATIONS`, for the size-1 trace (compared,
    never lowered).  Sound: a decomposition preserves what the op computes, so a generic AOT graph
    equal to the size-1 trace under any table computes what the program does at 1; the op kept is
    what those decompositions' generic branch keeps, and one the generic trace decomposed differs."""
    table = aot_kwargs.get("decompositions")
    if not table:
        return aot_kwargs
    kept = {op: fn for op, fn in table.items()
            if getattr(getattr(op, "overloadpacket", None), "__name__", None) not in SIZE_ONE_SPECIALIZATIONS}
    return {**aot_kwargs, "decompositions": kept}


def _canon_inputs(inputs: dict[str, Any], c: Canonicalizer) -> dict[str, Any]:
    """Every tracked input's sizes, strides and storage offset, canonical: equal on both sides, the
    artifact sees the tensors it was traced with.  A view's ``_base`` is left out: the graph reads
    the view (a graph taking the base has it as a placeholder, compared with the graphs)."""
    return {name: ("tensor", c.scalar(fake.shape), c.scalar(fake.stride()), c.number(fake.storage_offset()))
            if isinstance(fake, torch.Tensor) else c.scalar(fake) if is_size_only(fake) else type(fake).__name__
            for name, fake in inputs.items() if not (name.endswith("._base") and name[:-len("._base")] in inputs)}


def _not_checked(generic: frozenset[tuple[str, str]], here: frozenset[tuple[str, str]]) -> set[tuple[str, str]]:
    """The generic frame's non-shape guards the new trace does not check.  A ``TYPE_MATCH`` is
    checked by a ``TENSOR_MATCH`` (exact type first: ``Py_TYPE(value) != pytype`` in
    ``torch/csrc/dynamo/guards.cpp``) or a value guard (a float ``4.0`` or an ``int`` subclass fails one on ``4``)."""
    return {(name, kind) for name, kind in generic - here
            if not (kind == "TYPE_MATCH" and any((name, k) in here for k in ("TENSOR_MATCH", *_VALUE_GUARDS)))}


def _refuse_if_excluded(env: ShapeEnv, symbols: Group) -> None:
    """Refused where a generic guard is False at 1 (before any graph is compared)."""
    sub = {s: sympy.Integer(1) for s in merged_group(env, symbols)}
    for g in env.guards:
        if at_one(env.replace(g.expr), sub, f"the generic frame's guard {env.replace(g.expr)}") is sympy.false:
            sloc = getattr(g, "sloc", None)
            raise NotWidened(f"the generic frame's guard {env.replace(g.expr)} excludes 1 (added at "
                             f"{str(sloc).strip()[:120] if sloc is not None else '?'})")
