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
    from .prover import (
        Prover,
        Stats,
        asked_by,
        current_asker,
        default_prover,
        prove,
        smtlib,
        stats,
    )
    from .result import PROVED, REFUTED, UNKNOWN, Limits, SolveResult

#: Exported name -> the submodule defining it, imported on first use (PEP 562): the
#: standard-library-only modules (``solvers.encoding``, ``solvers.result``) then load
#: without Z3, SymPy or torch, so ``verishape proofs`` reads the proof store without them.
_EXPORTS = {
    **dict.fromkeys(("Prover", "Stats", "asked_by", "current_asker", "default_prover", "prove", "smtlib", "stats"),
                    "prover"),
    **dict.fromkeys(("PROVED", "REFUTED", "UNKNOWN", "Limits", "SolveResult"), "result"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "PROVED",
    "REFUTED",
    "UNKNOWN",
    "Limits",
    "Prover",
    "SolveResult",
    "Stats",
    "asked_by",
    "current_asker",
    "default_prover",
    "prove",
    "smtlib",
    "stats",
]
