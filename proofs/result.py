"""The answer to one query, and the limits it was computed under."""

from __future__ import annotations

import dataclasses
from typing import Literal

Status = Literal["proved", "refuted", "unknown"]
Value = int | float

PROVED: Status = "proved"
REFUTED: Status = "refuted"
UNKNOWN: Status = "unknown"

#: ``SolveResult.reason`` of a refutation the prover's first tier found without the solver
#: (:mod:`verishape.solvers.refute`): near the caller's witness, or (none given) within the
#: premises' own bounds.  Such an answer is neither a solver's nor the proof store's.
NEAR_WITNESS = "refuted at a point near the witness"
AT_BOUNDS = "refuted at a point within the premises' bounds"
FIRST_TIER = (NEAR_WITNESS, AT_BOUNDS)
#: ``SolveResult.reason`` of a proof the prover's proving tier gave without the solver
#: (:mod:`verishape.solvers.implied`): the goal is a premise, or the premises' bounds show it.
BY_BOUNDS = "proved by the premises' own bounds"
#: the reasons of answers given without the solver: never stored, never a store hit
WITHOUT_SOLVER = (*FIRST_TIER, BY_BOUNDS)


@dataclasses.dataclass(frozen=True)
class Limits:
    """Deterministic solver limits.

    ``rlimit`` is Z3's resource counter: the same query stops at the same point on any
    machine, under any load, so the decisions (and the guards installed from them) do
    not depend on timing.  ``timeout_ms`` is only a wall-clock backstop.
    """

    rlimit: int = 1_000_000
    timeout_ms: int = 5_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rlimit <= 0:
            raise ValueError(f"rlimit must be positive, got {self.rlimit}; use e.g. 4_000_000")
        if self.timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be positive, got {self.timeout_ms}; use e.g. 5000")


@dataclasses.dataclass(frozen=True)
class SolveResult:
    """``status`` is ``"proved"``, ``"refuted"`` or ``"unknown"``.

    * proved: every assignment satisfying the assumptions makes the goal defined and
      true.  ``vacuous`` is set when the assumptions are contradictory.
    * refuted: ``counterexample`` (symbol name -> Python int/float) satisfies the
      assumptions and the goal is false there, or raises (``undefined_goal``).  Every
      counterexample has been re-checked by concrete evaluation.
    * unknown: the solver gave up (``reason`` says why); callers must act as if they
      had never asked.

    ``cached``: answered from this prover's in-memory cache.  ``from_store``: answered
    from the persistent proof store (:mod:`verishape.proofs.store`) without a solver call; the
    answer is the one the solver gave when it was stored, and ``time_s`` is then the
    time the lookup took.
    """

    status: Status
    counterexample: dict[str, Value] | None = None
    vacuous: bool = False
    undefined_goal: bool = False
    exact: bool = True
    reason: str = ""
    time_s: float = 0.0
    cached: bool = False
    from_store: bool = False

    @property
    def proved(self) -> bool:
        return self.status == PROVED

    @property
    def refuted(self) -> bool:
        return self.status == REFUTED

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "counterexample": self.counterexample,
            "vacuous": self.vacuous,
            "undefined_goal": self.undefined_goal,
            "exact": self.exact,
            "reason": self.reason,
            "time_s": self.time_s,
            "cached": self.cached,
            "from_store": self.from_store,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> SolveResult:
        return cls(**data)  # type: ignore[arg-type]
