"""verishape's solver layer: torch's sympy shape expressions, decided exactly.

``prove(goal, assumptions)`` answers "proved", "refuted" (with a concretely checked
counterexample) or "unknown".  Integer arithmetic follows Python (floor division, modulo
with the sign of the divisor), floats are IEEE doubles, torch's domain limits are side
conditions, and anything untranslatable is opaque.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verishape.proofs.result import PROVED, REFUTED, UNKNOWN, Limits, SolveResult

    from .prover import (OVER_BUDGET, RLIMIT_STOPS, Budget, Prover, Stats, asked_by, current_asker, decide,
                         default_prover, point, prove, recheck, smtlib, spending, stats)

#: Exported name -> the module defining it, imported on first use (PEP 562): importing
#: ``verishape.solvers`` for its result types (which live in the standard-library-only
#: :mod:`verishape.proofs.result`) then loads neither Z3, SymPy nor torch.
_EXPORTS = {
    **dict.fromkeys(("OVER_BUDGET", "RLIMIT_STOPS", "Budget", "spending", "Prover", "Stats", "asked_by", "current_asker", "decide", "default_prover", "point", "prove",
                     "recheck", "smtlib", "stats"), f"{__name__}.prover"),
    **dict.fromkeys(("PROVED", "REFUTED", "UNKNOWN", "Limits", "SolveResult"), "verishape.proofs.result"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["OVER_BUDGET", "PROVED", "REFUTED", "RLIMIT_STOPS", "Budget", "spending", "UNKNOWN", "Limits", "Prover", "SolveResult", "Stats", "asked_by", "current_asker",
           "decide", "default_prover", "point", "prove", "recheck", "smtlib", "stats"]
