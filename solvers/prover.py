"""Ask Z3, under deterministic limits, with a cache and statistics.

Z3's Python bindings share one global context that is not thread-safe; Dynamo may
compile frames from several threads.  Queries are translated in that shared context
(terms are then copied into a fresh one, below), so all work that touches it holds the
one module-level ``_SHARED_CONTEXT_LOCK``, whichever prover does it: a lock per prover
would let two provers build terms in the shared context at once (Z3 crashes).  Each
prover's own lock is held for the whole of a query (its cache, the refutation tier, the
proof store and the solve), so one prover answers one question at a time and a question
asked by two threads at once is solved once; the shared lock is taken inside it, for
the solve only.

Each check runs in a fresh ``z3.Context`` that receives a copy of the query.  In the
shared context, term ids (and with them Z3's internal orderings) depend on every query
asked before in the process, so the same query could finish under the resource limit
after one history and give up after another.  A fresh context (made ahead of need by
:mod:`verishape.solvers.contexts`) makes each answer a function of the query and the limits alone.

That is what lets answers persist: before solving, a prover looks the obligation up in
the proof store (:mod:`verishape.proofs.store`, keyed by the obligation's text, the encoding hash,
the solver and the limits); a hit answers with no solver call.  After solving, the answer
is stored with the SMT-LIB script of the query.  ``asked_by`` names who asks (compile,
export, audit, fuzz, minimize, query), for the records.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import json
import logging
import sqlite3
import struct
import threading
import time
from collections.abc import Hashable, Iterable, Iterator
from typing import TYPE_CHECKING

import sympy
import z3

from verishape.proofs.record import Obligation, ProofRecord
from verishape.proofs.kinds import Asker
from verishape.proofs.result import AT_BOUNDS, BY_BOUNDS, NEAR_WITNESS, PROVED, REFUTED, UNKNOWN, Limits, SolveResult, Value

from . import classes, concrete, implied, refute
from .contexts import fresh_context
from .query import Query, as_boolean, build_query, to_smtlib

if TYPE_CHECKING:
    from verishape.proofs.store import ProofStore

log = logging.getLogger("verishape.solvers")

#: Who is asking, recorded with each stored obligation (:class:`verishape.proofs.kinds.Asker`;
#: ``query``: a direct call).
_asker: contextvars.ContextVar[str] = contextvars.ContextVar("verishape_asker", default="query")


@contextlib.contextmanager
def asked_by(kind: str) -> Iterator[None]:
    """Queries made inside this block are recorded as asked by ``kind`` (an
    :class:`~verishape.proofs.kinds.Asker`)."""
    token = _asker.set(Asker.checked(kind))
    try:
        yield
    finally:
        _asker.reset(token)


def current_asker() -> str:
    return _asker.get()


# Note [A scope's solver budget]
# A question the solver cannot settle costs its whole resource limit (about half a second
# at the default; questions over floats get a small limit of their own in such a scope,
# ``classes``).
# A caller that asks many questions for one piece of work (a VeriShapeEnv for one frame's
# compile) binds a Budget over them with ``spending``: once the resource limit has stopped
# ``stops_allowed`` solver calls made in its scopes, every later question that would reach
# the solver is answered ``unknown`` (OVER_BUDGET) at once, stock's answer, as from a solver
# that gives up. The cache, the proving and refuting tiers and the proof store still answer (they cost
# nothing). The budget counts answers, not seconds, so the same program still gets the
# same answers (Note [Same program, same answer]).


@dataclasses.dataclass
class Budget:
    """Solver calls the resource limit may stop in the scopes bound to this budget
    (Note [A scope's solver budget]), and the resource limit of a question over floats
    there (``classes``; None: the prover's own); ``stops`` and ``declined`` say what
    happened."""

    stops_allowed: int = 2
    float_rlimit: int | None = classes.FLOAT_RLIMIT
    stops: int = 0
    #: questions answered unknown without the solver, the budget being spent
    declined: int = 0

    @property
    def spent(self) -> bool:
        return self.stops >= self.stops_allowed


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("verishape_budget", default=None)


@contextlib.contextmanager
def spending(budget: Budget) -> Iterator[None]:
    """Solver calls made inside this block count against ``budget``."""
    token = _budget.set(budget)
    try:
        yield
    finally:
        _budget.reset(token)


#: ``SolveResult.reason`` of a question not sent to the solver, its scope's budget spent
OVER_BUDGET = "not asked: the solver budget of this compile is spent"

#: ``Prover(store=AUTO_STORE)``: use the process's store (``$VERISHAPE_PROOF_STORE``).
AUTO_STORE = "auto"
#: ``unknown`` reasons that depend on the machine (load, a crash): never stored.  Z3 says
#: "canceled" (or "max. resource limit exceeded") when the resource limit stops it, a function of the query and the limits
#: (a fresh context each check): stored, so a restart does not pay for it again.
_LOAD_DEPENDENT = ("solver: timeout", "solver error")
#: the ``unknown`` reasons of a question the resource limit stopped (Z3 says either, by theory)
RLIMIT_STOPS = ("solver: canceled", "solver: max. resource limit exceeded")


#: Held by every use of Z3's shared (main) context: translation, copying terms out of it,
#: and freeing them (a query's terms die before the lock is released).
_SHARED_CONTEXT_LOCK = threading.RLock()


@dataclasses.dataclass
class Stats:
    queries: int = 0
    cache_hits: int = 0
    solver_time_s: float = 0.0
    proved: int = 0
    refuted: int = 0
    unknown: int = 0
    unconfirmed_models: int = 0
    #: answers cut by the wall-clock backstop instead of the rlimit: load-dependent
    wall_clock_stops: int = 0
    #: answers read from the proof store (no solver call)
    store_hits: int = 0
    #: queries sent to the solver (neither cache nor store had the answer)
    solver_calls: int = 0
    #: refuted at a point near the caller's witness, before the store or the solver
    refuted_concretely: int = 0
    #: answered unknown without the solver, the asking scope's budget spent
    over_budget: int = 0
    #: proved from the premises' own bounds (:mod:`verishape.solvers.implied`), no solver call
    proved_by_bounds: int = 0

    @property
    def hit_rate(self) -> float:
        return self.cache_hits / self.queries if self.queries else 0.0

    def as_dict(self) -> dict[str, float]:
        d = dataclasses.asdict(self)
        d["hit_rate"] = self.hit_rate
        return d


class Prover:
    """A solver front end: one cache, one set of statistics, one lock.

    ``store``: where answers persist: :data:`AUTO_STORE` (the process's store, which
    ``$VERISHAPE_PROOF_STORE`` configures), a :class:`verishape.proofs.store.ProofStore`, or None
    (no store: every new question goes to the solver)."""

    def __init__(self, limits: Limits | None = None, *, cache_size: int = 65536,
                 store: ProofStore | str | None = AUTO_STORE) -> None:
        self.limits = limits or Limits()
        self.stats = Stats()
        self._cache: collections.OrderedDict[Hashable, SolveResult] = collections.OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()
        if isinstance(store, str) and store != AUTO_STORE:
            raise ValueError(f"store must be {AUTO_STORE!r}, a verishape.proofs.store.ProofStore or None, got {store!r}")
        self._store = store

    # ------------------------------------------------------------------ API

    def prove(
        self,
        goal: object,
        assumptions: Iterable[object] = (),
        *,
        timeout_ms: int | None = None,
        limits: Limits | None = None,
        witness: dict[sympy.Symbol, Value] | None = None,
    ) -> SolveResult:
        """``witness``: an assignment believed to satisfy the assumptions (for example
        the current size hints).  With one, points near it are tried first (the cheap
        tier, :mod:`verishape.solvers.refute`): a point that satisfies the assumptions and
        breaks the goal answers "refuted" without the store or the solver.  When the
        witness satisfies the assumptions, they are consistent and the vacuity check
        needs no second solver call."""
        goal_b = as_boolean(goal, "goal")
        assumptions_b = tuple(as_boolean(a, "assumption") for a in assumptions)
        limits = limits or self.limits
        if timeout_ms is not None:
            limits = dataclasses.replace(limits, timeout_ms=timeout_ms)
        budget = _budget.get()
        if budget is not None and budget.float_rlimit is not None:
            limits = classes.limits_for(goal_b, assumptions_b, limits, budget.float_rlimit)
        key = (goal_b, frozenset(assumptions_b), limits)
        with self._lock:
            self.stats.queries += 1
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.stats.cache_hits += 1
                return dataclasses.replace(hit, cached=True)
            # cheapest first: a point near the witness breaks most goals asked in 0.03 to 0.2 ms,
            # where bounding them takes 0.1 to 0.7 ms (docs/architecture.md, "Cheapest first")
            refuted = self._refuted_near(goal_b, assumptions_b, witness)
            if refuted is not None:
                self._remember(key, refuted)
                return refuted
            shown = self._implied(goal_b, assumptions_b, witness)
            if shown is not None:
                self._remember(key, shown)
                return shown
            store = self.store()
            texts = None
            if store is not None:
                texts = _texts(goal_b, assumptions_b)
                result = self._from_store(store, texts, limits)
                if result is not None:
                    self.stats.store_hits += 1
                    self._remember(key, result)
                    return result
            if budget is not None and budget.spent:  # Note [A scope's solver budget]
                budget.declined += 1
                self.stats.over_budget += 1
                return SolveResult(UNKNOWN, reason=OVER_BUDGET)
            script: list[str] | None = [] if store is not None else None
            with _SHARED_CONTEXT_LOCK:
                result = self._solve(goal_b, assumptions_b, limits, witness, script=script)
            if budget is not None and result.reason in RLIMIT_STOPS:
                budget.stops += 1
            self.stats.solver_calls += 1
            self.stats.solver_time_s += result.time_s
            self._remember(key, result)
            if store is not None and texts is not None:
                store.note_solver_call()
                self._to_store(store, goal_b, texts, limits, result, script)
            return result

    def _implied(self, goal: sympy.Basic, assumptions: tuple[sympy.Basic, ...],
                 witness: dict[sympy.Symbol, Value] | None) -> SolveResult | None:
        """The proving tier (:mod:`verishape.solvers.implied`): a goal the premises state or
        bound (Note [A bound the premises state]), proved without the store or the solver."""
        start = time.perf_counter()
        if not implied.implied(goal, assumptions, witness):
            return None
        self.stats.proved_by_bounds += 1
        return SolveResult(PROVED, reason=BY_BOUNDS, time_s=time.perf_counter() - start)

    def _refuted_near(self, goal: sympy.Basic, assumptions: tuple[sympy.Basic, ...],
                      witness: dict[sympy.Symbol, Value] | None) -> SolveResult | None:
        """The first tier (:mod:`verishape.solvers.refute`): a point near ``witness`` (without
        one, at the assumptions' own bounds) that satisfies the assumptions and breaks the
        goal, found without a solver call."""
        start = time.perf_counter()
        first, reason = None, NEAR_WITNESS
        if witness is None:
            bounded = refute.from_bounds(goal, assumptions)
            if bounded is None:
                return None
            (witness, first), reason = bounded, AT_BOUNDS
        point = refute.counterexample(goal, assumptions, witness, first)
        if point is None:
            return None
        self.stats.refuted_concretely += 1
        symbols = goal.free_symbols.union(*(a.free_symbols for a in assumptions))
        undefined = False
        try:
            concrete.evaluate(goal, point)
        except concrete.Undefined:
            undefined = True
        return SolveResult(REFUTED, counterexample={str(s): point[s] for s in sorted(symbols, key=str)},
                           undefined_goal=undefined, reason=reason, time_s=time.perf_counter() - start)

    def store(self) -> ProofStore | None:
        """The proof store this prover reads and writes now (None: off or unusable)."""
        if isinstance(self._store, str):
            from verishape.proofs.store import process_store

            return process_store()
        if self._store is not None and self._store.broken:
            return None
        return self._store

    def smtlib(self, goal: object, assumptions: Iterable[object] = ()) -> str:
        """The query :meth:`prove` would send, as an SMT-LIB2 script."""
        goal_b, assumptions_b = as_boolean(goal, "goal"), tuple(as_boolean(a, "assumption") for a in assumptions)
        with _SHARED_CONTEXT_LOCK:
            q = build_query(goal_b, assumptions_b)
            text = to_smtlib(q, rlimit=self.limits.rlimit, seed=self.limits.seed)
            del q
        return text

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    # ------------------------------------------------------------------ cache and store

    def _remember(self, key: Hashable, result: SolveResult) -> None:
        self._cache[key] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        setattr(self.stats, result.status, getattr(self.stats, result.status) + 1)

    def _from_store(self, store: ProofStore, texts: tuple[str, list[str]], limits: Limits) -> SolveResult | None:
        from verishape.proofs import store as store_mod

        start = time.perf_counter()
        try:
            found = store.lookup(store_mod.obligation_key(texts[0], texts[1], limits))
        except sqlite3.Error as exc:
            store_mod.disable(store, exc)
            return None
        if found is None:
            return None
        try:
            return found.to_result(time_s=time.perf_counter() - start)
        except json.JSONDecodeError as exc:  # a damaged record: ask the solver instead
            log.warning("verishape: proof store record %s is unreadable (%s); solving again", found.id, exc)
            return None

    def _to_store(self, store: ProofStore, goal: sympy.Basic, texts: tuple[str, list[str]], limits: Limits,
                  result: SolveResult, script: list[str] | None) -> None:
        """Persist ``result`` unless it depends on the machine (a wall-clock stop or a
        solver error) or the query never reached the solver (no script)."""
        from verishape.proofs import store as store_mod

        if not script or (result.status == UNKNOWN and result.reason.startswith(_LOAD_DEPENDENT)):
            return
        goal_srepr, premises = texts[0], store_mod.premise_texts(texts[1])
        record = store_mod.StoredProof(
            key=store_mod.obligation_key(goal_srepr, premises, limits), kind=current_asker(), goal=str(goal),
            goal_srepr=goal_srepr, premises_srepr=json.dumps(premises), verdict=result.status,
            vacuous=result.vacuous, undefined_goal=result.undefined_goal,
            counterexample=None if result.counterexample is None else json.dumps(result.counterexample),
            reason=result.reason or None, solver=store_mod.SOLVER, rlimit=limits.rlimit,
            timeout_ms=limits.timeout_ms, seed=limits.seed, time_s=result.time_s,
            verishape_version=store_mod.VERSION, encoding_hash=store_mod.ENCODING_HASH, smtlib=script[0],
            created=time.time(), exact=result.exact)
        try:
            store.add(record)
        except sqlite3.Error as exc:
            store_mod.disable(store, exc)

    # ------------------------------------------------------------------ internals

    def _solver(self, limits: Limits, ctx: z3.Context) -> z3.Solver:
        s = z3.Solver(ctx=ctx)
        s.set("rlimit", limits.rlimit)
        s.set("timeout", limits.timeout_ms)
        s.set("random_seed", limits.seed)
        return s

    def _solve(self, goal: sympy.Basic, assumptions: tuple[sympy.Basic, ...], limits: Limits,
               witness: dict[sympy.Symbol, Value] | None = None, *, script: list[str] | None = None) -> SolveResult:
        """``script``: when given, the query's SMT-LIB text is appended to it (for the store)."""
        start = time.perf_counter()
        try:
            query = build_query(goal, assumptions)
            exact = query.translator.is_exact
            ctx = fresh_context()
            s = self._solver(limits, ctx)
            s.add(*(a.translate(ctx) for a in query.assertions))
            if script is not None:
                script.append(to_smtlib(query, solver=s))
            answer = s.check()
            if answer == z3.unsat:
                # A witness that satisfies the assumptions shows them consistent: no second solve.
                consistent = witness is not None and concrete.holds(assumptions, witness)
                vacuous = not consistent and self._is_vacuous(query, limits)
                return SolveResult(PROVED, vacuous=vacuous, exact=exact, time_s=time.perf_counter() - start)
            if answer == z3.sat:
                return self._refutation(query, s.model(), ctx, exact, start)
            reason = s.reason_unknown()
            if reason == "timeout":
                # Note [Same program, same answer]: the rlimit should stop every query first; this answer depends
                # on machine load.  Still an "unknown" (stock behaviour), but counted.
                self.stats.wall_clock_stops += 1
                log.warning("verishape: %s hit the %d ms wall-clock backstop before the rlimit (%d); "
                            "the answer may depend on machine load", goal, limits.timeout_ms, limits.rlimit)
            return SolveResult(UNKNOWN, exact=exact, reason=f"solver: {reason}",
                               time_s=time.perf_counter() - start)
        except z3.Z3Exception as exc:
            # A solver-side failure is an "I don't know", never an answer.
            log.warning("verishape: Z3 raised on %s (treated as unknown): %s", goal, exc)
            return SolveResult(UNKNOWN, reason=f"solver error: {exc}", time_s=time.perf_counter() - start)

    def _is_vacuous(self, query: Query, limits: Limits) -> bool:
        ctx = fresh_context()
        s = self._solver(limits, ctx)
        s.add(*(p.translate(ctx) for p in query.premises))
        return s.check() == z3.unsat

    def _refutation(self, query: Query, model: z3.ModelRef, ctx: z3.Context, exact: bool,
                    start: float) -> SolveResult:
        cex: dict[str, Value] = {}
        env: dict[sympy.Symbol, Value] = {}
        for sym in sorted(query.symbols, key=str):
            var = query.translator.variables.get(sym)
            if var is None:
                return SolveResult(UNKNOWN, exact=exact, reason=f"symbol {sym} is not modelled",
                                   time_s=time.perf_counter() - start)
            value = _model_value(model, var.translate(ctx))
            env[sym] = value
            cex[str(sym)] = value
        verdict = _confirm(query, env)
        elapsed = time.perf_counter() - start
        if verdict is None:
            self.stats.unconfirmed_models += 1
            if exact:
                log.warning("verishape: a model for %s did not survive concrete evaluation "
                            "although the encoding is exact; this is a verishape bug", query.goal)
            return SolveResult(UNKNOWN, exact=exact, reason="model not confirmed by concrete evaluation",
                               time_s=elapsed)
        return SolveResult(REFUTED, counterexample=cex, undefined_goal=verdict == "undefined",
                           exact=exact, time_s=elapsed)


def _texts(goal: sympy.Basic, assumptions: tuple[sympy.Basic, ...]) -> tuple[str, list[str]]:
    """The obligation as the store keys it: the goal's and the premises' srepr text."""
    from verishape.proofs.record import dump_expr

    return dump_expr(goal), [dump_expr(a) for a in assumptions]


def _model_value(model: z3.ModelRef, var: z3.ExprRef) -> Value:
    if z3.is_fp(var):
        # fp.to_ieee_bv is unspecified on NaN, so ask about NaN first.
        if z3.is_true(model.eval(z3.fpIsNaN(var), model_completion=True)):
            return float("nan")
        bits = model.eval(z3.fpToIEEEBV(var), model_completion=True).as_long()
        return struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    return model.eval(var, model_completion=True).as_long()


def _confirm(query: Query, env: dict[sympy.Symbol, Value]) -> str | None:
    """``"false"`` or ``"undefined"`` when ``env`` really satisfies the assumptions and
    breaks the goal; ``None`` when concrete evaluation does not confirm the model."""
    if not concrete.holds(query.assumptions, env):
        return None
    try:
        value = concrete.evaluate(query.goal, env)
    except concrete.Undefined:
        return "undefined"
    except concrete.Unevaluable:
        return None
    return "false" if value is False else None


_default = Prover()


def default_prover() -> Prover:
    return _default


def prove(
    goal: object,
    assumptions: Iterable[object] = (),
    *,
    timeout_ms: int | None = None,
) -> SolveResult:
    """Do ``assumptions`` imply ``goal``?  See :class:`~verishape.proofs.result.SolveResult`."""
    return _default.prove(goal, assumptions, timeout_ms=timeout_ms)


def point(assumptions: Iterable[object], prover: Prover | None = None) -> dict[str, int] | None:
    """A point (symbol name -> integer) where every assumption holds, checked concretely,
    or None where there is none or the solver cannot tell.  Asked as "do the assumptions
    imply False?": the refutation's counterexample is such a point.  For samplers that want
    sizes inside a trace's conditions (:mod:`verishape.fuzz.sizes`); never a proof."""
    result = (prover or _default).prove(sympy.false, assumptions)
    if result.status != REFUTED or result.counterexample is None:
        return None
    return {k: int(v) for k, v in result.counterexample.items()}


def stats() -> Stats:
    return _default.stats


def smtlib(goal: object, assumptions: Iterable[object] = ()) -> str:
    return _default.smtlib(goal, assumptions)


def decide(obligation: Obligation, prover: Prover | None = None) -> ProofRecord:
    """The record of deciding ``obligation`` (with ``prover``, or the process's default).
    Here rather than on :class:`~verishape.proofs.record.ProofRecord`: records are data
    the solver layer produces, and the proofs layer never calls the solver."""
    prover = prover or _default
    return ProofRecord(obligation, prover.prove(obligation.goal, obligation.premises))


def recheck(record: ProofRecord) -> SolveResult:
    """Decide ``record``'s obligation again with a fresh prover (no shared cache, no store),
    so the answer does not come from the record being checked."""
    return Prover(store=None).prove(record.obligation.goal, record.obligation.premises)
