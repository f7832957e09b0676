"""Build the SMT query for "do these assumptions imply this goal?".

The query asserts the symbols' axioms, each assumption leniently (every input that really
satisfies it is kept), and the negation of the goal strictly (the goal must be defined
and true).  ``unsat`` therefore means *proved*; a model is a candidate counterexample.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sympy
import z3

from .translate import Translator


@dataclasses.dataclass
class Query:
    goal: sympy.Basic
    assumptions: tuple[sympy.Basic, ...]
    translator: Translator
    premises: list[z3.BoolRef]
    negated_goal: z3.BoolRef

    @property
    def assertions(self) -> list[z3.BoolRef]:
        return [*self.premises, self.negated_goal]

    @property
    def symbols(self) -> set[sympy.Symbol]:
        out: set[sympy.Symbol] = set(self.goal.free_symbols)
        for a in self.assumptions:
            out |= a.free_symbols
        return out


def as_boolean(expr: object, what: str) -> sympy.Basic:
    """sympify ``expr`` and insist it is a boolean (a goal or an assumption)."""
    value = sympy.sympify(expr)
    if not isinstance(value, sympy.logic.boolalg.Boolean):
        raise TypeError(
            f"{what} must be a sympy boolean (a relation such as sympy.Eq(x, 3)), "
            f"got {type(value).__name__}: {value}"
        )
    return value


def build_query(goal: sympy.Basic, assumptions: Sequence[sympy.Basic]) -> Query:
    tr = Translator()
    lenient = [tr.formula(a).lenient_true for a in assumptions]
    strict_goal = tr.formula(goal).strict
    # Axioms are collected while translating, so read them last.
    premises = [*tr.axioms, *lenient]
    return Query(goal, tuple(assumptions), tr, premises, z3.Not(strict_goal))


def to_smtlib(query: Query, *, rlimit: int | None = None, seed: int | None = None,
              solver: z3.Solver | None = None) -> str:
    """An SMT-LIB2 script of the query; ``unsat`` means proved.

    Self-contained: every symbol and function is declared, then the premises, the
    negated goal and ``(check-sat)``; without ``rlimit``/``seed`` it sets no option, so
    any SMT-LIB solver (cvc5 included) reads it.  ``solver``: a solver that already holds
    the query's assertions (in its own context), printed instead of building one in Z3's
    shared context.  It opens with ``(set-logic ALL)`` (standard SMT-LIB; cvc5 reads it
    without complaint)."""
    s = solver
    if s is None:
        s = z3.Solver()
        for a in query.assertions:
            s.add(a)
    asked = f"does {' and '.join(map(str, query.assumptions)) or 'True'} imply {query.goal}?"
    header = [f"; verishape query: {' '.join(asked.split())}",  # one comment line, whatever str() printed
              "; unsat = proved, sat = refuted (model is a counterexample)"]
    if rlimit is not None:
        header.append(f"(set-option :rlimit {rlimit})")
    if seed is not None:
        header.append(f"(set-option :smt.random_seed {seed})")
    # Standard SMT-LIB: every theory (integers, bit-vectors, IEEE floats) may occur.
    header.append("(set-logic ALL)")
    return "\n".join(header) + "\n" + s.to_smt2()
