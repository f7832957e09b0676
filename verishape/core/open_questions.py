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

from typing import TYPE_CHECKING, Any

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
