"""Check a candidate finding the way the op's maintainer would, before blaming the meta.

A difference between a fake run and eager is not yet a meta bug.  A maintainer asks, and so
does :func:`classify`, in this order:

1. **Is the path private or unchecked by contract?**  ``_unsafe_*`` ops skip checks on
   purpose, and ``as_strided`` does not check storage bounds in its meta: such findings go to
   their own class (``private``), never to the meta bugs.
2. **Does it happen at static sizes too?**  The fake tensor is run at the same concrete sizes
   without any symbol.  If it shows the same difference, the meta function itself is wrong
   whatever the dynamic-shape machinery does; if not, only the symbolic (or unbacked) path is.
3. **For unbacked sizes: does it survive moving off 0 and 1?**  torch's unbacked rules
   (size-oblivious reasoning, ``guard_or_false``) assume an unbacked size is neither 0 nor 1
   and skip checks that matter only there.  Every 0/1 size of the witness is moved to a
   generic value (2, 3, 4, the trace's constants); a difference that is gone at all of them is
   documented behaviour, one that stays is reported at the generic sizes instead.
4. **Is the meta stricter than eager because eager is the buggy side?**  When the fake run
   rejects what an aten-level op accepts, the same input goes through the public API
   (``native_batch_norm`` -> ``F.batch_norm``).  If the public API rejects it, the aten kernel
   lacks a check and the meta is right: the finding blames eager.

Each step adds one sentence of evidence to the verdict, so a report says *why* it blames whom.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import sympy
import torch

from .check import Notes, Verdict, generic_values, check_point
from .compare import Eager, diff, error_line, run_eager, unsupported_reason
from .inputs import Case, real_inputs, too_large
from .sizes import shapes_at
from .trace import OP_ERRORS, UNBACKED, Trace, static_fake

#: Kinds where the fake run accepts an input eager rejects.
ACCEPTS = frozenset({"meta_accepts_eager_rejects", "unbacked_unchecked_error", "shape_determined_permissive"})
#: Kinds where the fake run's metadata differs from eager's.
MISMATCH = frozenset({"shape_mismatch", "stride_mismatch", "storage_offset_mismatch", "dtype_mismatch",
                      "output_structure_mismatch", "unbacked_silent_shape_mismatch"})
#: Kinds where the fake or compiled side is stricter than eager.
STRICTER = frozenset({"meta_rejects_eager_accepts", "compiled_rejects_unbacked_assert", "symbolic_trace_error"})

#: Why an unbacked difference that is gone at generic sizes is torch's documented behaviour.
ZERO_ONE = ("torch's unbacked-size rules (size-oblivious reasoning, guard_or_false/guard_or_true) treat an "
            "unbacked size as neither 0 nor 1 and skip checks that only matter there; the difference is gone "
            "once every 0/1 size is moved to a generic size")

PRIVATE_UNSAFE = ("a private op whose contract is to skip checks (_unsafe_*): its callers guarantee valid "
                  "inputs, so a missing check is not a meta bug")
PRIVATE_STORAGE = ("as_strided does not check storage bounds in its meta (views outside the storage are the "
                   "caller's responsibility, as the docs warn); eager's storage check has no meta counterpart")

#: Why an index tensor's out-of-bounds error at sizes that leave no valid index is not a meta bug.
RUNTIME_INDEX_CHECK = ("index tensor values are bounds-checked by the kernel that reads them (eager, and the "
                       "indirect-indexing asserts Inductor generates), never by meta functions; an empty dimension "
                       "makes every index out of bounds, and that run-time check reports it")

#: Why a probability check that sizes make fail (no categories: the sum is 0) is not a meta bug.
RUNTIME_VALUE_CHECK = ("a check on tensor values (probabilities) that the kernel makes when it runs, in eager and "
                       "in compiled code (which calls the same kernel); the sizes make every filling fail it, "
                       "and that run-time check reports it")
#: Why an aten-level restriction that the public API never meets is not a meta bug.
PUBLIC_ACCEPTS = ("the aten op's eager kernel restricts its inputs further (e.g. to contiguous ones) than its meta, "
                  "but the public API accepts the same inputs (it prepares them first), so no user meets the "
                  "difference; the meta's permissiveness is not a bug")
EAGER_INTERNAL = ("eager fails one of its own internal assertions: a bug in the eager kernel, whatever the meta does")

_UNSAFE = re.compile(r"(^|[._])_unsafe")
#: The messages of kernels that bounds-check index *tensors* (advanced indexing, gather/scatter,
#: index_select, losses' targets, embedding_bag); select()'s check of an int argument is not one.
_INDEX_BOUNDS = re.compile(r"index -?\d+ is out of bounds for dimension|index is out of bounds for dimension|"
                           r"index out of range in self|target -?\d+ is out of bounds|not in the valid range",
                           re.IGNORECASE)
_PROBABILITY = re.compile(r"probabilit", re.IGNORECASE)
_STORAGE = re.compile(r"setStorage|storage size|out of bounds for storage", re.IGNORECASE)


def _private(op: str, verdict: Verdict) -> str | None:
    if _UNSAFE.search(op):
        return PRIVATE_UNSAFE
    if op.startswith("as_strided") and _STORAGE.search(verdict.eager_error + verdict.message):
        return PRIVATE_STORAGE
    return None


# ----------------------------------------------------------------------------- public API


def _bind(args: tuple[Any, ...], kwargs: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    return bound


def _batch_norm(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Callable[[], Any]:
    if len(args) > 3 and isinstance(args[3], bool):   # _native_batch_norm_legit.no_stats
        b = _bind(args, kwargs, ("input", "weight", "bias", "training", "momentum", "eps"))
        b.update(running_mean=None, running_var=None)
    else:
        b = _bind(args, kwargs, ("input", "weight", "bias", "running_mean", "running_var", "training",
                                 "momentum", "eps"))
    return lambda: torch.nn.functional.batch_norm(
        b["input"], b.get("running_mean"), b.get("running_var"), b.get("weight"), b.get("bias"),
        bool(b.get("training", False)), b.get("momentum", 0.1), b.get("eps", 1e-5))


def _layer_norm(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Callable[[], Any]:
    b = _bind(args, kwargs, ("input", "normalized_shape", "weight", "bias", "eps"))
    return lambda: torch.nn.functional.layer_norm(b["input"], b["normalized_shape"], b.get("weight"),
                                                  b.get("bias"), b.get("eps", 1e-5))


def _group_norm(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Callable[[], Any]:
    b = _bind(args, kwargs, ("input", "weight", "bias", "N", "C", "HxW", "group", "eps"))
    return lambda: torch.nn.functional.group_norm(b["input"], b["group"], b.get("weight"), b.get("bias"),
                                                  b.get("eps", 1e-5))


#: aten-level ops reachable through a public API that validates more: (public name, adapter).
PUBLIC_EQUIVALENTS: dict[str, tuple[str, Callable[[tuple[Any, ...], Mapping[str, Any]], Callable[[], Any]]]] = {
    "native_batch_norm": ("torch.nn.functional.batch_norm", _batch_norm),
    "_native_batch_norm_legit": ("torch.nn.functional.batch_norm", _batch_norm),
    "native_layer_norm": ("torch.nn.functional.layer_norm", _layer_norm),
    "native_group_norm": ("torch.nn.functional.group_norm", _group_norm),
}


def public_api(op: str, case: Case) -> tuple[str, str | None] | None:
    """(public API name, its error or None when it accepts) for ``op``'s public equivalent at
    ``case``'s inputs; None when ``op`` has no public equivalent."""
    entry = PUBLIC_EQUIVALENTS.get(op)
    if entry is None:
        return None
    name, adapter = entry
    args, kwargs = real_inputs(case)
    try:
        adapter(tuple(args), kwargs)()
    except OP_ERRORS as exc:
        return name, error_line(exc)
    return name, None


# ----------------------------------------------------------------------------- static sizes


def static_shows(fn: Callable[..., Any], case: Case, verdict: Verdict, eager: Eager,
                 python_dispatcher: bool = False) -> tuple[bool, str]:
    """Does the fake tensor at ``case``'s static sizes (with the finding's dispatcher setting)
    show the same difference?  (yes/no, the sentence of evidence)."""
    outputs, structure, error = static_fake(fn, case, python_dispatcher)
    if error is not None and unsupported_reason(error) is not None:
        return False, f"static sizes: fake tensors cannot run it ({error_line(error)}), so nothing is learnt there"
    if isinstance(error, (TypeError, AttributeError)) and verdict.kind in ACCEPTS | MISMATCH:
        # not a rejection of the input: the meta itself crashes (a bug of its own)
        return True, f"static sizes: the fake tensor crashes ({error_line(error)}), a meta bug of its own"
    if verdict.kind in ACCEPTS:
        if error is None:
            return True, "static sizes: the fake tensor accepts it too (the meta lacks the check at any sizes)"
        return False, f"static sizes: the fake tensor rejects it ({error_line(error)}); only the symbolic path skips it"
    if verdict.kind in STRICTER:
        if error is None:
            return False, "static sizes: the fake tensor accepts it, as eager does"
        return True, f"static sizes: the fake tensor rejects it too ({error_line(error)})"
    if verdict.kind in MISMATCH:
        if error is not None or eager.outputs is None:
            return False, f"static sizes: the fake tensor raises {error_line(error)}"
        d = diff(outputs, structure, eager, collections.Counter())
        same = d is not None and (d.kind == verdict.kind or (verdict.kind == "unbacked_silent_shape_mismatch"
                                                              and d.kind == "shape_mismatch"))
        if not same:
            return False, "static sizes: the fake tensor agrees with eager; only the symbolic path differs"
        assert d is not None
        return True, f"static sizes: the fake tensor differs too ({d.message})"
    return False, ""


# ----------------------------------------------------------------------------- 0 and 1


def _same_family(a: str, b: str) -> bool:
    return a == b or (a in ACCEPTS and b in ACCEPTS) or (a in MISMATCH and b in MISMATCH)


def move_off_0_1(fn: Callable[..., Any], case: Case, trace: Trace, point: Mapping[sympy.Symbol, int],
                 verdict: Verdict) -> tuple[Verdict | None, str]:
    """The same kind of difference at a point where every 0/1 size of ``point`` is generic
    (a verdict there), or None with the sentence saying what was tried."""
    small = sorted((s for s in trace.dims if point.get(s) in (0, 1)), key=str)
    if not small:
        return verdict, "0/1: no input size is 0 or 1 here, so size-oblivious rules do not explain it"
    tried = []
    for value in generic_values(trace):
        moved = {**point, **{s: value for s in small}}
        shapes = shapes_at(trace, case.shapes(), moved)
        at = case.with_shapes(shapes)
        if too_large(at):
            continue
        tried.append(value)
        if verdict.kind == "symbolic_trace_error":
            # An unbacked trace does not depend on the sizes: it fails at ``moved`` too, so
            # it is a gap exactly when eager accepts there.
            if run_eager(fn, at).error is None:
                return dataclasses.replace(verdict, shapes=shapes), (
                    f"0/1: moved {', '.join(map(str, small))} to {value}: eager still accepts, the unbacked "
                    f"trace still raises")
            continue
        found = check_point(fn, at, trace, moved, collections.Counter(), verdict.where)
        if found is not None and found.blame == "meta" and _same_family(found.kind, verdict.kind):
            return dataclasses.replace(found, shapes=shapes), (
                f"0/1: moved {', '.join(map(str, small))} to {value}: the difference stays ({found.message})")
    return None, f"0/1: moved {', '.join(map(str, small))} to each of {tried}: the difference is gone"


# ----------------------------------------------------------------------------- all together


def classify(op: str, fn: Callable[..., Any], case: Case, trace: Trace | None,
             point: Mapping[sympy.Symbol, int] | None, verdict: Verdict, notes: Notes,
             python_dispatcher: bool = False) -> Verdict:
    """``verdict`` with its blame and evidence after the maintainer's checks (module doc).

    ``case`` holds the sizes where the verdict was found (``verdict.shapes`` overrides them),
    ``point`` the trace's symbols there; both are needed only for unbacked traces.
    """
    if verdict.blame != "meta":
        return verdict
    private = _private(op, verdict)
    if private is not None:
        notes["triage:private"] += 1
        return dataclasses.replace(verdict, blame="private", evidence=(private,))
    at = case.with_shapes(verdict.shapes) if verdict.shapes is not None else case
    eager = run_eager(fn, at)
    shows, sentence = static_shows(fn, at, verdict, eager, python_dispatcher)
    evidence = [sentence] if sentence else []
    if "INTERNAL ASSERT FAILED" in verdict.eager_error:
        notes["triage:eager_internal_assert"] += 1
        evidence.append("eager: " + EAGER_INTERNAL)
        return dataclasses.replace(verdict, blame="eager", evidence=tuple(evidence))
    if verdict.kind == "shape_determined_permissive":
        if _INDEX_BOUNDS.search(verdict.eager_error):
            notes["triage:runtime_index_check"] += 1
            evidence.append("index bounds: eager's error is a kernel's bounds check of index tensor values")
            return dataclasses.replace(verdict, documented=RUNTIME_INDEX_CHECK, blame="documented",
                                       evidence=tuple(evidence))
        if _PROBABILITY.search(verdict.eager_error):
            notes["triage:runtime_value_check"] += 1
            evidence.append("probabilities: eager's error is the kernel's check of the probability values")
            return dataclasses.replace(verdict, documented=RUNTIME_VALUE_CHECK, blame="documented",
                                       evidence=tuple(evidence))
    public = public_api(op, at)
    if public is not None and verdict.kind in STRICTER | MISMATCH and eager.error is None and public[1]:
        notes["triage:eager_missing_check"] += 1
        evidence.append(f"public API: {public[0]} rejects the same inputs ({public[1]}); the aten op's eager "
                        f"kernel lacks that check, the meta is right")
        return dataclasses.replace(verdict, blame="eager", evidence=tuple(evidence))
    if public is not None and verdict.kind in ACCEPTS and public[1] is None:
        notes["triage:public_api_accepts"] += 1
        evidence.append(f"public API: {public[0]} accepts the same inputs")
        return dataclasses.replace(verdict, documented=PUBLIC_ACCEPTS, blame="documented", evidence=tuple(evidence))
    unbacked = trace is not None and trace.mode == UNBACKED and point is not None
    if unbacked and not shows and verdict.kind != "compiled_rejects_unbacked_assert":
        assert trace is not None and point is not None
        if verdict.shapes is not None:
            point = {**point, **{s: verdict.shapes[leaf][d] for s, (leaf, d) in trace.dims.items()}}
        moved, why = move_off_0_1(fn, at, trace, point, verdict)
        evidence.append(why)
        if moved is None:
            notes["triage:documented_0_1"] += 1
            return dataclasses.replace(verdict, documented=ZERO_ONE, blame="documented", evidence=tuple(evidence))
        verdict = moved
    return dataclasses.replace(verdict, evidence=tuple(evidence))
