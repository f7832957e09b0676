"""Questions a candidate's trace left open, not asked again until the env learns something.

A trace that keeps a size symbolic at 1 (Note [A candidate is never run as traced]) sends
every question about that size to :meth:`VeriShapeEnv._generic_answer`, which first asks
the env's static evaluation, solver included.  Torch asks the same broadcast question
(``Eq(s0, 1)``) hundreds of times while it traces and lowers one graph: a tiny LLaMA's
decode step asked 1,633 questions of 51 kinds, and each open one gathered its premises again
(0.47 s of a 15 s compile).

Note [An open question stays open until the env learns]: an answer that came back open
(None) is remembered under the env's state, everything that answer read: the guards
(appended only), the replacements, divisibility facts and asserts (torch's version counter),
the ranges (every narrowing goes through ``_update_var_to_range``, counted, and every new
symbol adds an entry), the size-like symbols and the kind of question.  While that state
holds, the same question is open again without being asked.  Only open answers are
remembered: an open answer is stock's, so a remembered one can never drop a guard
(Note [Proof or stock]), and a proved answer is always proved again, with its record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from verishape.solvers import box

from .premises import symbol_bounds

if TYPE_CHECKING:
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv


class OpenQuestions:
    """The questions found open under one state of an env (a new state forgets them all)."""

    def __init__(self) -> None:
        self._state: tuple[Any, ...] | None = None
        self._open: set[tuple[sympy.Basic, Any]] = set()
        #: narrowings of a range seen so far (``VeriShapeEnv._update_var_to_range`` counts them)
        self.narrowings = 0
        #: the symbols the env's guards mention (the first ``_guards_read`` guards: appended only)
        self._guard_symbols: set[sympy.Symbol] = set()
        self._guards_read = 0
        #: the symbols the guards and asserts mention after replacement, under torch's version counter
        self._mentioned: tuple[Any, frozenset[sympy.Symbol]] = (None, frozenset())

    def _now(self, env: ShapeEnv) -> tuple[Any, ...]:
        # torch's version counter moves with the replacements, divisibility facts and asserts
        return env._version_counter, len(env.guards), len(env.var_to_range), self.narrowings, len(env.size_like)

    def known_open(self, env: ShapeEnv, expr: sympy.Basic, kind: Any) -> bool:
        """Whether ``expr``, asked for ``kind``'s sake, was found open under the state now."""
        now = self._now(env)
        if now != self._state:
            self._state, self._open = now, set()
            return False
        return (expr, kind) in self._open

    def note_open(self, env: ShapeEnv, expr: sympy.Basic, kind: Any) -> None:
        """``expr`` was just found open (asked with the state :meth:`known_open` saw)."""
        if self._now(env) == self._state:
            self._open.add((expr, kind))

    def open_over_ranges(self, env: ShapeEnv, goal: sympy.Basic, axioms: tuple[sympy.Basic, ...] | None,
                         var_to_range: tuple[tuple[sympy.Symbol, Any], ...] | None, size_oblivious: bool) -> bool:
        """Whether ``goal`` (replaced) mentions no symbol of a premise (the env's guards and
        runtime asserts, or ``axioms``), so that its symbols' ranges are its only facts, and
        those leave it open (Note [A comparison over unrelated ranges is open],
        ``solvers/box.py``): then no prover is asked."""
        symbols = goal.free_symbols
        mentioned = self._premise_symbols(env) if axioms is None else _replaced_symbols(env, axioms)
        if symbols & mentioned:
            return False
        ranges = dict(var_to_range) if var_to_range is not None else env.var_to_range
        bounds = {}
        for s in symbols:
            ends = symbol_bounds(s, ranges, size_like=env.size_like, size_oblivious=size_oblivious)
            if ends is None or (bounds_of_s := box.integer_bounds(*ends)) is None:
                return False
            bounds[s] = bounds_of_s
        return box.both_occur(goal, bounds)

    def _premise_symbols(self, env: ShapeEnv) -> frozenset[sympy.Symbol]:
        """Every symbol the env's guards and deferred runtime asserts mention once replaced
        (a superset: each mentioned symbol's replacement's symbols are added)."""
        guards = env.guards
        if len(guards) < self._guards_read:  # not appended to: read again
            self._guard_symbols, self._guards_read = set(), 0
        for g in guards[self._guards_read:]:
            self._guard_symbols |= g.expr.free_symbols
        key = (env._version_counter, len(guards))
        if self._guards_read != len(guards) or self._mentioned[0] != key:
            self._guards_read = len(guards)
            asserts = (ra.expr for found in env.deferred_runtime_asserts.values() for ra in found)
            self._mentioned = (key, _replaced_symbols(env, asserts, self._guard_symbols))
        return self._mentioned[1]


def _replaced_symbols(env: ShapeEnv, exprs: Iterable[sympy.Basic],
                      symbols: Iterable[sympy.Symbol] = ()) -> frozenset[sympy.Symbol]:
    """The symbols of ``exprs`` and ``symbols``, with the symbols of each one's replacement."""
    found = set(symbols).union(*(e.free_symbols for e in exprs))
    replaced = [env.replace(s).free_symbols for s in found if s in env.replacements]
    return frozenset(found.union(*replaced))
