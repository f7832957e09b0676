"""Specialization equivalence: prove a dynamic graph valid at the size 1 its guards exclude.

Dynamo gives every backed input size a range ``[2, oo)`` (0/1 specialization), so the
graph compiled for batch 2 is never reused for batch 1.  The generic graph often
computes exactly what a batch-1 trace computes; answers to single shape questions differ
(``Eq(s, 1)`` is False in one, True in the other) while the graph does not.  So the proof
is made at the level of the frame:

1. While the user's backend compiles the generic graph (:func:`recording`), the
   AOTAutograd inference graph it lowers is captured in canonical form
   (:func:`canonical`), and the lowering (Inductor) runs with the symbol's range already
   widened to ``[1, upper]``: every static answer it acts on is then valid at 1 by
   construction, and any guard it needs lands in the frame's guard list.
2. The frame is traced again at the excluded value (:func:`trace_at`): a *copy* of the
   frame's code object (Dynamo's cache for the user's code is untouched), its inputs with
   every dimension bound to the symbol narrowed to 1, the other dimensions dynamic as in
   the generic compile.  A capturing backend records the Dynamo graph and replays the
   backend's own AOTAutograd call (same decompositions and options) with recording
   compilers; nothing is lowered and the graph never runs.
3. :func:`check_after_backend` and :func:`finish` compare: Dynamo and AOT graphs node for node after substituting the
   symbol (size-only nodes replaced by their value, see :func:`canonical`), the sizes and
   strides of every input, the output bytecode Dynamo generated around the graph, the
   non-shape guards, and proves with the solver that the generic shape guards at 1 imply
   the size-1 trace's shape guards.  Any difference, unknown or error: no widening.
4. :class:`verishape.shape_env.VeriShapeEnv` produces the frame's guards with the range
   widened, inside a scope that restores itself (guard minimization then runs under the
   widened range too), and logs the proof as a ``specialization_widened`` record.

Several candidates are proved corner by corner (:func:`groups_to_try`, :func:`choose`): each
alone at 1 with the others ``>= 2``, and every larger subset at 1 together; only a set whose
every non-empty subset is proved is widened, so the region the widened guards admit is the
union of the generic one and of the proved corners.

Only eligible symbols are tried: backed, bound to an input tensor size, range exactly
``[2, upper]`` and not replaced.  Only the backends whose pipeline is known are used:
``eager`` (runs the Dynamo graph), ``aot_eager`` and ``inductor`` (inference graphs).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import sympy
import torch
from torch.utils._sympy.value_ranges import ValueRanges

from .canon import (
    Canon,
    Canonicalizer,
    NotWidened,
    bytecode,
    canonical,
    first_difference,
    is_size_only,
)
from .narrow_trace import trace_at

log = logging.getLogger("verishape")

#: backends whose compile pipeline this module knows (see the module docstring)
KNOWN_BACKENDS = ("eager", "aot_eager", "inductor")
_AOT_BACKENDS = ("aot_eager", "inductor")


# ---------------------------------------------------------------------------- symbols and sources


def merged_into(env: Any, symbol: sympy.Symbol) -> list[sympy.Symbol]:
    """``symbol`` and every symbol torch replaced by it: one size under several names.
    On a Hugging Face model ``input_ids`` and ``attention_mask`` get a batch symbol each
    and a guard equates them (``s52 -> s92``): both inputs are that size, so both are
    narrowed together and neither may stay a symbol of its own in the comparison."""
    merged = sorted((s for s, r in env.replacements.items() if r == symbol and s != symbol), key=str)
    return [symbol, *merged]


#: symbols narrowed to 1 together in one size-1 trace (sorted by first source name)
Group = tuple[sympy.Symbol, ...]
#: joint traces are made for at most this many candidate symbols (2**n - 1 traces in all)
MAX_JOINT = 3


def as_group(symbols: sympy.Symbol | Group) -> Group:
    return symbols if isinstance(symbols, tuple) else (symbols,)


def merged_group(env: Any, symbols: sympy.Symbol | Group) -> set[sympy.Symbol]:
    """Every generic symbol that takes the narrowed value: the group's and those torch
    replaced by them."""
    return {m for s in as_group(symbols) for m in merged_into(env, s)}


def groups_to_try(env: Any, symbols: list[sympy.Symbol]) -> list[Group]:
    """Each candidate alone, then (for up to :data:`MAX_JOINT` candidates) every larger
    subset: a batch-1 call sets all of them to 1 at once.  Hugging Face models give
    ``input_ids`` and ``attention_mask`` a batch symbol each that nothing equates; the
    widened region ``[1, oo)**n`` is covered only if every corner where some of them are
    1 and the rest ``>= 2`` is proved."""
    ordered = sorted(symbols, key=lambda s: (source_names(env, s), str(s)))
    out: list[Group] = [(s,) for s in ordered]
    if 2 <= len(ordered) <= MAX_JOINT:
        for k in range(2, len(ordered) + 1):
            out += list(itertools.combinations(ordered, k))
    return out


def group_name(env: Any, group: Group) -> str:
    names = [(source_names(env, s) or [str(s)])[0] for s in group]
    return names[0] + (f" (with {', '.join(names[1:])} at 1 too)" if len(names) > 1 else "")


def bound_sources(env: Any, symbol: sympy.Symbol) -> list[Any]:
    """The input sources whose value is ``symbol`` (its own and those of the symbols
    replaced by it)."""
    return [src for s in merged_into(env, symbol) for src in env.var_to_sources.get(s, ())]


def source_names(env: Any, symbol: sympy.Symbol) -> list[str]:
    return [s.name for s in bound_sources(env, symbol)]


def eligible(env: Any) -> dict[sympy.Symbol, ValueRanges]:
    """Symbols of ``env`` whose lower bound 2 may come from 0/1 specialization: backed,
    bound only to input tensor sizes, range ``[2, upper]``, not replaced."""
    from torch._dynamo.source import TensorProperty, TensorPropertySource

    out = {}
    for symbol in env.var_to_sources:
        vr = env.var_to_range.get(symbol)
        if vr is None or vr.lower != 2 or symbol in env.replacements or symbol not in env.backed_var_to_val:
            continue
        sources = bound_sources(env, symbol)
        if sources and all(isinstance(s, TensorPropertySource) and s.prop is TensorProperty.SIZE for s in sources):
            out[symbol] = vr
    return out


# ---------------------------------------------------------------------------- recording the generic compile


@dataclasses.dataclass
class Plan:
    """What the generic compile left for guard production: per symbol the evidence, or
    why not."""

    output_graph: Any
    evidence: dict[Group, Any] = dataclasses.field(default_factory=dict)
    refused: dict[Group, str] = dataclasses.field(default_factory=dict)
    finished: bool = False
    #: the symbols widened: every non-empty subset of them has a proof
    chosen: tuple[sympy.Symbol, ...] = ()

    def lowers(self, env: Any, prover: Any) -> dict[sympy.Symbol, int]:
        """Called by the env when it produces guards: the lower bound each proved symbol
        may take.  The first call finishes the proof and writes the evidence (and every
        refusal, with its reason) to the env's decision log."""
        first = not self.finished
        proved = finish(env, self, prover)
        if first:
            log_ = env.verishape_log
            for group, ev in proved.items():
                if set(group) <= set(self.chosen):
                    log_.widened.append(ev)
                    if ev.proof is not None:
                        log_.add(ev.proof)
                else:
                    why = "proved, but not every subset of the sizes it sets to 1 together was (see the other reasons)"
                    log_.not_widened.append((group_name(env, group), why))
            for group, why in self.refused.items():
                log_.not_widened.append((group_name(env, group), why))
        return {s: 1 for s in self.chosen}


@dataclasses.dataclass
class _Recording:
    env: Any
    lowers: dict[sympy.Symbol, int]
    groups: list[Group] = dataclasses.field(default_factory=list)
    aot_graphs: list[Any] = dataclasses.field(default_factory=list)
    aot_kwargs: dict[str, Any] | None = None
    aot_calls: int = 0
    dynamo_graphs: dict[Group, Canon | str] = dataclasses.field(default_factory=dict)


_recording: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar("verishape_widen_rec", default=None)


def observe_aot(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Called by the backend's ``aot_module_simplified`` hook: while a generic compile is
    recorded, keep the call's options and wrap its inference compiler so that the graph
    it receives is captured and lowered with the widened ranges."""
    rec = _recording.get()
    if rec is None:
        return kwargs
    rec.aot_calls += 1
    rec.aot_kwargs = {k: v for k, v in kwargs.items() if k not in ("fw_compiler", "bw_compiler", "inference_compiler")}
    inner = kwargs.get("inference_compiler") or kwargs["fw_compiler"]

    def record_then_compile(gm: torch.fx.GraphModule, example_inputs: Any, *args: Any, **kw: Any) -> Any:
        rec.aot_graphs.append(_generic_canon(rec.env, gm, rec.groups))  # before lowering rewrites gm
        with rec.env._ranges_widened(rec.lowers):
            return inner(gm, example_inputs, *args, **kw)

    out = dict(kwargs)
    out["inference_compiler"] = _same_kind(inner, record_then_compile)
    return out


def _same_kind(original: Any, fn: Callable[..., Any]) -> Any:
    """``fn`` wrapped like ``original`` (AOTAutograd treats its serializable compilers
    specially)."""
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    if isinstance(original, SerializableAOTDispatchCompiler):
        return SerializableAOTDispatchCompiler(original.output_code_ty, fn)
    return fn


def _generic_canon(env: Any, gm: torch.fx.GraphModule, groups: list[Group]) -> dict[Group, Canon | str]:
    """The generic graph's canonical form with each group's symbols substituted by 1 (one
    per group: each is proved on its own)."""
    out: dict[Group, Canon | str] = {}
    for group in groups:
        try:
            out[group] = canonical(gm, _generic_rename(env, group, 1))
        except NotWidened as exc:
            out[group] = str(exc)
    return out


def _generic_rename(env: Any, symbols: sympy.Symbol | Group, value: int) -> Callable[[sympy.Symbol], sympy.Basic]:
    merged = merged_group(env, symbols)

    def rename(s: sympy.Symbol) -> sympy.Basic:
        if s in merged:
            return sympy.Integer(value)
        names = source_names(env, s)
        if not names:
            raise NotWidened(f"symbol {s} has no input source")
        return sympy.Symbol(names[0], integer=True)
    return rename


def _nested_rename(env: Any, to_generic_name: dict[str, str]) -> Callable[[sympy.Symbol], sympy.Basic]:
    def rename(s: sympy.Symbol) -> sympy.Basic:
        names = source_names(env, s)
        if not names or names[0] not in to_generic_name:
            raise NotWidened(f"symbol {s} of the size-1 trace has no matching input source")
        return sympy.Symbol(to_generic_name[names[0]], integer=True)
    return rename


@contextlib.contextmanager
def recording(env: Any, backend_name: str, gm: torch.fx.GraphModule) -> Iterator[_Recording | None]:
    """Around the user's backend call of a generic compile: record what
    :func:`check_after_backend` needs (the Dynamo graph ``gm`` is canonicalized now,
    before a backend's passes can rewrite it).  Yields None when there is nothing to
    widen in this frame."""
    lowers = {s: 1 for s in eligible(env)} if backend_name in KNOWN_BACKENDS else {}
    if not lowers:
        yield None
        return
    rec = _Recording(env, lowers, groups_to_try(env, list(lowers)))
    rec.dynamo_graphs = _generic_canon(env, gm, rec.groups)
    token = _recording.set(rec)
    try:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            yield rec
    finally:
        _recording.reset(token)


# ---------------------------------------------------------------------------- the proof


@dataclasses.dataclass
class Evidence:
    """What proves ``symbol`` may take ``value``: fingerprints of the compared graphs,
    the guards checked and the solver's proof that the generic guards imply them."""

    symbol: Group
    value: int
    sources: list[str]
    dynamo: str
    aot: str | None
    bytecode: str
    shape_guards: list[sympy.Basic]
    proof: Any = None
    time_s: float = 0.0

    def describe(self, timed: bool = True) -> str:
        graphs = f"dynamo graph {self.dynamo}" + (f", aot graph {self.aot}" if self.aot else "")
        together = f" (proved with {len(self.symbol) - 1} more size(s) at {self.value} too)" if len(self.symbol) > 1 else ""
        return (f"{self.sources[0]} widened to admit {self.value}{together}: size-{self.value} trace equals the generic graph "
                f"({graphs}, bytecode {self.bytecode}); {len(self.shape_guards)} shape guard(s) of that trace "
                f"implied" + (f"; {self.time_s * 1e3:.0f} ms" if timed else ""))


def check_after_backend(rec: _Recording, tx: Any, dynamo_gm: torch.fx.GraphModule, backend_name: str,
                        dynamic: bool | None) -> Plan:
    """Right after the user's backend compiled the generic graph: trace each candidate
    at 1 and compare the graphs.  What needs the finished frame (bytecode, guards) is
    compared by :func:`finish`, when guards are produced."""
    plan = Plan(tx.output)
    env = rec.env
    for group in rec.groups:
        if len(group) > 1 and not all((s,) in plan.evidence for s in group):
            continue  # a member cannot be widened alone: the joint corner would widen nothing
        start = time.perf_counter()
        try:
            found = _compare_graphs(rec, tx, env, dynamo_gm, group, 1, backend_name, dynamic)
            plan.evidence[group] = (*found, time.perf_counter() - start)
        except NotWidened as exc:
            plan.refused[group] = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported as a refusal and logged; the compile goes on stock
            log.warning("verishape: the size-1 trace of %s failed, not widened: %r", group, exc)
            plan.refused[group] = f"the size-1 trace failed: {exc!r}"[:300]
    return plan


def _compare_graphs(rec: _Recording, tx: Any, env: Any, dynamo_gm: torch.fx.GraphModule, symbol: Group,
                    value: int, backend_name: str, dynamic: bool | None) -> Any:
    _refuse_if_excluded(env, symbol, value)
    aot_generic: Canon | None = None
    if backend_name in _AOT_BACKENDS:
        if rec.aot_calls != 1 or len(rec.aot_graphs) != 1:
            raise NotWidened("no AOTAutograd inference graph was compiled (training graph, or a cache hit)")
        got = rec.aot_graphs[0][symbol]
        if isinstance(got, str):
            raise NotWidened(got)
        aot_generic = got
    dynamo_generic = rec.dynamo_graphs[symbol]
    if isinstance(dynamo_generic, str):
        raise NotWidened(dynamo_generic)
    narrowed = [src for s in as_group(symbol) for src in bound_sources(env, s)]
    generic_names = _generic_names(env, symbol)
    cap = trace_at(tx, narrowed, value, rec.aot_kwargs if aot_generic is not None else None, dynamic,
                   lambda nested_env: _nested_rename(nested_env, generic_names), dynamo_generic)
    if cap.error:
        raise NotWidened(cap.error)
    if cap.graphs != 1:
        raise NotWidened(f"the size-{value} trace compiled {cap.graphs} graphs")
    nested_env = cap.output_graph.shape_env
    names = _match_symbols(env, symbol, nested_env)
    rename = _nested_rename(nested_env, names)
    if cap.dynamo_gm != dynamo_generic:
        raise NotWidened(f"the Dynamo graph at size {value} differs from the generic graph"
                         f"{first_difference(dynamo_generic, cap.dynamo_gm)}")
    aot_fp = None
    if aot_generic is not None:
        if cap.aot_gm is None:
            raise NotWidened(f"the size-{value} trace produced no AOT inference graph")
        if cap.aot_gm != aot_generic:
            raise NotWidened(f"the AOT graph at size {value} differs from the generic graph"
                             f"{first_difference(aot_generic, cap.aot_gm)}")
        aot_fp = aot_generic.fingerprint()
    _compare_inputs(tx.output, env, symbol, value, cap.output_graph, rename)
    return (dynamo_generic.fingerprint(), aot_fp, cap, names)


def _match_symbols(env: Any, symbol: Group, nested_env: Any) -> dict[str, str]:
    """Source name of each size-1 symbol -> the generic symbol's first source name.

    The two traces must bind the same sources to symbols (``symbol``'s sources aside:
    they are constants at size 1), and each size-1 symbol's sources must lie within one
    generic symbol's: the size-1 trace may keep apart sizes the generic trace made one
    symbol (duck sizing; the generic guards that install the widened range check their
    equality), never the reverse (a size-1 trace that equated two sizes assumed an
    equality no installed guard checks)."""
    merged = merged_group(env, symbol)
    generic_groups = {frozenset(source_names(env, s)) for s in env.var_to_sources if s not in merged}
    generic_groups.discard(frozenset())
    nested_groups = {frozenset(source_names(nested_env, s)) for s in nested_env.var_to_sources}
    nested_groups.discard(frozenset())
    covered = frozenset().union(*generic_groups) if generic_groups else frozenset()
    nested_covered = frozenset().union(*nested_groups) if nested_groups else frozenset()
    if covered != nested_covered:
        differ = sorted(covered ^ nested_covered)
        raise NotWidened(f"the size-1 trace binds other input sizes to symbols differently ({differ[:3]})")
    for group in nested_groups:
        if not any(group <= g for g in generic_groups):
            raise NotWidened(f"the size-1 trace makes one symbol of sizes the generic trace keeps apart "
                             f"({sorted(group)[:3]})")
    return _generic_names(env, symbol)


def _generic_names(env: Any, symbol: sympy.Symbol | Group) -> dict[str, str]:
    """Each source name of a generic symbol outside ``symbol`` (a group) -> that symbol's
    first source name (the canonical name both traces' symbols are renamed to)."""
    out = {}
    merged = merged_group(env, symbol)
    # replaced symbols first, so that a source listed under the symbol that replaced it
    # maps to that symbol's name
    for s in sorted(env.var_to_sources, key=lambda s: (s not in env.replacements, str(s))):
        names = source_names(env, s)
        if s not in merged and names:
            for n in names:
                out[n] = names[0]
    return out


def _compare_inputs(generic_graph: Any, env: Any, symbol: Group, value: int, nested_graph: Any,
                    rename: Callable[[sympy.Symbol], sympy.Basic]) -> None:
    """Sizes, strides and storage offset of every tracked input agree after
    substitution: then Dynamo's input checks (tensor match, stride guards) are the same."""
    generic = _canon_inputs(generic_graph, Canonicalizer(_generic_rename(env, symbol, value)))
    nested = _canon_inputs(nested_graph, Canonicalizer(rename))
    if generic != nested:
        raise NotWidened(f"input sizes or strides at size {value} differ from the generic trace")


def _canon_inputs(output_graph: Any, c: Canonicalizer) -> dict[str, Any]:
    out = {}
    for tf in output_graph.tracked_fakes:
        if isinstance(tf.fake, torch.Tensor):
            t = tf.fake
            out[tf.source.name] = (c.scalar(t.shape), c.scalar(t.stride()), c.number(t.storage_offset()))
        else:
            out[tf.source.name] = c.scalar(tf.fake) if is_size_only(tf.fake) else type(tf.fake).__name__
    return out


def _guard_keys(output_graph: Any) -> set[tuple[str, str]]:
    out = set()
    for g in output_graph.guards:
        fn = g.create_fn
        kind = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", repr(fn))
        if kind != "SHAPE_ENV":
            out.add((g.name, kind))
    return out


def finish(env: Any, plan: Plan, prover: Any) -> dict[sympy.Symbol, Evidence]:
    """At guard production: compare the bytecode and non-shape guards of both frames and
    prove the shape guards.  Returns the symbols proved, with their evidence; each
    refusal is kept in ``plan.refused``."""
    proved: dict[sympy.Symbol, Evidence] = {}
    if plan.finished:
        return {s: e for s, e in plan.evidence.items() if isinstance(e, Evidence)}
    plan.finished = True
    generic_code = bytecode(plan.output_graph)
    generic_guards = _guard_keys(plan.output_graph)
    # Each group's proof assumes the other candidates in their generic ranges (>= 2): the
    # widened region is then covered corner by corner, and only a set of symbols whose
    # every non-empty subset is proved is widened (:func:`choose`).
    for symbol, found in list(plan.evidence.items()):
        start = time.perf_counter()
        try:
            dynamo_fp, aot_fp, cap, names, traced_s = found
            nested = cap.output_graph
            if bytecode(nested) != generic_code:
                raise NotWidened("the code Dynamo generated around the graph differs at size 1")
            missing = _guard_keys(nested) - generic_guards
            if missing:
                raise NotWidened(f"the size-1 trace has guards the generic one lacks: {sorted(missing)[:3]}")
            ev = Evidence(symbol, 1, [n for s in symbol for n in source_names(env, s)], dynamo_fp, aot_fp,
                          hashlib.sha256(repr(generic_code).encode()).hexdigest()[:16], [])
            ev.proof = _prove_guards(env, symbol, 1, nested.shape_env, names, prover, ev)
            ev.time_s = time.perf_counter() - start + traced_s
            proved[symbol] = ev
            plan.evidence[symbol] = ev
        except NotWidened as exc:
            plan.refused[symbol] = str(exc)
            del plan.evidence[symbol]
        except Exception as exc:  # noqa: BLE001 - reported as a refusal and logged; stock guards installed
            log.warning("verishape: proving the widening of %s failed, not widened: %r", symbol, exc)
            plan.refused[symbol] = f"the proof failed: {exc!r}"[:300]
            del plan.evidence[symbol]
    plan.output_graph = None  # the frames' graphs are no longer needed; keep only the evidence
    plan.chosen = choose(env, list(proved))
    return proved


def choose(env: Any, proved: list[Group]) -> tuple[sympy.Symbol, ...]:
    """The largest set of symbols (ties: earliest by source name) whose every non-empty
    subset was proved: its widened region is the union of the generic one and of one
    proved corner per subset set to 1 (the rest of the set ``>= 2``)."""
    done = {frozenset(g) for g in proved}
    singles = sorted({s for g in proved if len(g) == 1 for s in g}, key=lambda s: (source_names(env, s), str(s)))
    for k in range(len(singles), 0, -1):
        for subset in itertools.combinations(singles, k):
            if all(frozenset(c) in done for j in range(1, k + 1) for c in itertools.combinations(subset, j)):
                return subset
    return ()


def _refuse_if_excluded(env: Any, symbol: sympy.Symbol | Group, value: int) -> None:
    """A guard that is False at ``symbol = value`` makes widening pointless (checked
    before the costly size-1 trace, and again when guards are produced)."""
    sub = {s: sympy.Integer(value) for s in as_group(symbol)}
    for g in env.guards:
        if env.replace(g.expr).xreplace(sub) is sympy.false:
            raise NotWidened(f"the generic frame's guard {env.replace(g.expr)} excludes {value} (added at "
                             f"{_where(g)}; guards added while lowering were asked with the range widened)")


def _where(guard: Any) -> str:
    sloc = getattr(guard, "sloc", None)
    return str(sloc).strip()[:120] if sloc is not None else "?"


def _prove_guards(env: Any, symbol: Group, value: int, nested_env: Any, names: dict[str, str],
                  prover: Any, ev: Evidence) -> Any:
    """Prove: generic guards at ``symbol = value`` (every symbol of the group) and the
    generic ranges of the other input symbols imply the size-1 trace's guards and ranges (its symbols renamed to the
    generic ones by source)."""
    from verishape.proofs import Obligation, ProofRecord

    from verishape import facts

    by_name = {}
    # replaced symbols first: a source also listed under the symbol that replaced it maps
    # to that symbol, the one the premises (``env.replace``) are written in
    for s in sorted(env.var_to_sources, key=lambda s: (s not in env.replacements, str(s))):
        for n in source_names(env, s):
            by_name[n] = s
    to_generic = {}
    for s in nested_env.var_to_sources:
        ns = source_names(nested_env, s)
        if ns:
            to_generic[s] = by_name[names[ns[0]]]
    merged = merged_group(env, symbol)
    sub = {s: sympy.Integer(value) for s in symbol}
    _refuse_if_excluded(env, symbol, value)
    premises = [env.replace(g.expr).xreplace(sub) for g in env.guards]
    goals = [nested_env.replace(g.expr).xreplace(to_generic) for g in nested_env.guards]
    nested_ranges = {to_generic[s]: vr for s, vr in nested_env.var_to_range.items() if s in to_generic}
    goals += facts.range_facts(nested_ranges.keys(), nested_ranges)
    others = {s: vr for s, vr in env.var_to_range.items() if s not in merged and env.var_to_sources.get(s)}
    premises += facts.range_facts(others.keys(), others)
    premises = [p for p in premises if p is not sympy.true]
    goals = [g for g in goals if g is not sympy.true]
    ev.shape_guards = goals
    goal = sympy.And(*goals) if goals else sympy.true
    if goal is sympy.true:
        result = None
    else:
        to_plain = facts.plain_symbols([goal, *premises], None) or {}
        hints = {to_plain.get(s, s): int(v) for s, v in env.backed_var_to_val.items() if s not in merged}
        result = prover.prove(goal.xreplace(to_plain), [p.xreplace(to_plain) for p in premises], witness=hints)
        from verishape import solvers
        if result.status != solvers.PROVED or result.vacuous:
            raise NotWidened(f"could not prove the size-1 trace's shape guards from the generic ones ({result.status})")
        return ProofRecord(Obligation(goal.xreplace(to_plain), tuple(p.xreplace(to_plain) for p in premises),
                                      "specialization_widened", ev.describe(timed=False)), result, True)
    return None
