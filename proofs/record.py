"""The record of one decision: what was asked, what the solver answered, and why.

A :class:`ProofRecord` is self-contained: the obligation is stored as sympy ``srepr``
text, which :func:`load_expr` parses back exactly (torch's shape functions included), so a
record saved as JSON can be re-checked later by an independent run of the solver
(:meth:`ProofRecord.recheck`) or by any SMT solver from its SMT-LIB2 script.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import sympy
from torch.utils._sympy import functions as torch_functions

import solvers
from solvers.result import SolveResult


def _namespace() -> dict[str, Any]:
    ns: dict[str, Any] = {name: getattr(sympy, name) for name in dir(sympy) if not name.startswith("_")}
    ns.update({name: getattr(torch_functions, name) for name in dir(torch_functions) if not name.startswith("_")})
    return ns


def dump_expr(expr: sympy.Basic) -> str:
    return sympy.srepr(expr)


def load_expr(text: str) -> sympy.Basic:
    """Inverse of :func:`dump_expr`; symbols keep their assumptions."""
    return sympy.sympify(text, locals=_namespace())


@dataclasses.dataclass(frozen=True)
class Obligation:
    """Do ``premises`` imply ``goal``?  ``kind`` says why it was asked (for example
    ``"guard"``, ``"runtime_assert"``, ``"guard_or_false"``, ``"query"``)."""

    goal: sympy.Basic
    premises: tuple[sympy.Basic, ...] = ()
    kind: str = "query"
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "goal": str(self.goal),
            "goal_srepr": dump_expr(self.goal),
            "premises": [str(p) for p in self.premises],
            "premises_srepr": [dump_expr(p) for p in self.premises],
            "kind": self.kind,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Obligation:
        return cls(
            goal=load_expr(data["goal_srepr"]),
            premises=tuple(load_expr(p) for p in data["premises_srepr"]),
            kind=data.get("kind", "query"),
            source=data.get("source"),
        )


@dataclasses.dataclass(frozen=True)
class ProofRecord:
    """``decided``: the truth value a decision gave the expression it was asked about
    (the goal is that expression, or its negation when ``decided`` is False)."""

    obligation: Obligation
    result: SolveResult
    decided: bool | None = None

    @classmethod
    def decide(cls, obligation: Obligation, prover: solvers.Prover | None = None) -> ProofRecord:
        prover = prover or solvers.default_prover()
        return cls(obligation, prover.prove(obligation.goal, obligation.premises))

    def __str__(self) -> str:
        ob, res = self.obligation, self.result
        premises = " and ".join(map(str, ob.premises)) or "nothing"
        line = f"[{ob.kind}] {ob.goal}: {res.status}"
        if res.vacuous:
            line += " (vacuously: the premises contradict each other)"
        if res.counterexample is not None:
            cex = ", ".join(f"{k}={v}" for k, v in res.counterexample.items())
            how = "raises" if res.undefined_goal else "is false"
            line += f"; it {how} at {cex}"
        if res.status == solvers.UNKNOWN and res.reason:
            line += f" ({res.reason})"
        line += f"  [from {premises}; {res.time_s * 1e3:.1f} ms{', cached' if res.cached else ''}]"
        if ob.source:
            line += f"  at {ob.source}"
        return line

    def to_json(self) -> dict[str, Any]:
        return {"obligation": self.obligation.to_json(), "result": self.result.to_json(), "decided": self.decided}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProofRecord:
        return cls(Obligation.from_json(data["obligation"]), SolveResult.from_json(data["result"]),
                   data.get("decided"))

    @classmethod
    def loads(cls, text: str) -> ProofRecord:
        return cls.from_json(json.loads(text))

    def to_smtlib(self) -> str:
        return solvers.smtlib(self.obligation.goal, self.obligation.premises)

    def recheck(self) -> SolveResult:
        """Decide the obligation again with a fresh prover (no shared cache)."""
        return solvers.Prover().prove(self.obligation.goal, self.obligation.premises)
