"""Decide whether one case, at one point, is a finding.

Kinds decided here beyond plain metadata differences: ``compiled_rejects_unbacked_assert``
(an unbacked trace's runtime assert fails where eager accepts), ``compiled_rejects_specialization``
(a backed trace's guards pin a size that eager accepts other values of) and
``shape_determined_permissive`` (eager's error looks value-dependent but no other values help).

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

from verishape.solvers.concrete import holds
from verishape.proofs.kinds import Decision

from .compare import (NO_RETRY_GROUPS, Eager, accepts_other_values, diff, error_line, predict, run_eager,
                      unsupported_reason, value_error_group)
from .inputs import Case
from .sizes import MAX_SIDE, edges, shapes_at
from .trace import BACKED, UNBACKED, Trace, raise_site, run_traced, static_fake_ok

Notes = collections.Counter


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A finding's essentials: what differs, where, and both sides' errors."""

    kind: str
    message: str
    where: str = "trace_point"
    eager_error: str = ""
    meta_error: str = ""
    #: None for a meta bug; one sentence when torch documents the behaviour.
    documented: str | None = None
    #: Input shapes where the difference shows, when not the point the check was asked
    #: about (a specialization's broken pin, a 0/1 assert moved to a generic size).
    shapes: tuple[tuple[int, ...], ...] | None = None
    #: Whose bug it is, after the maintainer's checks of :mod:`.triage`: ``meta`` (the meta or
    #: decomposition), ``eager`` (the eager kernel lacks a check its public API makes),
    #: ``documented`` (torch's documented behaviour) or ``private`` (an unchecked-by-contract
    #: path: ``_unsafe_*`` ops, ``as_strided`` storage bounds).
    blame: str = "meta"
    #: What the triage checked and saw, one sentence each (static sizes, 0/1 moved, public API).
    evidence: tuple[str, ...] = ()
    #: Where the fake run raised (``torch/_meta_registrations.py:123 in meta_x``), when it did.
    site: str = ""

    def __post_init__(self) -> None:
        if self.documented is not None and self.blame == "meta":
            object.__setattr__(self, "blame", "documented")


#: Why each documented divergence is expected (the ``documented`` field of a finding).
SIZE_OBLIVIOUS = ("torch assumes unbacked sizes are not 0 or 1 (size-oblivious semantics), so a runtime "
                  "assert may reject a 0/1 size that eager handles (e.g. broadcasting a size 1)")
SPECIALIZED = ("torch documents that a guard pinning a dynamic dim to one value specializes it: "
               "torch.export and mark_dynamic report a constraint violation, torch.compile recompiles")


def hint_point(trace: Trace, shapes: Sequence[Sequence[int]]) -> dict[sympy.Symbol, int]:
    return {sym: int(shapes[leaf][dim]) for sym, (leaf, dim) in trace.dims.items()}


def check_trace_point(fn: Callable[..., Any], case: Case, mode: str, python_dispatcher: bool,
                      notes: Notes, specialization: bool = True) -> tuple[Verdict | None, Trace | None]:
    """Trace at ``case``'s own sizes and compare with eager there; backed, also look for a
    pinned dynamic size that eager does not need (``specialization``)."""
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
                       meta_error=error_line(trace.error), site=raise_site(trace.error)), trace
    verdict = check_point(fn, case, trace, hint_point(trace, case.shapes()), notes, "trace_point", eager)
    if verdict is None and specialization and trace.mode == BACKED and trace.outputs is not None:
        verdict = check_specialization(fn, case, trace, notes)
    return verdict, trace


def check_point(fn: Callable[..., Any], case: Case, trace: Trace, point: Mapping[sympy.Symbol, int],
                notes: Notes, where: str, eager: Eager | None = None) -> Verdict | None:
    """Compare eager at ``case`` (whose sizes are ``point``) with ``trace``'s prediction.

    Backed: the point satisfies the guards, so meta's acceptance and formulas apply.
    Unbacked: if a runtime assert fails at the point, compiled code raises there: they agree
    when eager raises too, else compiled code rejects what eager accepts (a finding,
    ``documented`` when torch's size-oblivious semantics explain it); otherwise nothing
    would catch a difference.
    """
    if eager is None:
        eager = run_eager(fn, case)
    if trace.mode == UNBACKED:
        if any(not c.free_symbols <= point.keys() for c in [*trace.asserts, *trace.ranges]):
            # An assert on a size the op itself produced (nonzero, item()): whether it
            # fails depends on values the point does not fix, so nothing is decided here.
            notes["unbacked_assert_on_op_sizes"] += 1
            return None
        failing = _failing(trace, point)
        if failing:
            if eager.error is not None:
                notes["unbacked_assert_fires"] += 1   # compiled code raises where eager does
                return None
            return _compiled_rejects(fn, case, trace, point, failing, notes, where)
    if eager.error is not None:
        return _eager_rejects(fn, case, trace, eager, notes, where)
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


def _eager_rejects(fn: Callable[..., Any], case: Case, trace: Trace, eager: Eager, notes: Notes,
                   where: str) -> Verdict | None:
    """Eager raises where meta accepts: a finding unless the error is about tensor values."""
    assert eager.error is not None
    group = value_error_group(eager.error)
    kind = "unbacked_unchecked_error" if trace.mode == UNBACKED else "meta_accepts_eager_rejects"
    if group is not None:
        if group in NO_RETRY_GROUPS:
            notes[f"excluded:value_dependent_error:{group}"] += 1
            return None
        fill = accepts_other_values(fn, case)
        if fill is not None:
            # Eager accepts these sizes with other values: the error is about the values,
            # which a meta function cannot see, so accepting is correct.
            notes[f"excluded:value_dependent_error:{group}"] += 1
            return None
        kind = "shape_determined_permissive"
    if trace.data_dependent:
        # The fake run read tensor values (``.item()``, ``nonzero``) into fresh unbacked
        # sizes: whether eager's error is about those values is unknowable to meta.
        notes["excluded:data_dependent_values"] += 1
        return None
    message = f"fake tensor accepts, eager raises {error_line(eager.error)}"
    if kind == "shape_determined_permissive":
        message += " whatever the tensor values (zeros, ones, identity, small ints all rejected)"
    return Verdict(kind, message, where, eager_error=error_line(eager.error))


def _compiled_rejects(fn: Callable[..., Any], case: Case, trace: Trace, point: Mapping[sympy.Symbol, int],
                      failing: list[sympy.Basic], notes: Notes, where: str) -> Verdict:
    """Eager accepts where a runtime assert of the unbacked trace fails: compiled code raises.

    Documented (size-oblivious semantics) only if the failing asserts involve a size set to
    0 or 1 *and* no generic size (>= 2) in its place also fails them where eager accepts:
    such a generic point is reported instead, as a meta bug.
    """
    small = sorted({sym for c in failing for sym in c.free_symbols
                    if sym in point and point[sym] in (0, 1)}, key=str)
    if not small:
        return _assert_verdict(failing, point, where, None, None)
    template = case.shapes()
    for value in generic_values(trace):
        moved = {**point, **{sym: value for sym in small}}
        still = _failing(trace, moved)
        if not still:
            continue
        shapes = shapes_at(trace, template, moved)
        if run_eager(fn, case.with_shapes(shapes)).error is None:
            notes["unbacked_assert_moved_off_0_1"] += 1
            return _assert_verdict(still, moved, where, None, shapes)
    return _assert_verdict(failing, point, where, SIZE_OBLIVIOUS, None)


def _failing(trace: Trace, point: Mapping[sympy.Symbol, int]) -> list[sympy.Basic]:
    """The unbacked trace's runtime asserts and ranges that do not hold at ``point``."""
    return [c for c in [*trace.asserts, *trace.ranges] if not holds([c], point)]


def generic_values(trace: Trace) -> list[int]:
    """Sizes >= 2 worth trying instead of a 0 or 1: small ones and the trace's edges."""
    return sorted({2, 3, 4, *(v for v in edges(trace) if v >= 2)})[:8]


def _assert_verdict(failing: list[sympy.Basic], point: Mapping[sympy.Symbol, int], where: str,
                    documented: str | None, shapes: tuple[tuple[int, ...], ...] | None) -> Verdict:
    at = ", ".join(f"{sym}={point[sym]}" for sym in sorted(point, key=str))
    text = "; ".join(str(c) for c in failing[:3])
    return Verdict("compiled_rejects_unbacked_assert",
                   f"eager accepts, the unbacked trace's runtime assert {text} fails at {at}", where,
                   meta_error=f"runtime assert {text}", documented=documented, shapes=shapes)


def pinned_symbols(trace: Trace) -> dict[sympy.Symbol, int]:
    """Symbols that the trace's own one-symbol conditions admit at exactly one value.

    Conservative: only conditions naming that symbol alone are used (a pin through several
    symbols is missed, never invented); a second admitted value up to ``MAX_SIDE`` refutes a
    pin at once, and a candidate pin is confirmed by the solver over all sizes.
    """
    from verishape.core.premises import Premises

    pins: dict[sympy.Symbol, int] = {}
    for sym in sorted(trace.dims, key=str):
        own = [c for c in [*trace.guards, *trace.ranges] if c.free_symbols == {sym}]
        if not any(c in trace.guards for c in own):
            continue
        admitted = [v for v in range(MAX_SIDE + 1) if holds(own, {sym: v})]
        if len(admitted) != 1:
            continue
        value = admitted[0]
        if Premises(own).ask(sympy.Eq(sym, value), Decision.FUZZ_PIN) is not None:
            pins[sym] = value
    return pins


def _dim_names(trace: Trace) -> dict[sympy.Symbol, sympy.Symbol]:
    """Backed symbols renamed after the input dim they stand for (``t0_size1``): torch's own
    names depend on how many symbols the process created before, so would make reports
    differ between ``--jobs`` settings."""
    return {sym: sympy.Symbol(f"t{leaf}_size{dim}") for sym, (leaf, dim) in trace.dims.items()}


def check_specialization(fn: Callable[..., Any], case: Case, trace: Trace, notes: Notes) -> Verdict | None:
    """A backed trace pinning an input size that eager accepts at another generic size.

    The other sizes stay at the trace's hints; only sizes >= 2 are tried for the pinned one
    (torch specializes 0 and 1 anyway, a separate documented rule).
    """
    pins = pinned_symbols(trace)
    if not pins:
        return None
    hint = hint_point(trace, case.shapes())
    for sym, value in pins.items():
        notes["pinned_sizes"] += 1
        for other in (value + 1, value - 1, 2, 2 * value):
            if other < 2 or other == value or other > MAX_SIDE:
                continue
            shapes = shapes_at(trace, case.shapes(), {**hint, sym: other})
            at = case.with_shapes(shapes)
            if run_eager(fn, at).error is None:
                names = _dim_names(trace)
                pin = "; ".join(str(c.xreplace(names)) for c in trace.guards if sym in c.free_symbols)[:300]
                dim = names[sym]
                return Verdict("compiled_rejects_specialization",
                               f"the guards pin {dim} to {value} ({pin}); eager accepts {dim}={other}",
                               "outside_guards", meta_error=f"guards {pin}", documented=SPECIALIZED,
                               shapes=shapes)
    return None


def replay(fn: Callable[..., Any], case: Case, mode: str = BACKED, python_dispatcher: bool = False,
           point: Sequence[Sequence[int]] | None = None) -> None:
    """Re-run one check; raise AssertionError if the difference is still there.

    ``case`` holds the trace sizes; ``point`` (optional) the input shapes of a solver point
    inside the trace's conditions, where eager is compared with the trace's prediction.
    """
    notes: Notes = collections.Counter()
    verdict, trace = check_trace_point(fn, case, mode, python_dispatcher, notes, specialization=False)
    if verdict is None and point is not None and trace is not None and trace.outputs is not None:
        env = hint_point(trace, point)
        if mode == BACKED and not holds(trace.conditions(), env):
            pinned = {sym for sym, v in pinned_symbols(trace).items() if env[sym] != v}
            if not pinned:
                raise ValueError("the point does not satisfy the trace's guards: torch changed")
            if run_eager(fn, case.with_shapes(point)).error is None:
                verdict = Verdict("compiled_rejects_specialization",
                                  f"the guards pin {sorted(str(_dim_names(trace)[p]) for p in pinned)}; "
                                  f"eager accepts {list(point)}")
        elif mode == UNBACKED or holds(trace.conditions(), env):
            verdict = check_point(fn, case.with_shapes(point), trace, env, notes, "solver_point")
    if verdict is not None:
        raise AssertionError(f"{verdict.kind}: {verdict.message}")
    print("no difference: the finding does not reproduce")
