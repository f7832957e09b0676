"""Compare eager results with a trace's prediction, and sort out what is not a bug.

Only what a compiler may rely on is compared: output structure, shape, dtype, and for
non-empty outputs the strides of dimensions longer than one and the storage offset.  Two
classes of difference are excluded on principle and counted instead:

* strides and offsets of zero-element tensors, and strides of size-1 dimensions, which no
  memory access ever uses (torch's own ``check_significant_strides`` ignores them too);
* errors that depend on tensor *values* rather than sizes (index out of range, non-PD
  matrices, invalid probabilities...): a meta function cannot see values, so accepting
  such an input is correct.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import sympy

from verishape.solvers import concrete

from .inputs import Case, real_inputs
from .trace import OP_ERRORS, OutMeta, Trace, eager_meta

#: Eager error messages that come from values, not sizes (matched case-insensitively).
VALUE_ERROR_PATTERNS = (
    r"out of (\w+ )?(range|bounds)", r"indexing axis", r"index .* is out of", r"invalid index", r"index_select\(\): index",
    r"positive[- ]definite", r"singular", r"not invertible", r"illegal value", r"failed to converge",
    r"probability", r"multinomial", r"nan", r"\binf\b", r"non-?negative", r"must be (positive|>= 0|nonzero)",
    r"greater than or equal to 0", r"negative", r"sorted", r"expected .*values? (to be )?in", r"should be in range",
    r"integer (division|modulo) by zero", r"zerodivision", r"must be in the range", r"not in bounds",
    r"found (an )?invalid", r"offsets", r"segment", r"labels? .* (out of|must be)", r"target .* out of bounds",
    r"is not a valid value", r"lengths", r"repeats", r"bins", r"overflow", r"all elements of input should be",
    r"max(imum)? value", r"weights should", r"unique", r"contain", r"cannot be converted",
    # pivots and zero pivots are values of the LU/LDL inputs, not sizes
    r"pivots given to", r"is zero and using it on lu_solve",
    # counts and offsets read from tensor values (mask ones, bag offsets, repeat totals)
    r"number of ones in mask", r"expected i < index_size", r"allocated size does not match required size",
    # an eager backend limitation (MKL's DFTI rejects some stride/size configurations that
    # pocketfft accepts); the compiled code calls the same kernel and fails the same way
    r"MKL FFT error",
)
_VALUE_RE = re.compile("|".join(VALUE_ERROR_PATTERNS), re.IGNORECASE)

#: Fake-mode errors that mean "not supported", not "wrong" (counted, never findings).
UNSUPPORTED_NAMES = ("DynamicOutputShapeException", "DataDependentOutputException",
                     "UnsupportedOperatorException", "GuardOnDataDependentSymNode",
                     "UnsupportedFakeTensorException", "MetadataMismatchError")


@dataclasses.dataclass
class Eager:
    outputs: list[OutMeta] | None
    structure: str = ""
    error: BaseException | None = None


def run_eager(fn: Callable[..., Any], case: Case) -> Eager:
    args, kwargs = real_inputs(case)
    try:
        out = fn(*args, **kwargs)
    except OP_ERRORS as exc:
        return Eager(None, error=exc)
    outputs, structure = eager_meta(out)
    return Eager(outputs, structure)


def error_line(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first[:300]}"


def is_value_error(exc: BaseException) -> bool:
    return bool(_VALUE_RE.search(str(exc)[:2000]))


def unsupported_reason(exc: BaseException) -> str | None:
    """Name of a fake-mode "cannot do this" error, or None for an ordinary rejection."""
    for cls in type(exc).__mro__:
        if cls.__name__ in UNSUPPORTED_NAMES:
            return cls.__name__
    text = str(exc)
    if "data-dependent" in text.lower() or "data dependent" in text.lower():
        return "DataDependent"
    return None


def predict(trace: Trace, point: Mapping[sympy.Symbol, int]) -> list[OutMeta] | None:
    """The trace's outputs evaluated at ``point``; a size that depends on symbols the point
    does not fix (an op's own unbacked output size) becomes None and is not compared."""
    if trace.outputs is None:
        return None

    def ev(e: Any) -> int | None:
        if isinstance(e, sympy.Basic) and not e.free_symbols <= point.keys():
            return None
        try:
            return int(concrete.evaluate(e, point))
        except (concrete.Undefined, concrete.Unevaluable):
            return None

    return [OutMeta(tuple(ev(s) for s in m.shape), tuple(ev(s) for s in m.stride), ev(m.offset), m.dtype)
            for m in trace.outputs]


@dataclasses.dataclass(frozen=True)
class Difference:
    kind: str      # shape_mismatch, stride_mismatch, storage_offset_mismatch, dtype_mismatch, output_structure_mismatch
    message: str


def diff(predicted: list[OutMeta], structure: str, eager: Eager, notes: dict[str, int]) -> Difference | None:
    """First significant difference between a prediction and eager's outputs."""
    assert eager.outputs is not None
    if structure != eager.structure or len(predicted) != len(eager.outputs):
        return Difference("output_structure_mismatch", f"meta outputs {structure}, eager {eager.structure}")
    for i, (p, e) in enumerate(zip(predicted, eager.outputs)):
        if p.dtype != e.dtype:
            return Difference("dtype_mismatch", f"output {i}: meta dtype {p.dtype}, eager {e.dtype}")
        if any(a is not None and a != b for a, b in zip(p.shape, e.shape)) or len(p.shape) != len(e.shape):
            return Difference("shape_mismatch", f"output {i}: meta shape {_fmt(p.shape)}, eager {list(e.shape)}")
        if None in p.shape:
            notes["data_dependent_size"] = notes.get("data_dependent_size", 0) + 1
            continue
        if math.prod(e.shape) == 0:
            if p.stride != e.stride or p.offset != e.offset:
                notes["zero_numel_strides"] = notes.get("zero_numel_strides", 0) + 1
            continue
        bad = [d for d, n in enumerate(e.shape) if n > 1 and p.stride[d] is not None and p.stride[d] != e.stride[d]]
        if bad:
            return Difference("stride_mismatch", f"output {i} of shape {list(e.shape)}: meta strides "
                                                 f"{_fmt(p.stride)}, eager {list(e.stride)}")
        if p.stride != e.stride:
            notes["insignificant_strides"] = notes.get("insignificant_strides", 0) + 1
        if p.offset is not None and p.offset != e.offset:
            return Difference("storage_offset_mismatch", f"output {i}: meta storage offset {p.offset}, eager {e.offset}")
    return None


def _fmt(values: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("?" if v is None else str(v) for v in values) + "]"
