"""Why a ``verishape.export`` stopped on ``Constraints violated``: the proved reason of each
violation (which recorded facts force which range or value), appended to stock's message.

Stock names the violated ``Dim`` and a guess; here the recorded facts that force the range
are found (a scan of the declared range proposes a bound, the solver proves it) and reduced
to a small set that still proves it (:func:`violation_reasons`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from typing import Any

import sympy
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter
from torch.utils._sympy.value_ranges import ValueRanges

from verishape.core import sources
from verishape.solvers import concrete
from verishape.core.premises import Premises, range_facts, relevant
from verishape.core.shape_env import VeriShapeEnv
from verishape.proofs.kinds import Decision

from . import checks as export_checks

log = logging.getLogger("verishape")

_VIOLATED = re.compile(r"Constraints violated \(([^)]*)\)")
#: The most values of a declared range scanned to propose a tighter bound; the bound is
#: then proved by the solver (the scan only proposes, the proof decides).
_SCAN_LIMIT = 4096
#: Facts beyond this many are all listed rather than reduced to a minimal set.
_CORE_LIMIT = 12


@dataclasses.dataclass(frozen=True)
class ProvedReason:
    """``premises`` (each with the user's line when torch recorded it) imply ``conclusion``."""

    conclusion: sympy.Basic
    premises: tuple[tuple[sympy.Basic, str | None], ...]

    def text(self, names: Mapping[sympy.Symbol, str]) -> str:
        facts = ", ".join(_show(p, names) + (f" [{where.strip()}]" if where else "") for p, where in self.premises)
        return f"verishape: proved from {facts or 'the declared ranges'}: {_show(self.conclusion, names)}"


def add_proved_reason(exc: BaseException, envs: list[VeriShapeEnv],
                      declared: Mapping[str, export_checks.Declared]) -> None:
    """Append, to a ``Constraints violated`` error, the proved reason of each violation the
    solver can decide: which recorded facts force which range or value.  The exception
    object, its type and stock's text are kept; nothing is appended when nothing is proved."""
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
    match = _VIOLATED.search(text) if text else None
    if match is None or not envs:
        return
    names = [n.strip() for n in match.group(1).split(",") if n.strip()]
    try:
        lines = violation_reasons(envs[-1], names, named_ranges(declared))
    except Exception as err:  # noqa: BLE001 - an explanation must never replace stock's error
        log.warning("verishape: could not explain the constraint violation; stock's error is raised "
                    "unchanged (this is a verishape bug): %r", err)
        return
    if lines:
        exc.args = (text + "\n" + "\n".join(lines), *exc.args[1:])


def named_ranges(declared: Mapping[str, export_checks.Declared]) -> dict[str, tuple[int, Any]]:
    """``Dim`` name -> (min, max) for each named ``Dim`` of the declared space (the one parse
    of ``dynamic_shapes``, :func:`export_checks.declared_space`)."""
    return {d.name: (d.low or 0, int_oo if d.high is None else d.high) for d in declared.values() if d.name}


def violation_reasons(env: VeriShapeEnv, names: list[str],
                      declared: Mapping[str, tuple[int, Any]]) -> list[str]:
    """A proved reason for each violated ``Dim`` (by name) whose forced value or range the
    recorded facts imply, as message lines."""
    by_name = _symbols_by_debug_name(env)
    symbols = {n: by_name[n] for n in names if n in by_name and n in declared}
    display = {s: n for n, s in by_name.items()}
    ranges = {s: ValueRanges(declared[n][0], declared[n][1]) for n, s in symbols.items()}
    lines = []
    for symbol in symbols.values():
        reason = _prove_forced(env, symbol, ranges)
        if reason is not None:
            lines.append(reason.text(display))
    return lines


def _symbols_by_debug_name(env: VeriShapeEnv) -> dict[str, sympy.Symbol]:
    debug = env.source_name_to_debug_name
    out = {}
    for symbol, srcs in env.var_to_sources.items():
        for src in srcs:
            name = debug.get(sources.source_name(src))
            if name is not None:
                out.setdefault(name, symbol)
    return out


def _prove_forced(env: VeriShapeEnv, symbol: sympy.Symbol,
                  declared: Mapping[sympy.Symbol, Any]) -> ProvedReason | None:
    """What the facts force on ``symbol`` beyond its declared range, proved.  Facts: the
    env's guards and deferred runtime asserts as recorded (un-replaced), the declared
    ranges of the violated dims, and the ranges torch derived for every other symbol."""
    pool: list[tuple[sympy.Basic, str | None]] = [(g.expr, getattr(g.sloc, "maybe_user_loc", None))
                                                  for g in env.guards]
    for asserts in env.deferred_runtime_asserts.values():
        pool.extend((ra.expr, None) for ra in asserts)
    ranges = {**env.var_to_range, **declared}
    conclusion = _forced_conclusion(env, symbol, ranges[symbol], [e for e, _ in pool])
    if conclusion is None:
        return None
    chosen = relevant(conclusion, (e for e, _ in pool))
    where = dict(reversed(pool))  # first recorded location of each fact
    core = _proved_core(env, conclusion, chosen, ranges)
    if core is None:
        return None
    return ProvedReason(conclusion, tuple((f, where.get(f)) for f in core))


def _forced_conclusion(env: VeriShapeEnv, symbol: sympy.Symbol, declared: Any,
                       pool: list[sympy.Basic]) -> sympy.Basic | None:
    """The value (specialization) or the tighter range to prove, proposed from stock's
    replacement and derived range and a scan of the single-symbol facts."""
    value = env.replacements.get(symbol)
    if isinstance(value, sympy.Integer):
        return sympy.Eq(symbol, value)
    derived = env.var_to_range.get(symbol, declared)
    lows = [b for b in (_int_or_none(declared.lower), _int_or_none(derived.lower)) if b is not None]
    highs = [b for b in (_int_or_none(declared.upper), _int_or_none(derived.upper)) if b is not None]
    low, high = (max(lows) if lows else None), (min(highs) if highs else None)
    own = [f for f in pool if f.free_symbols == {symbol}]
    if own and low is not None:
        last = min(high, low + _SCAN_LIMIT) if high is not None else low + _SCAN_LIMIT
        ok = [v for v in range(low, last + 1) if concrete.holds(own, {symbol: v})]
        if ok:
            low = ok[0]
            if high is not None and high <= last:
                high = ok[-1]
    if low is not None and low == high:
        return sympy.Eq(symbol, low)
    declared_low, declared_high = _int_or_none(declared.lower), _int_or_none(declared.upper)
    parts = []
    if low is not None and (declared_low is None or low > declared_low):
        parts.append(sympy.Le(low, symbol))
    if high is not None and (declared_high is None or high < declared_high):
        parts.append(sympy.Le(symbol, high))
    return sympy.And(*parts) if parts else None


def _int_or_none(bound: Any) -> int | None:
    return int(bound) if isinstance(bound, (int, sympy.Integer)) and not isinstance(bound, bool) else None


def _proved_core(env: VeriShapeEnv, goal: sympy.Basic, chosen: list[sympy.Basic],
                 ranges: Mapping[sympy.Symbol, Any]) -> list[sympy.Basic] | None:
    """The facts of ``chosen`` and the range facts of their symbols that the solver needs to
    prove ``goal``; reduced to a minimal set (one solver call per fact) when there are few.
    None when the goal is not proved."""
    premises = Premises.gather(goal, chosen, ranges, hints=env.backed_var_to_val, connected=False)
    if premises is None or premises.ask(goal, Decision.CONSTRAINT_REASON) is None:
        return None
    core = list(premises.facts)
    if len(core) <= _CORE_LIMIT:
        for fact in list(core):
            trial = [f for f in core if f is not fact]
            if dataclasses.replace(premises, facts=trial).ask(goal, Decision.CONSTRAINT_REASON) is not None:
                core = trial
    # Shown as the recorded facts, then the range facts in symbol order (a recorded fact
    # that is also a range fact is shown among the ranges).
    to_plain = premises.to_plain
    symbols = goal.free_symbols.union(*(f.free_symbols for f in chosen))
    plain_ranges = {to_plain.get(s, s): ranges[s] for s in symbols if s in ranges}
    position = {f: i for i, f in enumerate(range_facts(plain_ranges.keys(), plain_ranges))}
    core.sort(key=lambda f: (f in position, position.get(f, 0)))
    back = {v: k for k, v in to_plain.items()}
    return [f.xreplace(back) for f in core]


def _show(expr: sympy.Basic, names: Mapping[sympy.Symbol, str]) -> str:
    """``expr`` in Python syntax over the ``Dim`` names (other symbols keep theirs)."""
    by_name = {s.name: n for s, n in names.items()}
    renamed = expr.xreplace({s: sympy.Symbol(by_name[s.name]) for s in expr.free_symbols if s.name in by_name})
    if isinstance(renamed, sympy.And):
        return " and ".join(_show(a, {}) for a in renamed.args)
    return PythonPrinter().doprint(renamed)
