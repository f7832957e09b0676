"""Ask Z3, under deterministic limits, with a cache and statistics.

Z3's Python bindings share one global context that is not thread-safe; Dynamo may
compile frames from several threads.  Queries are translated in that shared context
(terms are then copied into a fresh one, below), so all work that touches it holds the
one module-level ``_SHARED_CONTEXT_LOCK``, whichever prover does it: a lock per prover
would let two provers build terms in the shared context at once (Z3 crashes).  Each
prover's own lock guards only its cache and statistics.

Each check runs in a fresh ``z3.Context`` that receives a copy of the query.  In the
shared context, term ids (and with them Z3's internal orderings) depend on every query
asked before in the process, so the same query could finish under the resource limit
after one history and give up after another.  A fresh context (made ahead of need by
:mod:`solvers.contexts`) makes each answer a function of the query and the limits alone.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import struct
import threading
import time
from collections.abc import Hashable, Iterable

import sympy
import z3

from . import concrete
from .contexts import fresh_context
from .query import Query, as_boolean, build_query, to_smtlib
from .result import PROVED, REFUTED, UNKNOWN, Limits, SolveResult, Value

log = logging.getLogger("verishape.solvers")

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

    @property
    def hit_rate(self) -> float:
        return self.cache_hits / self.queries if self.queries else 0.0

    def as_dict(self) -> dict[str, float]:
        d = dataclasses.asdict(self)
        d["hit_rate"] = self.hit_rate
        return d


class Prover:
    """A solver front end: one cache, one set of statistics, one lock."""

    def __init__(self, limits: Limits | None = None, *, cache_size: int = 65536) -> None:
        self.limits = limits or Limits()
        self.stats = Stats()
        self._cache: collections.OrderedDict[Hashable, SolveResult] = collections.OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()

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
        the current size hints).  When it does, by concrete evaluation, the assumptions
        are consistent and the vacuity check needs no second solver call."""
        goal_b = as_boolean(goal, "goal")
        assumptions_b = tuple(as_boolean(a, "assumption") for a in assumptions)
        limits = limits or self.limits
        if timeout_ms is not None:
            limits = dataclasses.replace(limits, timeout_ms=timeout_ms)
        key = (goal_b, frozenset(assumptions_b), limits)
        with self._lock:
            self.stats.queries += 1
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.stats.cache_hits += 1
                return dataclasses.replace(hit, cached=True)
            with _SHARED_CONTEXT_LOCK:
                result = self._solve(goal_b, assumptions_b, limits, witness)
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            self.stats.solver_time_s += result.time_s
            setattr(self.stats, result.status, getattr(self.stats, result.status) + 1)
            return result

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

    # ------------------------------------------------------------------ internals

    def _solver(self, limits: Limits, ctx: z3.Context) -> z3.Solver:
        s = z3.Solver(ctx=ctx)
        s.set("rlimit", limits.rlimit)
        s.set("timeout", limits.timeout_ms)
        s.set("random_seed", limits.seed)
        return s

    def _solve(self, goal: sympy.Basic, assumptions: tuple[sympy.Basic, ...], limits: Limits,
               witness: dict[sympy.Symbol, Value] | None = None) -> SolveResult:
        start = time.perf_counter()
        try:
            query = build_query(goal, assumptions)
            exact = query.translator.is_exact
            ctx = fresh_context()
            s = self._solver(limits, ctx)
            s.add(*(a.translate(ctx) for a in query.assertions))
            answer = s.check()
            if answer == z3.unsat:
                vacuous = not _satisfied_by(assumptions, witness) and self._is_vacuous(query, limits)
                return SolveResult(PROVED, vacuous=vacuous, exact=exact, time_s=time.perf_counter() - start)
            if answer == z3.sat:
                return self._refutation(query, s.model(), ctx, exact, start)
            reason = s.reason_unknown()
            if reason == "timeout":
                # Rule 6: the rlimit should stop every query first; this answer depends
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


def _satisfied_by(assumptions: tuple[sympy.Basic, ...], witness: dict[sympy.Symbol, Value] | None) -> bool:
    """Whether ``witness`` makes every assumption true (so they are not contradictory)."""
    if witness is None:
        return False
    try:
        return all(concrete.evaluate(a, witness) is True for a in assumptions)
    except (concrete.Undefined, concrete.Unevaluable):
        return False


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
    try:
        for a in query.assumptions:
            if concrete.evaluate(a, env) is not True:
                return None
    except (concrete.Undefined, concrete.Unevaluable):
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
    """Do ``assumptions`` imply ``goal``?  See :class:`~solvers.result.SolveResult`."""
    return _default.prove(goal, assumptions, timeout_ms=timeout_ms)


def stats() -> Stats:
    return _default.stats


def smtlib(goal: object, assumptions: Iterable[object] = ()) -> str:
    return _default.smtlib(goal, assumptions)
