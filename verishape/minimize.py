"""Guard minimization: drop every shape guard implied by the guards that remain.

Premises are only what the installed guard function really checks (soundness rule 2):
the guards we keep and the range checks torch emits for every input symbol.  Guards are
tried most expensive first, so implied expensive guards go and cheap ones stay.  Each
removal is proved from the set that remains at that moment; since every guard removed
later is itself implied by the final set, the final set implies all of them.  The result
is then proved equivalent to the stock list in one more query, and installed only if
that proof succeeds: a failed or unknown step leaves the stock list.

A guard that constrains a symbol used as a divisor elsewhere is never dropped (rule 3):
the guard function evaluates guards in order, and a guard that raises is a failed guard,
so the protector must stay in front of the guard that divides.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import sympy
from torch.utils._sympy import functions as tf

import solvers
from proofs import Obligation, ProofRecord

from . import facts

_DIVIDING = (tf.FloorDiv, tf.CleanDiv, tf.Mod, tf.PythonMod, sympy.Mod, tf.ModularIndexing, tf.IntTrueDiv,
             tf.FloatTrueDiv)


@dataclasses.dataclass
class Minimization:
    stock: list[sympy.Basic]
    kept: list[sympy.Basic]
    dropped: list[ProofRecord]
    equivalence: ProofRecord | None
    time_s: float

    @property
    def applied(self) -> bool:
        return self.equivalence is not None and self.equivalence.result.status == solvers.PROVED


def cost(expr: sympy.Basic) -> int:
    """How expensive a guard is to check: operations, with division and modulo
    counted heavier (they compile to Python calls)."""
    return int(sympy.count_ops(expr)) + 4 * sum(1 for _ in expr.atoms(*_DIVIDING))


def divisor_symbols(exprs: Sequence[sympy.Basic], prover: solvers.Prover) -> set[sympy.Symbol]:
    """Symbols of divisors that might be zero.  A divisor that is nonzero by its
    symbols' own assumptions (``s0`` is positive) needs no guard in front of it."""
    out: set[sympy.Symbol] = set()
    for e in exprs:
        for node in e.atoms(*_DIVIDING):
            for divisor in node.args[1:]:
                if divisor.free_symbols and prover.prove(sympy.Ne(divisor, 0)).status != solvers.PROVED:
                    out |= divisor.free_symbols
    return out


def minimize(guards: Sequence[sympy.Basic], ranges: dict[sympy.Symbol, object],
             prover: solvers.Prover, *, size_like: set[sympy.Symbol] | frozenset[sympy.Symbol] = frozenset(),
             witness: dict[sympy.Symbol, int] | None = None) -> Minimization:
    """``witness``: values satisfying every guard (the size hints), sparing vacuity solves."""
    start = time.perf_counter()
    stock = list(dict.fromkeys(guards))
    protectors = divisor_symbols(stock, prover)
    kept = list(stock)
    dropped: list[ProofRecord] = []

    def range_premises(exprs: Sequence[sympy.Basic]) -> list[sympy.Basic]:
        symbols = set().union(*(e.free_symbols for e in exprs)) if exprs else set()
        return facts.range_facts(symbols, ranges, size_like=size_like)

    for g in sorted(stock, key=cost, reverse=True):
        if g.free_symbols & protectors:
            continue
        rest = [k for k in kept if k is not g]
        premises = facts.relevant(g, rest)
        if not premises:
            continue
        premises = premises + range_premises([g, *premises])
        result = prover.prove(g, premises, witness=witness)
        if result.status == solvers.PROVED and not result.vacuous:
            dropped.append(ProofRecord(Obligation(g, tuple(premises), "guard_dropped"), result, True))
            kept = rest
    equivalence = None
    if dropped:
        goal = sympy.And(*stock)
        premises = kept + range_premises(stock)
        result = prover.prove(goal, premises, witness=witness)
        equivalence = ProofRecord(Obligation(goal, tuple(premises), "guard_set_equivalence"), result, True)
        if result.status != solvers.PROVED or result.vacuous:
            kept = list(stock)
    return Minimization(stock, kept, dropped, equivalence, time.perf_counter() - start)
