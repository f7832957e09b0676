"""verishape's solver layer: torch's sympy shape expressions, decided exactly.

``prove(goal, assumptions)`` answers "proved", "refuted" (with a concretely checked
counterexample) or "unknown".  Integer arithmetic follows Python (floor division, modulo
with the sign of the divisor), floats are IEEE doubles, torch's domain limits are side
conditions, and anything untranslatable is opaque.
"""

from .prover import Prover, Stats, default_prover, prove, smtlib, stats
from .result import PROVED, REFUTED, UNKNOWN, Limits, SolveResult

__all__ = [
    "PROVED",
    "REFUTED",
    "UNKNOWN",
    "Limits",
    "Prover",
    "SolveResult",
    "Stats",
    "default_prover",
    "prove",
    "smtlib",
    "stats",
]
