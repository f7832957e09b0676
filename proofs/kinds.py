"""The two vocabularies a proof is filed under, named once.

*Why* a question was asked (:class:`Decision`) is written in the obligation of each proof
record (``Obligation.kind``) and shown by ``verishape.explain`` and the audit; *who* asked
(:class:`Asker`) is written beside each obligation in the proof store and filters
``verishape proofs list --kind``.  Both stay plain strings where they are stored (JSON, the
store's SQLite rows, pickled widening records), so a store written before this module reads
the same; these enums are where the values are listed, described and checked: a kind
outside them is a verishape bug, raised where it is passed.  Importing this module needs
neither torch nor a solver (the proofs command reads the store without them).
"""

from __future__ import annotations

import enum


class _Vocabulary(str, enum.Enum):
    """A string-valued enum whose members print as their value on every Python version
    (``str()`` and f-strings), so reports read as they did with plain strings."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def checked(cls, value: str) -> str:
        """``value`` as the plain string stored, after checking it is a member."""
        try:
            return str(cls(value).value)
        except ValueError:
            raise ValueError(f"{cls.__name__} {value!r} is not one of {', '.join(m.value for m in cls)} "
                             "(this is a verishape bug)") from None


class Decision(_Vocabulary):
    """Why a decision was asked, with the words reports use (:attr:`description`)."""

    GUARD_AVOIDED = "guard_avoided"
    DDE_AVOIDED = "dde_avoided"
    GUARD_OR_FALSE = "guard_or_false"
    GUARD_OR_TRUE = "guard_or_true"
    ASSERT_DISCHARGED = "assert_discharged"
    STATIC_QUERY = "static_query"
    SPECIALIZATION_WIDENED = "specialization_widened"
    GUARD_REWRITTEN = "guard_rewritten"
    GUARD_DROPPED = "guard_dropped"
    GUARD_SET_EQUIVALENCE = "guard_set_equivalence"
    RANGE_TIGHTENED = "range_tightened"
    DIVISOR_NONZERO = "divisor_nonzero"
    CONSTRAINT_REASON = "constraint_reason"
    SUGGESTED_CHECK = "suggested_check"
    AUDIT = "audit"
    FUZZ_PIN = "fuzz_pin"
    GUARD_FILTERED = "guard_filtered"

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    Decision.GUARD_AVOIDED: "backed comparison implied by existing guards and ranges: no new guard",
    Decision.DDE_AVOIDED: "comparison on unbacked symbols decided: no data-dependent error",
    Decision.GUARD_OR_FALSE: "guard_or_false decided by proof instead of its fallback",
    Decision.GUARD_OR_TRUE: "guard_or_true decided by proof instead of its fallback",
    Decision.ASSERT_DISCHARGED: "runtime assert implied by earlier facts: not emitted",
    Decision.STATIC_QUERY: "static query (statically_known_*, Inductor size queries) answered",
    Decision.SPECIALIZATION_WIDENED: "0/1 specialization widened: the size-1 trace equals the generic graph and "
                                     "its shape guards are implied",
    Decision.GUARD_REWRITTEN: "guard minimization: a guard replaced by an equivalent simpler one",
    Decision.GUARD_DROPPED: "guard minimization: a guard implied by the others, dropped",
    Decision.GUARD_SET_EQUIVALENCE: "guard minimization: the installed guards proved equivalent to stock's",
    Decision.RANGE_TIGHTENED: "guard minimization: a range check tightened to what the guards imply",
    Decision.DIVISOR_NONZERO: "guard minimization: a divisor proved nonzero before a guard that divides by it",
    Decision.CONSTRAINT_REASON: "export: the facts a constraint violation follows from",
    Decision.SUGGESTED_CHECK: "a torch._check proved to settle a data-dependent error",
    Decision.AUDIT: "verify-guards: a guard, assert or dropped guard checked over the declared space",
    Decision.FUZZ_PIN: "fuzzing: a size pinned by the program's own facts",
    Decision.GUARD_FILTERED: "proved_guard_filter: everything the shape guard checks proved on the declared space, "
                             "the guard dropped",
}


class Asker(_Vocabulary):
    """Who asked, recorded with each obligation in the proof store."""

    COMPILE = "compile"
    EXPORT = "export"
    AUDIT = "audit"
    FUZZ = "fuzz"
    MINIMIZE = "minimize"
    QUERY = "query"
