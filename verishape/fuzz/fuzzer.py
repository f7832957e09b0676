"""Drive hypothesis over one target: draw cases, check them, shrink findings.

Each (op, mode, round) gets its own seed derived from the user's seed and the op's name,
so an op's result does not depend on which other ops run or in which process.  A round
stops at the first finding (hypothesis then shrinks it to a minimal case); the next round
ignores the kinds already found, so one op can report several distinct problems.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import time
from typing import Any

import sympy
from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.errors import FlakyFailure
from hypothesis import strategies as st

from .check import Notes, Verdict, check_point, check_trace_point, hint_point
from .inputs import Case, too_large
from .ops import Target
from .report import Finding
from .sizes import edges, output_numel_ok, pick, shapes_at
from .strategies import mutated_cases
from .trace import BACKED, OP_ERRORS, UNBACKED, Trace, meta_function, run_traced
from .triage import classify

MODES = {"backed": (BACKED,), "unbacked": (UNBACKED,), "both": (BACKED, UNBACKED)}


@dataclasses.dataclass
class FuzzConfig:
    max_examples: int = 50
    seed: int = 0
    modes: tuple[str, ...] = (BACKED, UNBACKED)
    inside_points: int = 2
    outside_points: int = 1
    max_rounds: int = 3
    time_budget_s: float | None = None   # per op; makes results depend on machine speed


class _Found(Exception):
    def __init__(self, verdict: Verdict, case: Case, point: tuple[tuple[int, ...], ...] | None,
                 python_dispatcher: bool) -> None:
        super().__init__(verdict.kind)
        self.verdict, self.case, self.point, self.python_dispatcher = verdict, case, point, python_dispatcher


def derive_seed(base: int, *parts: object) -> int:
    digest = hashlib.sha256(":".join(map(str, (base, *parts))).encode()).hexdigest()
    return int(digest[:12], 16)


def _targets(data: st.DataObject, trace: Trace, ranks: list[int]) -> dict[sympy.Symbol, int]:
    edge = edges(trace)
    choices = st.one_of(st.sampled_from(edge), st.integers(0, 64))
    return {sym: data.draw(choices) for sym in sorted(trace.dims, key=str)}


def _explore(target: Target, case: Case, mode: str, pyd: bool, data: st.DataObject,
             cfg: FuzzConfig, notes: Notes, ignore: set[str], depth: int = 0) -> None:
    """Check one drawn case: trace point, solver points inside, one point outside."""
    def report(verdict: Verdict | None, at: Case, point: tuple[tuple[int, ...], ...] | None) -> None:
        if verdict is not None and verdict.kind not in ignore:
            # a verdict may name the shapes where it shows (a broken pin, a generic size)
            raise _Found(verdict, at, verdict.shapes if verdict.shapes is not None else point, pyd)

    if too_large(case):
        notes["skipped:too_large"] += 1
        return
    verdict, trace = check_trace_point(target.fn, case, mode, pyd, notes)
    report(verdict, case, None)
    if trace is None or trace.outputs is None:
        return
    notes["traced"] += 1
    hint = case.shapes()
    ranks = [len(s) for s in hint]
    start = hint_point(trace, hint)
    for _ in range(cfg.inside_points):
        point = pick(trace, ranks, _targets(data, trace, ranks))
        if point is None or point == start or not output_numel_ok(trace, point):
            continue
        shapes = shapes_at(trace, hint, point)
        at = case.with_shapes(shapes)
        if too_large(at):
            continue
        notes["solver_points"] += 1
        where = "inside_guards" if mode == BACKED else "inside_asserts"
        report(check_point(target.fn, at, trace, point, notes, where), case, shapes)
    edges_ = [c for c in trace.guards + trace.ranges if not isinstance(c, (sympy.logic.boolalg.BooleanAtom))]
    if mode == BACKED and depth == 0 and edges_ and cfg.outside_points:
        for _ in range(cfg.outside_points):
            cond = edges_[data.draw(st.integers(0, len(edges_) - 1))]
            point = pick(trace, ranks, _targets(data, trace, ranks), violate=cond)
            if point is None:
                continue
            notes["outside_points"] += 1
            _explore(target, case.with_shapes(shapes_at(trace, hint, point)), mode, pyd, data, cfg,
                     notes, ignore, depth + 1)


class _OutOfTime(KeyboardInterrupt):
    """Raised past the time budget.  Hypothesis passes a KeyboardInterrupt straight through
    (any other exception would be a failure to shrink, or trip its consistency checks);
    :func:`_round` catches it before it can reach anyone else."""


#: Extra seconds a found failure may spend shrinking past the budget.
SHRINK_GRACE_S = 3.0


def _round(target: Target, seeds: list[Case], mode: str, cfg: FuzzConfig, round_no: int,
           ignore: set[str], notes: Notes, deadline: float | None) -> tuple[_Found | None, int]:
    calls = 0
    last: list[_Found] = []

    @settings(max_examples=cfg.max_examples, database=None, derandomize=False, deadline=None,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
              phases=(Phase.explicit, Phase.generate, Phase.shrink), report_multiple_bugs=False,
              print_blob=False)
    @seed(derive_seed(cfg.seed, target.full_name, mode, round_no))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        nonlocal calls
        if deadline is not None and time.monotonic() > deadline + (SHRINK_GRACE_S if last else 0.0):
            raise _OutOfTime
        calls += 1
        case = data.draw(mutated_cases(seeds))
        # Unbacked tracing always runs under the python dispatcher, as torch's tracers do.
        pyd = mode == UNBACKED or data.draw(st.booleans())
        try:
            _explore(target, case, mode, pyd, data, cfg, notes, ignore)
        except _Found as found:
            last.append(found)   # the shrinker only keeps smaller failures: the last is the best
            raise

    try:
        run()
    except _Found as found:
        return found, calls
    except _OutOfTime:
        return (last[-1] if last else None), calls
    except FlakyFailure as group:
        # A failure that did not fail again on hypothesis's final replay (an op with
        # nondeterministic errors): report the failure as it was seen.
        found_in = [e for e in group.exceptions if isinstance(e, _Found)]
        if not found_in:
            raise
        return found_in[0], calls
    return None, calls


def _triaged(target: Target, found: _Found, mode: str,
             notes: Notes) -> tuple[Verdict, tuple[tuple[int, ...], ...] | None, str]:
    """The found verdict after the maintainer's checks (:mod:`.triage`), where it shows, and the
    meta function the fake run enters there (for grouping by root cause).

    Run once per finding, after hypothesis has shrunk it: the checks cost a few eager and fake
    runs each, too many to repeat on every failing example the shrinker tries.
    """
    case = found.case
    trace = run_traced(target.fn, case, case.shapes(), mode, found.python_dispatcher)
    shapes = found.point if found.point is not None else case.shapes()
    verdict = classify(target.name, target.fn, case.with_shapes(shapes), trace, hint_point(trace, shapes),
                       found.verdict, notes, mode == UNBACKED or found.python_dispatcher)
    point = verdict.shapes if verdict.shapes is not None else found.point
    where = point if point is not None else case.shapes()
    meta_fn = meta_function(target.fn, case.with_shapes(where), where, mode, found.python_dispatcher)
    return verdict, point, meta_fn


def fuzz_target(target: Target, cfg: FuzzConfig) -> dict[str, Any]:
    """Fuzz one target in every configured mode; a JSON-ready per-op result."""
    start = time.monotonic()
    result: dict[str, Any] = {"op": target.name, "variant": target.variant, "status": "ok",
                              "seeds": 0, "examples": 0, "findings": 0, "notes": {},
                              "finding_records": []}
    try:
        seeds = target.seeds()
    except OP_ERRORS as exc:
        result["status"] = f"no_seeds: {type(exc).__name__}"
        return result
    result["seeds"] = len(seeds)
    if not seeds:
        result["status"] = "no_seeds"
        return result
    notes: Notes = collections.Counter()
    deadline = None if cfg.time_budget_s is None else start + cfg.time_budget_s
    records: list[Finding] = []
    for i, mode in enumerate(cfg.modes):
        ignore: set[str] = set()
        mode_deadline = None if deadline is None else start + cfg.time_budget_s * (i + 1) / len(cfg.modes)
        for round_no in range(cfg.max_rounds):
            found, calls = _round(target, seeds, mode, cfg, round_no, ignore, notes, mode_deadline)
            result["examples"] += calls
            if found is None:
                break
            ignore.add(found.verdict.kind)
            verdict, point, meta_fn = _triaged(target, found, mode, notes)
            records.append(Finding(target.name, target.variant, mode, found.python_dispatcher, verdict,
                                   found.case, point, target.fn_source, target.imports, meta_fn))
    result["findings"] = len(records)
    result["notes"] = dict(sorted(notes.items()))
    result["finding_records"] = [f.to_json() for f in records]
    result["time_s"] = round(time.monotonic() - start, 3)
    return result
