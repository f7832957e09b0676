"""Decide whether one case, at one point, is a finding.

Two kinds of point: the *trace point* (the sizes the op was traced at: the prediction is
checked where it was made, including error behaviour) and *solver points* (other sizes
that satisfy every recorded guard or runtime assert: the prediction claims to hold there
too, so any difference means the guards are unsound or the symbolic formula is wrong).
:func:`replay` runs the same check from a repro snippet, so a repro fails exactly when the
fuzzer's finding still holds.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy

from .compare import Eager, diff, error_line, is_value_error, predict, run_eager, unsupported_reason
from .inputs import Case
from .sizes import holds
from .trace import BACKED, UNBACKED, Trace, run_traced, static_fake_ok

Notes = collections.Counter


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A finding's essentials: what differs, where, and both sides' errors."""

    kind: str
    message: str
    where: str = "trace_point"
    eager_error: str = ""
    meta_error: str = ""


def hint_point(trace: Trace, shapes: Sequence[Sequence[int]]) -> dict[sympy.Symbol, int]:
    return {sym: int(shapes[leaf][dim]) for sym, (leaf, dim) in trace.dims.items()}


def check_trace_point(fn: Callable[..., Any], case: Case, mode: str, python_dispatcher: bool,
                      notes: Notes) -> tuple[Verdict | None, Trace | None]:
    """Trace at ``case``'s own sizes and compare with eager there."""
    eager = run_eager(fn, case)
    trace = run_traced(fn, case, case.shapes(), mode, python_dispatcher)
    if trace.error is not None and not python_dispatcher and unsupported_reason(trace.error) is None:
        # C++ composite kernels reach symbolic sizes only through the python dispatcher,
        # which every symbolic tracer in torch enables; failing without it alone is no bug.
        retry = run_traced(fn, case, case.shapes(), mode, True)
        if retry.error is None:
            notes["needs_python_dispatcher"] += 1
            trace = retry
    if trace.error is not None:
        reason = unsupported_reason(trace.error)
        if reason is not None:
            notes[f"meta_unsupported:{reason}"] += 1
            return None, None
        if eager.error is not None:
            notes["both_reject"] += 1
            return None, None
        kind = "meta_rejects_eager_accepts" if not static_fake_ok(fn, case) else "symbolic_trace_error"
        return Verdict(kind, f"eager accepts, fake tensor raises {error_line(trace.error)}",
                       meta_error=error_line(trace.error)), None
    return check_point(fn, case, trace, hint_point(trace, case.shapes()), notes, "trace_point", eager), trace


def check_point(fn: Callable[..., Any], case: Case, trace: Trace, point: Mapping[sympy.Symbol, int],
                notes: Notes, where: str, eager: Eager | None = None) -> Verdict | None:
    """Compare eager at ``case`` (whose sizes are ``point``) with ``trace``'s prediction.

    Backed: the point satisfies the guards, so meta's acceptance and formulas apply.
    Unbacked: if a runtime assert fails at the point, compiled code raises there, which is
    sound whatever eager does; otherwise nothing would catch a difference.
    """
    if eager is None:
        eager = run_eager(fn, case)
    if trace.mode == UNBACKED and not holds([*trace.asserts, *trace.ranges], point):
        notes["unbacked_assert_fires" + ("" if eager.error else "_eager_accepts")] += 1
        return None
    if eager.error is not None:
        if is_value_error(eager.error):
            notes["excluded:value_dependent_error"] += 1
            return None
        if trace.data_dependent:
            # The fake run read tensor values (``.item()``, ``nonzero``) into fresh unbacked
            # sizes: whether eager's error is about those values is unknowable to meta.
            notes["excluded:data_dependent_values"] += 1
            return None
        kind = "unbacked_unchecked_error" if trace.mode == UNBACKED else "meta_accepts_eager_rejects"
        return Verdict(kind, f"fake tensor accepts, eager raises {error_line(eager.error)}", where,
                       eager_error=error_line(eager.error))
    predicted = predict(trace, point)
    assert predicted is not None
    d = diff(predicted, trace.structure, eager, notes)
    if d is None:
        notes["agree"] += 1
        return None
    kind = d.kind
    if trace.mode == UNBACKED:
        if kind in ("stride_mismatch", "storage_offset_mismatch"):
            # Unbacked sizes make torch choose the general layout on purpose (reshape
            # copies when a view cannot be proved); compiled code then produces exactly
            # that layout, so only shapes, dtypes and structure must match eager.
            notes["unbacked_layout_differs"] += 1
            return None
        if kind == "shape_mismatch":
            kind = "unbacked_silent_shape_mismatch"
    return Verdict(kind, d.message, where)


def replay(fn: Callable[..., Any], case: Case, mode: str = BACKED, python_dispatcher: bool = False,
           point: Sequence[Sequence[int]] | None = None) -> None:
    """Re-run one check; raise AssertionError if the difference is still there.

    ``case`` holds the trace sizes; ``point`` (optional) the input shapes of a solver point
    inside the trace's conditions, where eager is compared with the trace's prediction.
    """
    notes: Notes = collections.Counter()
    verdict, trace = check_trace_point(fn, case, mode, python_dispatcher, notes)
    if verdict is None and point is not None and trace is not None and trace.outputs is not None:
        env = hint_point(trace, point)
        if not holds(trace.conditions(), env):
            raise ValueError("the point does not satisfy the trace's guards: torch changed")
        verdict = check_point(fn, case.with_shapes(point), trace, env, notes, "solver_point")
    if verdict is not None:
        raise AssertionError(f"{verdict.kind}: {verdict.message}")
    print("no difference: the finding does not reproduce")
