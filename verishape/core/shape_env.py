"""``VeriShapeEnv``: torch's ShapeEnv, asking an SMT solver only where stock gives up.

Everything goes through one choke point, ``_maybe_evaluate_static``, which
``evaluate_expr`` (guards and data-dependent errors), ``guard_or_false``/``guard_or_true``,
``guard_or_defer_runtime_assert``, ``statically_known_*`` and Inductor's size queries all
consult.  The override calls stock first; only when stock returns "undecided" for a
boolean does it build a query from facts the artifact really checks and ask the solver
(:class:`verishape.core.premises.Premises`; sizes near the real ones are tried before Z3).
A proof changes the answer; anything else (refuted both ways, unknown, a translation gap,
an exception) returns stock's "undecided", so torch proceeds exactly as it would have.

Arguments keep their stock meaning: ``compute_hint=True`` never reaches the solver (hints
must not depend on proofs); ``unbacked_only=True`` is left to stock (the full query was
already asked with every fact); explicit ``axioms``/``var_to_range`` replace the env's own
facts; ``size_oblivious`` applies stock's size-like assumption.  The final guard filter of
``produce_guards`` (``axioms=()``) is stock's alone here: dropping installed guards needs
an equivalence proof of the whole set, which guard minimization owns.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import sympy
import torch
from torch.fx.experimental.recording import ShapeEnvEvent, record_shapeenv_event
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

import verishape.solvers as solvers
from verishape.proofs.kinds import Asker, Decision

from . import locations, replacement_asserts, torch_seam
from .premises import Premises, Verdict, current_prover, newest_unbacked, unbacked_index, witness_value
from .decisions import DecisionLog
from .minimize import Tightening, has_strict_constraints, without_repeated_lines
from .minimize import minimize as minimize_guards
from .open_questions import OpenQuestions

FEATURES = torch_seam.features()  # refuses, in one line, a torch whose internals moved

log = logging.getLogger("verishape")

_minimize: contextvars.ContextVar[bool] = contextvars.ContextVar("verishape_minimize", default=True)


def minimization_enabled() -> bool:
    return _minimize.get()


@contextlib.contextmanager
def guard_minimization(enabled: bool) -> Iterator[None]:
    """Turn guard minimization on or off inside this block (benchmarks compare both)."""
    token = _minimize.set(enabled)
    try:
        yield
    finally:
        _minimize.reset(token)


_base_static = ShapeEnv._maybe_evaluate_static


class AnswerObserver(Protocol):
    """What :meth:`VeriShapeEnv.observing` shows every answer given without a guard: the
    env, stock's static evaluation (to re-ask at other ranges), the question and answer,
    and the arguments it was asked with."""

    def observe(self, env: ShapeEnv, static: Callable[..., Any], expr: sympy.Basic, answer: sympy.Basic, *,
                size_oblivious: bool, axioms: tuple[sympy.Basic, ...] | None,
                var_to_range: tuple[tuple[sympy.Symbol, Any], ...] | None, fallback: bool | None = None) -> None: ...

    def asked(self, expr: sympy.Basic, fallback: bool | None) -> None: ...  # every evaluate_expr, memo hits too


class SymbolicAtOne(Protocol):
    """What :meth:`VeriShapeEnv.keeping_symbolic_at_one` keeps symbolic at 1 for one trace
    (``verishape.compiler.widen.candidate``'s): sizes by source name, their symbols, and the
    questions answered beyond their ranges (Note [A candidate is never run as traced])."""

    sources: set[str]
    symbols: set[sympy.Symbol]
    defaulted: list[tuple[sympy.Basic, bool]]


@dataclasses.dataclass(frozen=True)
class ExtraFacts:
    """Facts one question is asked under beyond the env's own, passed down with it (never
    stored on the env): ranges that replace the env's for their symbols, and more premises.
    An export re-asks an open question with traced facts this way
    (``verishape.compiler.export.program``)."""

    ranges: Mapping[sympy.Symbol, Any] = dataclasses.field(default_factory=dict)
    facts: tuple[sympy.Basic, ...] = ()


class VeriShapeEnv(ShapeEnv):
    """A ShapeEnv whose undecided boolean questions are sent to Z3; ``verishape_log``
    holds a proof record for every answer the solver changed."""

    #: a data-dependent error raised in a Dynamo trace keeps the frame's inputs (see
    #: :mod:`verishape.compiler.export.compile_dde`); an export finds its check its own way
    replays_data_dependent_errors = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        replacement_asserts.install()  # before stock's init can record a replacement
        super().__init__(*args, **kwargs)
        # verishape's own fields start with ``_vs_`` or ``verishape_``: ``check_equal``
        # leaves them out (they say how decisions were made, not what the env knows).
        self.verishape_log = DecisionLog()
        self._vs_kind: str | tuple[sympy.Basic, bool | None] | None = None  # see _kind
        self._vs_busy = False
        self._vs_minimized: dict[tuple[Any, ...], tuple[list[Any], list[Tightening]]] = {}
        #: shown every static answer inside :meth:`observing` (see :meth:`_maybe_evaluate_static`)
        self._vs_questions: AnswerObserver | None = None
        self._vs_last_open: sympy.Basic | None = None
        self._vs_at_one: SymbolicAtOne | None = None  # inside keeping_symbolic_at_one: kept symbolic at 1
        self._vs_stock_guards = False  # Note [A cache's guards are stock's]
        self._vs_open = OpenQuestions()  # Note [An open question stays open until the env learns]
        self.verishape_budget = solvers.Budget()  # Note [A scope's solver budget]
        if self.events and type(self.events[0]) is ShapeEnvEvent and self.events[0].f is ShapeEnv:
            # Replays (the recorded-events check, translation validation's bisection)
            # rebuild the env from this first event: rebuild this class, so that the
            # replayed questions get the same answers.
            first = self.events[0]
            self.events[0] = _Construction(first.f, first.args, first.kwargs, first.tracked_fakes, first.name,
                                           cls=type(self))

    # ------------------------------------------------------------------ observing

    @contextlib.contextmanager
    def observing(self, observer: AnswerObserver) -> Iterator[None]:
        """Show ``observer`` every answer this env gives without guarding (a static answer,
        stock's or proved) inside the block; the one way to watch an env (widening records
        what a generic compile's lowering decided, ``verishape.compiler.widen.questions``).
        Scopes nest: the outer observer is back after the block."""
        with self._scoped("_vs_questions", observer):
            yield

    @staticmethod
    def observer_of(env: Any) -> AnswerObserver | None:
        """The observer registered on ``env`` now (None for a stock ShapeEnv or outside a scope)."""
        return env._vs_questions if isinstance(env, VeriShapeEnv) else None

    def premises_for(self, goal: sympy.Basic, kind: str) -> Premises | None:
        """The premises this env decides ``goal`` from when asked for ``kind``'s sake (its
        rule: installed guards, the asserts that may serve, ranges; an export's, its checked
        ones), or None when nothing may be decided.  ``verishape.compiler.export.suggest``
        proves its candidate checks over them."""
        return self._premises(goal, Decision.checked(kind), None, None, False)

    @property
    def last_open_question(self) -> sympy.Basic | None:
        """The newest question the solver was asked and torch had left open, over the sizes'
        symbols (a data-dependent error's ``cond`` has each backed size's hint substituted):
        ``verishape.compiler.export.suggest`` matches the error to it."""
        return self._vs_last_open

    # ------------------------------------------------------------------ sizes kept symbolic at 1

    @contextlib.contextmanager
    def keeping_symbolic_at_one(self, kept: SymbolicAtOne) -> Iterator[None]:
        """Inside the block, give each input size named in ``kept.sources`` a symbol even
        where it is 1 (no 0/1 specialization), size-like, whose questions the ranges leave
        open are answered without a guard as a trace generic in it would answer them
        (:meth:`_generic_answer`; torch's global ``backed_size_oblivious`` does much the same
        for every size).  A trace made so is a *candidate*, never run as it is (see
        Note [A candidate is never run as traced]); the scope is the candidate attempt's
        (``verishape.compiler.widen.candidate``), which fills ``kept.sources`` as Dynamo
        wraps the inputs."""
        with self._scoped("_vs_at_one", kept):
            yield

    @contextlib.contextmanager
    def _scoped(self, field: str, value: Any) -> Iterator[None]:
        """One of verishape's own fields set for a block; scopes nest."""
        saved = getattr(self, field)
        setattr(self, field, value)
        try:
            yield
        finally:
            setattr(self, field, saved)

    @staticmethod
    def symbolic_at_one_of(env: Any) -> SymbolicAtOne | None:
        """What ``env`` keeps symbolic at 1 now (None for a stock ShapeEnv or outside a scope)."""
        return env._vs_at_one if isinstance(env, VeriShapeEnv) else None

    def create_symbol(self, val: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        kept = self._vs_at_one
        if kept is not None and val == 1 and getattr(source, "name", None) in kept.sources:
            kwargs["do_not_specialize_zero_one"] = True
            out = super().create_symbol(val, source, *args, **kwargs)
            if isinstance(out, sympy.Symbol):
                kept.symbols.add(out)
                self.size_like.add(out)
            return out
        return super().create_symbol(val, source, *args, **kwargs)

    # ------------------------------------------------------------------ entry points that set the kind

    def evaluate_expr(self, orig_expr: sympy.Basic, hint: Any = None, fx_node: Any = None,
                      size_oblivious: bool = False, fallback_value: bool | None = None,
                      **kwargs: Any) -> sympy.Basic:
        # The kind is worked out only if the solver is asked (:meth:`_kind`): torch calls this tens of thousands of
        # times per compile, mostly answered from its memo in ~2 us (``free_symbols`` alone: ~8 us; a context manager:
        # ~2 us).  An observer is told of every question here: one the memo answers is not shown it below.
        if self._vs_questions is not None:
            self._vs_questions.asked(orig_expr, fallback_value)
        kept = self._vs_at_one
        if kept is not None and kept.symbols and orig_expr.free_symbols & kept.symbols:
            answer = self._generic_answer(kept, orig_expr, fallback_value)
            if answer is not None:
                return answer
        saved, self._vs_kind = self._vs_kind, (orig_expr, fallback_value)
        try:
            return super().evaluate_expr(orig_expr, hint, fx_node, size_oblivious, fallback_value, **kwargs)
        except GuardOnDataDependentSymNode as exc:
            # What a proved check for this error needs, taken while the frame is at hand:
            # the inputs Dynamo entered it with (verishape.compile replays them through a
            # non-strict export once the error reaches the caller; nothing else is done here).
            if self.replays_data_dependent_errors and not hasattr(exc, "verishape_frame_inputs"):
                exc.verishape_frame_inputs = torch_seam.traced_frame_inputs()  # type: ignore[attr-defined]
            raise
        finally:
            self._vs_kind = saved

    def _generic_answer(self, kept: SymbolicAtOne, expr: sympy.Basic, default: bool | None) -> sympy.Basic | None:
        """A question about a size kept symbolic at 1 (a candidate's trace, see
        :meth:`keeping_symbolic_at_one`), answered unguarded as a trace generic in it would
        answer: statically; else assuming its sizes are at least 2 (size-oblivious); else a
        ``guard_or_*`` question's default.  None: a guard on the hint, as stock (such a
        guard may pin the candidate to 1).  An answer that is not static is shown to the
        observer, so that a lowering's such answer is proved where the artifact is reused
        (Note [A candidate is never run as traced]: only a candidate's trace answers so)."""
        saved, self._vs_kind = self._vs_kind, (expr, default)
        try:
            static = self._static_unless_open(expr, default, size_oblivious=False)
            if static is not None:
                return static
            # (a size-oblivious static answer is shown to the observer by the evaluation)
            generic = self._static_unless_open(expr, default, size_oblivious=True)
        finally:
            self._vs_kind = saved
        if generic is not None:
            kept.defaulted.append((expr, bool(generic)))
            return generic
        if default is None:
            return None
        answer = sympy.true if default else sympy.false
        kept.defaulted.append((expr, default))
        if self._vs_questions is not None:
            self._vs_questions.observe(self, _base_static, expr, answer, size_oblivious=False, axioms=None,
                                       var_to_range=None)
        return answer

    def _static_unless_open(self, expr: sympy.Basic, default: bool | None, size_oblivious: bool) -> sympy.Basic | None:
        """The static answer, not asked again where it came back open under the env's
        state now (Note [An open question stays open until the env learns])."""
        if self._vs_open.known_open(self, expr, (default, size_oblivious)):
            return None
        answer = self._maybe_evaluate_static(expr, size_oblivious=size_oblivious)
        if answer is None:
            self._vs_open.note_open(self, expr, (default, size_oblivious))
        return answer

    def _update_var_to_range(self, *args: Any, **kwargs: Any) -> None:
        self._vs_open.narrowings += 1  # Note [An open question stays open until the env learns]
        super()._update_var_to_range(*args, **kwargs)

    # Recorded (as stock records its own) so that a replay asks with the same kind:
    # the kind decides which asserts may serve as premises (Note [Asserts see only the past]).
    @record_shapeenv_event(save_tracked_fakes=True)
    def guard_or_defer_runtime_assert(self, orig_expr: sympy.Basic, msg: str, fx_node: Any = None) -> bool:
        with self._asking(Decision.ASSERT_DISCHARGED):
            return super().guard_or_defer_runtime_assert(orig_expr, msg, fx_node)

    def _set_replacement(self, a: sympy.Symbol, tgt: sympy.Expr, msg: str) -> None:
        """Stock replacement; a data value replaced by a size keeps its runtime check
        (see :mod:`verishape.core.replacement_asserts`)."""
        super()._set_replacement(a, tgt, msg)
        replacement_asserts.note_replacement(self, a, tgt, msg)

    @contextlib.contextmanager
    def _asking(self, kind: str) -> Iterator[None]:
        saved, self._vs_kind = self._vs_kind, kind
        try:
            yield
        finally:
            self._vs_kind = saved

    def _fallback_of(self, expr: sympy.Basic) -> bool | None:
        """``evaluate_expr``'s ``fallback_value`` where it asks ``expr`` (a ``guard_or_*`` question), else None."""
        return self._vs_kind[1] if isinstance(self._vs_kind, tuple) and self._vs_kind[0] == expr else None

    def _kind(self) -> str:
        """Why the question being decided was asked (:data:`verishape.core.decisions.KINDS`).  For ``evaluate_expr``,
        from its arguments, kept unresolved until now: whether it mentions only backed symbols cannot have changed in
        between (torch adds a backed symbol's entry when it creates the symbol and never removes one)."""
        asked = self._vs_kind
        if asked is None:
            return Decision.STATIC_QUERY
        if isinstance(asked, str):
            return asked
        orig_expr, fallback_value = asked
        if fallback_value is None:
            return (Decision.GUARD_AVOIDED if orig_expr.free_symbols <= self.backed_var_to_val.keys()
                    else Decision.DDE_AVOIDED)
        return Decision.GUARD_OR_TRUE if fallback_value else Decision.GUARD_OR_FALSE

    # ------------------------------------------------------------------ the choke point

    def _maybe_evaluate_static(self, expr: sympy.Basic, *, unbacked_only: bool = False,
                               compute_hint: bool = False, size_oblivious: bool = False,
                               axioms: tuple[sympy.Basic, ...] | None = None,
                               var_to_range: tuple[tuple[sympy.Symbol, Any], ...] | None = None) -> sympy.Basic | None:
        stock = _base_static(self, expr, unbacked_only=unbacked_only, compute_hint=compute_hint,
                             size_oblivious=size_oblivious, axioms=axioms, var_to_range=var_to_range)
        if size_oblivious and not compute_hint and stock in (sympy.true, sympy.false):
            # Decided by assuming size-like symbols are >= 2: keep it for the audit.
            self.verishape_log.size_oblivious.setdefault(expr, (stock is sympy.true, None))
        if (stock is not None or unbacked_only or compute_hint or self._vs_busy
                or axioms == () or not _is_question(expr) or not expr.free_symbols):
            if stock is not None and self._vs_questions is not None and not (unbacked_only or compute_hint):
                self._vs_questions.observe(self, _base_static, expr, stock, size_oblivious=size_oblivious,
                                           axioms=axioms, var_to_range=var_to_range, fallback=self._fallback_of(expr))
            return stock
        self._vs_busy = True  # stock helpers we call may re-enter; they get stock answers
        try:
            answer = self._decide(expr, size_oblivious=size_oblivious, axioms=axioms, var_to_range=var_to_range)
            if answer is not None and self._vs_questions is not None:
                self._vs_questions.observe(self, _base_static, expr, answer, size_oblivious=size_oblivious,
                                           axioms=axioms, var_to_range=var_to_range, fallback=self._fallback_of(expr))
            return answer
        except Exception as exc:  # noqa: BLE001 - logged loudly, then stock behaviour
            # Soundness first: a failure anywhere in verishape means "undecided", as
            # stock.  It is not silent: it is logged as a bug and counted per frame.
            log.warning("verishape: internal error deciding %s, falling back to stock torch "
                        "(this is a verishape bug): %r", expr, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            self.verishape_log.errors.append(f"{expr}: {exc!r}")
            return None
        finally:
            self._vs_busy = False

    # The stock cache wrapper is cleared by name (``_refine_ranges``); keep that working.
    _maybe_evaluate_static.cache_clear = _base_static.cache_clear  # type: ignore[attr-defined]
    _maybe_evaluate_static.cache_info = _base_static.cache_info  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ deciding

    def _decide(self, expr: sympy.Basic, *, size_oblivious: bool,
                axioms: tuple[sympy.Basic, ...] | None,
                var_to_range: tuple[tuple[sympy.Symbol, Any], ...] | None,
                extra: ExtraFacts | None = None) -> sympy.Basic | None:
        goal = self.replace(expr)
        if not goal.free_symbols:
            return None  # replacements decide it; leave that to stock's next pass
        self._vs_last_open = goal  # see last_open_question
        # Note [A comparison over unrelated ranges is open]: no kind, no premises, no prover
        open_over_ranges = extra is None and self._vs_open.open_over_ranges(self, goal, axioms, var_to_range, size_oblivious)
        kind = "" if open_over_ranges else self._kind()
        premises = None if open_over_ranges else self._premises(goal, kind, axioms, var_to_range, size_oblivious, extra)
        if premises is None:  # Note [Proof or stock]: nothing may be decided, stock answers
            self.verishape_log.undecided += 1
            return None
        prover, asker = current_prover(), Asker.EXPORT if torch.compiler.is_exporting() else Asker.COMPILE
        for value, target in self._candidates(goal):
            start = time.perf_counter()
            with solvers.asked_by(asker), solvers.spending(self.verishape_budget):
                answer = premises.answer(target, kind, where=self._source_line, value=value, prover=prover)
            self.verishape_log.solver_time_s += time.perf_counter() - start
            record = answer.record
            if answer.verdict is Verdict.CONTRADICTORY:
                # Facts that contradict each other while real inputs satisfy them mean a
                # translation or premise bug; never act on that.
                log.warning("verishape: premises for %s are contradictory; using stock", expr)
                self.verishape_log.vacuous.append((expr, self._source_line()))
                return None
            if record is not None:
                self.verishape_log.add(record)
                return sympy.true if value else sympy.false
        self.verishape_log.undecided += 1
        return None

    def _candidates(self, goal: sympy.Basic) -> list[tuple[bool, sympy.Basic]]:
        """What to try proving.  With every symbol backed, the hint tells which answer
        could possibly be proved, so one query suffices (refute cheaply at the hints).
        Not where the goal is undefined at the hints (a divisor 0 there: a size kept
        symbolic at 1 has the hint 1, which its size-oblivious questions exclude)."""
        if goal.free_symbols <= self.backed_var_to_val.keys():
            try:
                hint = goal.xreplace(self.backed_var_to_val)
            except ZeroDivisionError:
                hint = None
            if hint is sympy.true:
                return [(True, goal)]
            if hint is sympy.false:
                return [(False, sympy.Not(goal))]
        return [(True, goal), (False, sympy.Not(goal))]

    def _premises(self, goal: sympy.Basic, kind: str, axioms: tuple[sympy.Basic, ...] | None,
                  var_to_range: tuple[tuple[sympy.Symbol, Any], ...] | None,
                  size_oblivious: bool, extra: ExtraFacts | None = None) -> Premises | None:
        """The facts that may be assumed for ``goal`` (see :meth:`Premises.gather`), with the
        size hints as witness, and ``extra``'s.  None when nothing may be decided."""
        if axioms is None:
            pool = [*(g.expr for g in self.guards), *self._emitted_asserts(goal, kind)]
        else:
            pool = list(axioms)
        ranges = dict(var_to_range) if var_to_range is not None else self.var_to_range
        if extra is not None:
            pool += extra.facts
            ranges = {**ranges, **extra.ranges}
        return Premises.gather(goal, (self.replace(p) for p in pool), ranges, size_like=self.size_like,
                               size_oblivious=size_oblivious, hints=self.backed_var_to_val)

    def _emitted_asserts(self, goal: sympy.Basic, kind: str) -> list[sympy.Basic]:
        """The deferred runtime asserts (the graph's ``_assert_scalar`` nodes); when an
        assert is being discharged, only those emitted no later than it (Note [Asserts see only the past]; an assert
        of unknown order, such as one on a float symbol, is not a premise then)."""
        limit = newest_unbacked(goal) if kind == Decision.ASSERT_DISCHARGED else None
        pool: list[sympy.Basic] = []
        for key, asserts in self.deferred_runtime_asserts.items():
            if limit is not None and key is not None:
                index = unbacked_index(key)
                if index is None or index > limit:
                    continue
            pool.extend(ra.expr for ra in asserts)
        return pool

    def _source_line(self) -> str | None:
        """The user's line that asked (never a torch or verishape frame; see ``locations``)."""
        try:
            return locations.user_location()
        except Exception:  # noqa: BLE001 - a location is decoration, never a decision
            return None

    # ------------------------------------------------------------------ reporting

    def _log_suppressed_dde(self, a: Any, assumed_value: bool) -> None:
        """Stock took a ``guard_or_*`` fallback without a proof; keep it for the audit."""
        self.verishape_log.fallbacks.append((a, bool(assumed_value), self._source_line()))
        super()._log_suppressed_dde(a, assumed_value)

    def produce_guards_verbose(self, *args: Any, guards: list[Any] | None = None, **kwargs: Any) -> Any:
        """Stock guard production over the minimized guard list and the tightened
        ranges (Dynamo's shape guard; not the FX/AOT caches' guard expression).

        With torch's translation validation on, stock's own production runs first,
        unchanged: it validates the guards the env recorded (when ``guards`` is None),
        raises what stock raises, and leaves the validator as stock would.  The
        minimized production then runs with torch's checks off, so nothing is
        validated or replay-checked twice and our shorter list never enters the
        validator."""
        if self._vs_stock_guards:
            return super().produce_guards_verbose(*args, guards=guards, **kwargs)
        if self._translation_validation_enabled:
            super().produce_guards_verbose(*args, guards=guards, **kwargs)
            checks_done: contextlib.AbstractContextManager[None] = self._torch_checks_off()
        else:
            checks_done = contextlib.nullcontext()
        tighten = not has_strict_constraints(kwargs.get("input_contexts"))
        chosen, tightened = self._minimized(self.guards if guards is None else guards, tighten)
        with checks_done, self._ranges_tightened(tightened):
            out = super().produce_guards_verbose(*args, guards=chosen, **kwargs)
        out = without_repeated_lines(out)
        self.verishape_log.log_summary(str(self.co_fields.get("co_name", "?")) if self.co_fields else "?")
        return out

    def produce_guards_expression(self, *args: Any, **kwargs: Any) -> Any:
        """Stock's, unminimized (Note [A cache's guards are stock's])."""
        with self._scoped("_vs_stock_guards", True):
            return super().produce_guards_expression(*args, **kwargs)

    @contextlib.contextmanager
    def _torch_checks_off(self) -> Iterator[None]:
        """Translation validation and the recorded-events check, off for one block
        (they already ran on stock's own pass)."""
        saved = self._translation_validation_enabled, self.check_recorded_events
        self._translation_validation_enabled = self.check_recorded_events = False
        try:
            yield
        finally:
            self._translation_validation_enabled, self.check_recorded_events = saved

    def check_equal(self, other: ShapeEnv) -> None:
        """Stock's comparison (the recorded-events check), without verishape's own
        fields: the decision log, the memo of minimizations and the kind of question
        being asked describe how answers were found.  The answers themselves land in
        stock's fields (guards, asserts, ranges, replacements), which are compared."""
        ShapeEnv.check_equal(_stock_fields(self), _stock_fields(other))

    def _minimized(self, guards: list[Any], tighten: bool) -> tuple[list[Any], list[Tightening]]:
        if not minimization_enabled():
            return guards, []
        key = (tighten, *(g.expr for g in guards))
        cached = self._vs_minimized.get(key)
        if cached is None:
            try:
                exprs = [self.replace(g.expr) for g in guards]
                # Only input symbols get a range check in the installed guard code, so only
                # their ranges may serve as premises.
                installed_ranges = {s: r for s, r in self.var_to_range.items() if self.var_to_sources.get(s)}
                # The real inputs satisfy every guard (a symbol they leave out: no shortcut);
                # a float's value too (a scale factor), as Premises.gather's witness has it.
                hints = {s: witness_value(v) for s, v in self.backed_var_to_val.items()
                         if isinstance(v, (int, float, sympy.Integer, sympy.Float))}
                with solvers.spending(solvers.Budget()):  # its own: Note [A scope's solver budget]
                    result = minimize_guards(exprs, installed_ranges, current_prover(), size_like=self.size_like,
                                             witness=hints, tighten_ranges=tighten)
            except Exception as exc:  # noqa: BLE001 - logged as a bug; the stock list is installed
                log.warning("verishape: guard minimization failed, installing stock guards "
                            "(this is a verishape bug): %r", exc)
                self.verishape_log.errors.append(f"minimization: {exc!r}")
                return guards, []
            self.verishape_log.minimizations.append(result)
            if result.applied:
                keep = set(result.kept)
                chosen = []
                for g in guards:
                    expr = self.replace(g.expr)
                    if expr in keep:
                        chosen.append(g)
                    elif result.rewritten.get(expr) in keep:
                        # the proved cheaper equivalent, printed where the stock guard was
                        chosen.append(g._replace(expr=result.rewritten[expr]))
                cached = (chosen, list(result.tightened))
            else:
                cached = (guards, [])
            self._vs_minimized[key] = cached
        return cached

    @contextlib.contextmanager
    def _ranges_tightened(self, tightened: list[Tightening]) -> Iterator[None]:
        """Stock prints each input symbol's range check from ``var_to_range``; for the
        duration of guard production, show it the proved tighter ranges.  Restored
        afterwards, so the rest of compilation reasons exactly as before."""
        saved = {t.symbol: self.var_to_range[t.symbol] for t in tightened if t.symbol in self.var_to_range}
        if not saved:
            yield
            return
        try:
            for t in tightened:
                if t.symbol in saved:
                    self.var_to_range[t.symbol] = ValueRanges(t.lower, int_oo if t.upper is None else t.upper)
            self._ranges_changed()
            yield
        finally:
            self.var_to_range.update(saved)
            self._ranges_changed()

    def _ranges_changed(self) -> None:
        """Invalidate every memo that read the ranges.  Stock's ``_lru_cache`` helpers
        (``simplify``, ``get_axioms``, static evaluation) are dropped only when the
        version counter moves, and stock's ``_update_version_counter`` moves it only
        when its key (counts of replacements, divisibility facts, asserts) changes,
        which a range change does not: bump it here, both ways, so no answer computed
        under one set of ranges is served under the other."""
        self._version_counter += 1
        self._maybe_evaluate_static.cache_clear()


@dataclasses.dataclass
class _Construction(ShapeEnvEvent):
    """The first recorded event of a VeriShapeEnv.  Stock's replay insists that the
    first event's ``f`` is ``ShapeEnv`` and builds a stock ShapeEnv from it; this one
    builds ``cls``, so the replayed env answers as the recorded one did."""

    cls: type[ShapeEnv] = ShapeEnv

    def run(self, shape_env: ShapeEnv | None = None) -> Any:
        if shape_env is None and self.f is ShapeEnv:
            return self.cls(**(self.kwargs or {}))
        return super().run(shape_env)


def _stock_fields(env: ShapeEnv) -> ShapeEnv:
    """A bare ShapeEnv holding ``env``'s fields minus verishape's own (stock's
    comparison reads ``vars()`` only)."""
    view = object.__new__(ShapeEnv)
    view.__dict__.update({k: v for k, v in vars(env).items() if not k.startswith(("_vs_", "verishape_"))})
    return view


def _is_question(expr: sympy.Basic) -> bool:
    """Whether ``expr`` is a yes/no question.  SymPy's ``Symbol`` subclasses ``Boolean``,
    so a bare integer size (``s17``, which Inductor's size queries pass through static
    evaluation) would otherwise reach the solver as an opaque proposition: a wasted call
    whose answer can only be "unknown"."""
    if not isinstance(expr, sympy.logic.boolalg.Boolean):
        return False
    return not (isinstance(expr, sympy.Symbol) and (expr.is_integer or expr.is_real))

