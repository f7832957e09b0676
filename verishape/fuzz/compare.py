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

import torch

from .inputs import Case, TensorSpec, real_inputs, real_tensor
from .trace import OP_ERRORS, OutMeta, Trace, eager_meta

#: Eager error messages that may come from values rather than sizes (matched
#: case-insensitively), grouped by what the values are about; the group names the reason an
#: error is excluded in the report (``value_dependent_error:<group>``).
VALUE_ERROR_GROUPS: dict[str, tuple[str, ...]] = {
    "index_range": (
        r"out of (\w+ )?(range|bounds)", r"indexing axis", r"index .* is out of", r"invalid index",
        r"index_select\(\): index", r"not in bounds", r"labels? .* (out of|must be)", r"target .* out of bounds",
        r"expected .*values? (to be )?in", r"should be in range", r"must be in the range", r"is not a valid value",
        r"not in the valid range",
    ),
    "linear_algebra": (
        r"positive[- ]definite", r"singular", r"not invertible", r"illegal value", r"failed to converge",
        # pivots and zero pivots are values of the LU/LDL inputs, not sizes
        r"pivots given to", r"is zero and using it on lu_solve",
    ),
    "probabilities": (r"probability", r"multinomial", r"nan", r"\binf\b"),
    "sign_or_magnitude": (
        r"non-?negative", r"must be (positive|>= 0|nonzero)", r"greater than or equal to 0", r"negative",
        r"integer (division|modulo) by zero", r"zerodivision", r"overflow", r"all elements of input should be",
        r"max(imum)? value", r"cannot be converted", r"found (an )?invalid",
    ),
    "ordering": (r"sorted", r"unique", r"contain"),
    "shape_from_values": (r"bins", r"weights should"),
    # counts and offsets read from tensor values (mask ones, bag offsets, segment lengths,
    # repeat totals): no generic filling makes them consistent, so never re-run (below)
    "counts_from_values": (
        r"offsets", r"segment", r"lengths", r"repeats", r"number of ones in mask", r"expected i < index_size",
        r"allocated size does not match required size",
    ),
    # an eager backend limitation (MKL's DFTI rejects some stride/size configurations that
    # pocketfft accepts); the compiled code calls the same kernel and fails the same way
    # (likewise oneDNN, which refuses some deconvolution configurations)
    "eager_backend": (r"MKL FFT error", r"could not create a primitive descriptor"),
}

#: Groups whose errors are excluded without re-running eager on other values: the values
#: that would satisfy them (lengths summing to a size, offsets) depend on the sizes, so a
#: generic filling failing proves nothing about shape-determinism.  Linear algebra too: a
#: singular or indefinite matrix is never decided by sizes alone (a degenerate shape fails
#: with a shape error instead), and the matrix may be a reshape of the input
#: (``linalg.tensorinv``/``tensorsolve``), where the identity on the last two dims is singular;
#: the deterministic campaign reported those two as shape-determined until this was added.
NO_RETRY_GROUPS = frozenset({"counts_from_values", "eager_backend", "linear_algebra"})

#: Every pattern, flat (kept for callers that match messages themselves).
VALUE_ERROR_PATTERNS = tuple(p for group in VALUE_ERROR_GROUPS.values() for p in group)
_VALUE_RE = re.compile("|".join(VALUE_ERROR_PATTERNS), re.IGNORECASE)
_GROUP_RES = {name: re.compile("|".join(group), re.IGNORECASE) for name, group in VALUE_ERROR_GROUPS.items()}

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


def value_error_group(exc: BaseException) -> str | None:
    """The first :data:`VALUE_ERROR_GROUPS` group whose patterns match the error, or None."""
    text = str(exc)[:2000]
    for name, regex in _GROUP_RES.items():
        if regex.search(text):
            return name
    return None


#: Other tensor values tried when an eager error looks value-dependent.  Each is chosen to
#: satisfy a family of value conditions: zeros (in-range indices, sorted, non-negative,
#: valid offsets), ones (probabilities, positive weights, pivots of 1), the identity on the
#: last two dims (positive-definite, invertible, converging factorizations), small
#: non-negative integers (indices and counts that are not all equal).
ALTERNATIVE_FILLS = ("zeros", "ones", "identity", "small_ints")


def filled_tensor(spec: TensorSpec, fill: str) -> torch.Tensor:
    """A real tensor of ``spec``'s shape, dtype and layout holding the values ``fill`` names."""
    if fill == "identity":
        t = real_tensor(dataclasses.replace(spec, pool=(0,)))
        if t.dim() >= 2 and t.numel():
            t.diagonal(dim1=-2, dim2=-1).fill_(1)
        elif t.numel():
            t.fill_(1)
        return t
    pools = {"zeros": (0,), "ones": (1,), "small_ints": (0, 1, 2, 1)}
    return real_tensor(dataclasses.replace(spec, pool=pools[fill]))


def accepts_other_values(fn: Callable[..., Any], case: Case) -> str | None:
    """The first :data:`ALTERNATIVE_FILLS` filling at which eager accepts ``case``'s sizes and
    non-tensor arguments, or None when eager rejects every one of them.

    Why: an error that matches a value pattern may still be decided by sizes alone
    (``index_select`` from an empty dimension rejects every index); if no filling helps, the
    meta function had everything it needed to reject the input too.
    """
    for fill in ALTERNATIVE_FILLS:
        args, kwargs = case.map_specs(lambda i, s: filled_tensor(s, fill))
        try:
            fn(*args, **kwargs)
        except OP_ERRORS:
            continue
        return fill
    return None


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
