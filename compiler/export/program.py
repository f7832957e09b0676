"""``verishape.export``: ``torch.export.export`` with VeriShapeEnv as every ShapeEnv it builds.

The export itself is stock: the same call, the same passes, a plain ``ExportedProgram``.
What changes is who answers shape questions while it traces.  Non-strict export builds its
ShapeEnv for the fake inputs in ``torch._export.non_strict_utils``; strict export builds it
in Dynamo's ``OutputGraph``; both then re-trace to ATen with the same env (the fake mode
is detected from the traced graph).  :func:`verishape.compiler.frames.exporting` makes each of those
sites build an :class:`ExportShapeEnv` (a :class:`VeriShapeEnv` whose premises are what an
exported program checks) for this call, on this thread, and nothing else.

The artifact carries nothing of verishape (no attribute, no custom op): the decisions are
kept here, in a weak mapping from the ExportedProgram to its env, so saving, loading,
``run_decompositions`` and AOTInductor see a stock program.

Guard minimization is off inside an export: an exported program installs no guard list
(its checks are the range constraints and the runtime asserts), and stock's constraint
checks in ``produce_guards`` must see stock's own guards to report what stock reports.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import sympy
import torch
from torch._dynamo.source import TensorProperty, TensorPropertySource
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.symbol import SymT, symbol_is_type
from torch.utils._sympy.value_ranges import ValueRanges

from verishape.core import locations, sources
from verishape.core.decisions import DecisionLog
from verishape.core.premises import Premises, finite, relevant
from verishape.core.shape_env import ExtraFacts, VeriShapeEnv, guard_minimization

from .. import frames
from . import checks as export_checks, reasons as export_reasons

log = logging.getLogger("verishape")


class ExportShapeEnv(VeriShapeEnv):
    """The VeriShapeEnv of one export: premises are only what the exported program checks.

    A compiled frame installs its guards, including the ``2 <= s`` of 0/1 specialization;
    an exported program installs none, and checks of its inputs only what
    :mod:`verishape.compiler.export.checks` measured (an AOTInductor package: nothing).  Its
    checks are the runtime asserts in its graph (deferred asserts, and the range asserts
    emitted where an unbacked symbol is bound), and the graph checks ``verishape.export``
    adds.  So here:

    * the env's guards are no premises, unless checked (below);
    * a backed tensor size is known to be >= 0, and within its named ``Dim``'s declared
      ``min``/``max`` (``verishape.export`` checks every declared bound in the graph); any
      other backed integer is unbounded;
    * deferred runtime asserts (Note [Asserts see only the past], as in compile) and unbacked ranges stay premises.

    A question about a data-dependent value that these premises leave open is asked once
    more with the traced facts about input sizes that are not declared (the ``>= 2`` of a
    ``Dim.AUTO`` size, a guard between sizes); when that proves it, the fewest of those facts
    the proof needs are kept in :attr:`program_checks`, and ``verishape.export`` checks each
    in the program's graph before the program is handed out.
    """

    replays_data_dependent_errors = False  # its error gets its check from the export's own frame

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: input dimension (source name) -> what the export's ``dynamic_shapes`` declares
        self.verishape_declared: Mapping[str, export_checks.Declared] = _declared_now.get()
        #: facts over input sizes that a proof assumed beyond the declared space -> where
        #: it was asked; each becomes a graph check (see the class docstring)
        self.verishape_program_checks: dict[sympy.Basic, str] = {}

    def _premises(self, goal: sympy.Basic, kind: str, axioms: tuple[sympy.Basic, ...] | None,
                  var_to_range: tuple[tuple[sympy.Symbol, Any], ...] | None,
                  size_oblivious: bool, extra: ExtraFacts | None = None) -> Premises | None:
        if axioms is None:
            axioms = tuple(self._emitted_asserts(goal, kind)) + tuple(self.verishape_program_checks)
        ranges = dict(var_to_range) if var_to_range is not None else dict(self.var_to_range)
        checked = tuple((s, self._checked_range(s, vr)) for s, vr in ranges.items())
        return super()._premises(goal, kind, axioms, checked, size_oblivious, extra)

    def _checked_range(self, symbol: sympy.Symbol, vr: Any) -> Any:
        if getattr(vr, "is_bool", False) or not symbol_is_type(symbol, (SymT.SIZE, SymT.FLOAT)):
            return vr  # unbacked symbols: bound in the graph, their ranges asserted there
        if symbol_is_type(symbol, SymT.FLOAT):
            return ValueRanges.unknown()  # nothing checks a backed float input's range
        declared = self._declared_range(symbol)
        if declared is not None:
            return declared
        return ValueRanges(0 if self._is_tensor_size(symbol) else -int_oo, int_oo)

    def _declared_range(self, symbol: sympy.Symbol) -> Any:
        """The declared range of input size ``symbol`` when its ``Dim`` (or hint) states a
        bound (every such bound is checked in the program's graph), else None."""
        declared = declared_for(self, symbol, self.verishape_declared)
        if declared is None or (declared.low is None and declared.high is None):
            return None
        return ValueRanges(max(declared.low or 0, 0), int_oo if declared.high is None else declared.high)

    def _is_tensor_size(self, symbol: sympy.Symbol) -> bool:
        """A tensor's size or stride (never negative)."""
        return self._sourced_by(symbol, (TensorProperty.SIZE, TensorProperty.STRIDE))

    def _is_input_size(self, symbol: sympy.Symbol) -> bool:
        """An input tensor's size (a graph check can read it with ``sym_size``)."""
        return self._sourced_by(symbol, (TensorProperty.SIZE,))

    def _sourced_by(self, symbol: sympy.Symbol, props: tuple[Any, ...]) -> bool:
        srcs = self.var_to_sources.get(symbol) or []
        return bool(srcs) and all(isinstance(src, TensorPropertySource) and src.prop in props for src in srcs)

    def _source_line(self) -> str | None:
        """As in compile, else the innermost user frame on the Python stack: a non-strict
        export runs the user's code itself, so that frame is the line that asked."""
        return super()._source_line() or locations.python_stack_location()

    # ------------------------------------------------------------------ checked premises

    def _decide(self, expr: sympy.Basic, *, size_oblivious: bool,
                axioms: tuple[sympy.Basic, ...] | None,
                var_to_range: tuple[tuple[sympy.Symbol, Any], ...] | None,
                extra: ExtraFacts | None = None) -> sympy.Basic | None:
        answer = super()._decide(expr, size_oblivious=size_oblivious, axioms=axioms, var_to_range=var_to_range,
                                 extra=extra)
        if answer is not None or axioms is not None or var_to_range is not None or extra is not None:
            return answer
        goal = self.replace(expr)
        if goal.free_symbols <= self.backed_var_to_val.keys():
            return None  # a question about sizes only: stock guards it, as it should
        extra = self._traced_extras(goal)
        if not any(extra):
            return None
        kind = self._kind()
        needed = self._fewest_needed(goal, kind, size_oblivious, extra)
        if needed is None:
            return None
        bounds, guards = needed
        answer = super()._decide(expr, size_oblivious=size_oblivious, axioms=None, var_to_range=None,
                                 extra=ExtraFacts(bounds, guards))
        if answer is not None:
            where = self._source_line() or "where the export asked"
            for fact in [*self._bound_facts(bounds), *guards]:
                self.verishape_program_checks.setdefault(fact, where.strip())
        return answer

    def _traced_extras(self, goal: sympy.Basic) -> tuple[dict[sympy.Symbol, Any], tuple[sympy.Basic, ...]]:
        """The traced facts about undeclared input sizes that a program check could make
        premises: each traced range narrower than the checked one, and each guard over
        input sizes only (of the symbols connected to ``goal``)."""
        guards = [g.expr for g in self.guards
                  if g.expr.free_symbols and all(self._is_input_size(s) for s in g.expr.free_symbols)
                  and export_checks.checkable(g.expr, self._is_input_size)]
        pool = [*self._emitted_asserts(goal, "dde_avoided"), *guards]
        symbols = set(goal.free_symbols).union(*(f.free_symbols for f in relevant(goal, pool)))
        bounds = {}
        for s in symbols:
            if not self._is_input_size(s) or self._declared_range(s) is not None or s not in self.var_to_range:
                continue
            traced, checked = self.var_to_range[s], self._checked_range(s, self.var_to_range[s])
            if traced != checked:
                bounds[s] = traced
        return bounds, tuple(g for g in guards if g.free_symbols & symbols)

    def _fewest_needed(self, goal: sympy.Basic, kind: str, size_oblivious: bool,
                       extra: tuple[dict[sympy.Symbol, Any], tuple[sympy.Basic, ...]],
                       ) -> tuple[dict[sympy.Symbol, Any], tuple[sympy.Basic, ...]] | None:
        """The fewest traced facts (deletion, one proof each; a lower bound of 2 first tried
        as 1) with which the solver decides ``goal``; None when all of them do not."""
        def proves(bounds: dict[sympy.Symbol, Any], guards: tuple[sympy.Basic, ...]) -> bool:
            premises = self._premises(goal, kind, None, None, size_oblivious, ExtraFacts(bounds, guards))
            return premises is not None and any(premises.ask(target, kind) is not None
                                                for _value, target in self._candidates(goal))

        bounds, guards = dict(extra[0]), tuple(extra[1])
        if not proves(bounds, guards):
            return None
        for g in list(guards):
            trial = tuple(x for x in guards if x is not g)
            if proves(bounds, trial):
                guards = trial
        for s in list(bounds):
            checked = self._checked_range(s, bounds[s])
            for weaker in (checked, *_weaker_lower(bounds[s], checked)):
                trial = {**bounds, s: weaker} if weaker is not checked else {k: v for k, v in bounds.items() if k != s}
                if proves(trial, guards):
                    bounds = trial
                    break
        return bounds, guards

    def _bound_facts(self, bounds: Mapping[sympy.Symbol, Any]) -> list[sympy.Basic]:
        out = []
        for s, vr in bounds.items():
            checked = self._checked_range(s, self.var_to_range.get(s, vr))
            if finite(vr.lower) and vr.lower != checked.lower:
                out.append(sympy.Ge(s, vr.lower, evaluate=False))
            if finite(vr.upper) and vr.upper != checked.upper:
                out.append(sympy.Le(s, vr.upper, evaluate=False))
        return out


def _weaker_lower(traced: Any, checked: Any) -> list[Any]:
    """Ranges between the checked and the traced one, weakest first (lower bound 1 before 2)."""
    if not (finite(traced.lower) and finite(checked.lower)):
        return []
    return [ValueRanges(b, traced.upper) for b in range(int(checked.lower) + 1, int(traced.lower))]


#: the declared space of the export running on this thread (ExportShapeEnv reads it when built)
_declared_now: contextvars.ContextVar[Mapping[str, export_checks.Declared]] = contextvars.ContextVar(
    "verishape_export_declared", default={})


def declared_for(env: Any, symbol: sympy.Symbol,
                 declared: Mapping[str, export_checks.Declared]) -> export_checks.Declared | None:
    """What ``declared`` says about input size ``symbol`` (through its sources), or None."""
    for src in env.var_to_sources.get(symbol) or ():
        found = declared.get(sources.source_name(src))
        if found is not None:
            return found
    return None


_envs_lock = threading.Lock()
#: ExportedProgram -> the VeriShapeEnvs its export built (the program's own env last).
_export_envs: weakref.WeakKeyDictionary[ExportedProgram, list[VeriShapeEnv]] = weakref.WeakKeyDictionary()
#: ExportedProgram -> the checks verishape.export added to its graph
_export_checks: weakref.WeakKeyDictionary[ExportedProgram, list[Any]] = weakref.WeakKeyDictionary()


def export(mod: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None, *,
           dynamic_shapes: Any = None, strict: bool = False, preserve_module_call_signature: tuple[str, ...] = (),
           **rest: Any) -> ExportedProgram:
    """A drop-in for :func:`torch.export.export`: same arguments, passed through unchanged;
    returns a plain :class:`torch.export.ExportedProgram`.  Shape questions the export asks
    are decided with proofs where stock gives up; see :func:`export_decisions`."""
    built: list[Any] = []
    declared = export_checks.declared_space(mod, args, kwargs, dynamic_shapes)
    token = _declared_now.set(declared)
    try:
        with frames.exporting(built, ExportShapeEnv), guard_minimization(False):
            try:
                ep = torch.export.export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                                         preserve_module_call_signature=preserve_module_call_signature, **rest)
            except Exception as exc:
                verishape_envs = [e for e in built if isinstance(e, VeriShapeEnv)]
                export_reasons.add_proved_reason(exc, verishape_envs, declared)
                _add_suggestion(exc, verishape_envs, mod, args, kwargs)
                raise
    finally:
        _declared_now.reset(token)
    envs = _ordered_envs(ep, [e for e in built if isinstance(e, VeriShapeEnv)])
    own = envs[-1] if envs and envs[-1] is program_shape_env(ep) else None
    checks = program_checks(ep, own, declared)
    try:
        export_checks.install(ep, checks)
    except export_checks.UncheckableFact as err:
        # Never hand out a program whose premises it does not check.
        raise RuntimeError(f"verishape.export: a fact this export relied on cannot be checked by the "
                           f"exported program ({err}); no program is returned (this is a verishape bug)") from err
    with _envs_lock:
        _export_envs[ep] = envs
        _export_checks[ep] = checks
    return ep


def program_checks(ep: ExportedProgram, env: Any,
                   declared: Mapping[str, export_checks.Declared]) -> list[export_checks.ProgramCheck]:
    """The graph checks ``ep`` needs: every declared bound of an input dimension, then each
    fact a proof of ``env`` assumed (see :class:`ExportShapeEnv`)."""
    if env is None:
        return []
    dims = export_checks.input_dims(ep)
    by_symbol = {s: d for s in dims if (d := declared_for(env, s, declared)) is not None}
    out = export_checks.declared_checks(dims, by_symbol)
    for fact, where in getattr(env, "verishape_program_checks", {}).items():
        out.append(export_checks.ProgramCheck(_replaced(env, fact), "premise",
                                              f"a proof of this export assumed it at {where}"))
    return out


def _replaced(env: Any, fact: sympy.Basic) -> sympy.Basic:
    """``fact`` over the program's symbols (the env's replacements), never evaluated: SymPy
    would fold ``s >= 1`` to True for a positive size symbol and so drop a needed check."""
    if isinstance(fact, sympy.And):
        return sympy.And(*(_replaced(env, a) for a in fact.args), evaluate=False)
    if isinstance(fact, sympy.Rel):
        return type(fact)(env.replace(fact.lhs), env.replace(fact.rhs), evaluate=False)
    return fact


def export_program_checks(ep: ExportedProgram) -> list[export_checks.ProgramCheck]:
    """The checks ``verishape.export`` added to ``ep``'s graph (declared bounds, assumed facts)."""
    export_envs(ep)  # raises for a program verishape.export did not produce
    with _envs_lock:
        return list(_export_checks.get(ep, ()))


def _ordered_envs(ep: ExportedProgram, built: list[VeriShapeEnv]) -> list[VeriShapeEnv]:
    """``built`` with the program's own env (the one its graph's fake values belong to) last."""
    own = program_shape_env(ep)
    return [e for e in built if e is not own] + ([own] if own is not None and any(e is own for e in built) else [])


def program_shape_env(ep: ExportedProgram) -> ShapeEnv | None:
    """The ShapeEnv of ``ep``'s graph (from its fake values: stock's or a VeriShapeEnv), or
    None for a graph without any."""
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"]
    fake_mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    if fake_mode is not None and fake_mode.shape_env is not None:
        return fake_mode.shape_env
    for v in vals:
        if isinstance(v, torch.SymInt):
            return v.node.shape_env
    return None


def export_envs(ep: ExportedProgram) -> list[VeriShapeEnv]:
    """The VeriShapeEnvs ``verishape.export`` built for ``ep``, the program's own env last
    (earlier ones belong to restarted Dynamo analyses of a strict export).  Raises
    TypeError for a program that ``verishape.export`` did not produce in this process."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"expected a torch.export.ExportedProgram, got {type(ep).__name__}")
    with _envs_lock:
        envs = _export_envs.get(ep)
    if envs is None:
        raise TypeError("this ExportedProgram was not produced by verishape.export in this process "
                        "(a loaded or stock-exported program has no proof records)")
    return list(envs)


def export_env(ep: ExportedProgram) -> VeriShapeEnv | None:
    """The program's own VeriShapeEnv (None when its export traced no fake values)."""
    envs = export_envs(ep)
    own = program_shape_env(ep)
    return envs[-1] if envs and envs[-1] is own else None


def export_decisions(ep: ExportedProgram) -> DecisionLog:
    """The decision log of ``ep``'s export: the proof records of the env its graph was traced
    with (an empty log when the export built no ShapeEnv that traced the program)."""
    env = export_env(ep)
    return env.verishape_log if env is not None else DecisionLog()


def _add_suggestion(exc: BaseException, envs: list[VeriShapeEnv], mod: Any, args: tuple[Any, ...],
                    kwargs: Mapping[str, Any] | None) -> None:
    """Name, in a data-dependent error, the proved ``torch._check`` that settles it (see
    :mod:`verishape.compiler.export.suggest`): appended to stock's message, and kept on the error
    as ``verishape_suggestion`` (None when nothing was proved)."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    if not isinstance(exc, GuardOnDataDependentSymNode) or not envs:
        return
    from . import suggest

    try:
        found = suggest.suggest(exc, envs[-1], mod, args, kwargs)
    except Exception as err:  # noqa: BLE001 - a suggestion must never replace stock's error
        log.warning("verishape: could not look for a torch._check that settles this error; stock's error is "
                    "raised unchanged (this is a verishape bug): %r", err)
        return
    exc.verishape_suggestion = found  # type: ignore[attr-defined]
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
    if found is not None and text is not None:
        exc.args = (text + "\n\n" + found.text(), *exc.args[1:])
