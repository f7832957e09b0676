"""What the solver decided in one ShapeEnv, for reports, tests and logs."""

from __future__ import annotations

import collections
import dataclasses
import logging

from verishape.proofs import ProofRecord
from verishape.proofs.kinds import Decision
from verishape.proofs.result import BY_BOUNDS

log = logging.getLogger("verishape")

#: Why a decision was asked, in the words reports use (every
#: :class:`verishape.proofs.kinds.Decision`).
KINDS = {str(kind): kind.description for kind in Decision}


@dataclasses.dataclass
class DecisionLog:
    """Every proof that changed an answer, plus counters for what fell back to stock."""

    records: list[ProofRecord] = dataclasses.field(default_factory=list)
    undecided: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)
    #: ``guard_or_false``/``guard_or_true`` fallbacks stock took unproved: (expr, value, where)
    fallbacks: list[tuple[object, bool, str | None]] = dataclasses.field(default_factory=list)
    #: answers stock gave in size-oblivious mode (sizes assumed >= 2): expr -> (value, where)
    size_oblivious: dict[object, tuple[bool, str | None]] = dataclasses.field(default_factory=dict)
    #: proofs refused because their premises contradict each other (stock decided instead):
    #: (expr, where).  Real inputs satisfy every premise, so each one is a verishape bug.
    vacuous: list[tuple[object, str | None]] = dataclasses.field(default_factory=list)
    #: guard minimizations (one per distinct guard list produced)
    minimizations: list[object] = dataclasses.field(default_factory=list)
    #: specializations widened (``compile(widen_specializations=True)``), with their evidence
    widened: list[object] = dataclasses.field(default_factory=list)
    #: specializations tried and not widened: (input size, why)
    not_widened: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: what ``verishape.proved_guard_filter`` did with this frame's shape guard, in words
    filtered: list[str] = dataclasses.field(default_factory=list)
    solver_time_s: float = 0.0
    _summarized: bool = False

    def add(self, record: ProofRecord) -> None:
        self.records.append(record)
        log.debug("verishape decision: %s", record)

    def proofs(self) -> list[ProofRecord]:
        """Every answer this env acted on: the decisions, then each minimization's
        rewrites, drops, range tightenings and equivalence proof."""
        out = list(self.records)
        for m in self.minimizations:
            out += [*m.rewrites, *m.dropped, *(t.proof for t in m.tightened)]
            if m.equivalence is not None:
                out.append(m.equivalence)
        return out

    def from_store(self) -> tuple[int, int]:
        """(answers read from the proof store, all answers) among :meth:`proofs`."""
        proofs = self.proofs()
        return sum(p.result.from_store for p in proofs), len(proofs)

    def counts(self) -> dict[str, int]:
        return dict(collections.Counter(r.obligation.kind for r in self.records))

    def summary(self) -> str:
        counts = self.counts()
        parts = [f"{n} {kind}" for kind, n in sorted(counts.items())] or ["no decisions"]
        text = (f"{', '.join(parts)}; {self.undecided} undecided (stock behaviour); "
                f"solver {self.solver_time_s * 1e3:.1f} ms")
        stored, total = self.from_store()
        if stored:
            text += f"; {stored} of {total} answers from the proof store"
        bounded = sum(p.result.reason == BY_BOUNDS for p in self.proofs())
        if bounded:  # Note [A bound the premises state]
            text += f"; {bounded} of {total} proved by the premises' bounds (no solver call)"
        if self.errors:
            text += f"; {len(self.errors)} solver failures fell back to stock"
        if self.vacuous:
            text += f"; {len(self.vacuous)} vacuous proofs refused (stock decided)"
        for ev in self.widened:
            text += f"; {ev.describe()}"  # type: ignore[attr-defined]
        for name, why in self.not_widened:
            text += f"; {name} not widened: {why}"
        for line in self.filtered:
            text += f"; proved_guard_filter: {line}"
        return text

    def log_summary(self, frame: str) -> None:
        if not self._summarized:
            self._summarized = True
            log.info("verishape frame %s: %s", frame, self.summary())
