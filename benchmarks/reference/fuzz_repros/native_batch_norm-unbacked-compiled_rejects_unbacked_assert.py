"""verishape fuzz-meta repro: native_batch_norm, compiled_rejects_unbacked_assert

op:       native_batch_norm
kind:     compiled_rejects_unbacked_assert (compiled_rejects)
mode:     unbacked sizes (torch._dynamo.mark_unbacked / data-dependent sizes), python dispatcher on
where:    trace_point
message:  eager accepts, the unbacked trace's runtime assert Eq(u1, u3); Eq(u1, u4); Eq(u1, u5) fails at u0=1, u1=2, u2=1, u3=3, u4=3, u5=3, u6=3
found by: verishape 0.1.0 fuzz-meta --seed 0 (torch 2.13.0+cpu)

Run: python native_batch_norm-unbacked-compiled_rejects_unbacked_assert.py   (exit 1 and REPRODUCES: while the difference is there; exit 0 otherwise)
"""
import sys
import re

import torch

fn = torch.native_batch_norm


def call(t0, t1, t2, t3, t4):
    """The call under test, tensor inputs as parameters."""
    return fn(t0, t1, t2, t3, t4, True, 0.5, 0.6)


# The tensor inputs: (dtype, order of dims in memory, stride kind, values cycled to fill it)
SPECS = [
    (torch.float32, None, 'dense', (1.822, -3.522, -4.414, 2.329, 8.397, 4.319, -0.869, -0.437, 5.115, -6.255, 2.992, -2.982, 5.207, -3.21, 0.445, 3.039)),  # t0
    (torch.float32, None, 'dense', (-8.478, -1.766, -4.323, -2.4, -7.951)),  # t1
    (torch.float32, None, 'dense', (3.612, -8.068, -0.573, 3.129, -3.034)),  # t2
    (torch.float32, None, 'dense', (7.053, 5.068, 6.974, 7.387, 2.513)),  # t3
    (torch.float32, None, 'dense', (6.135, 2.553, 5.911, 2.149, 6.582)),  # t4
]
SHAPES = [(1, 2, 1), (3,), (3,), (3,), (3,)]  # the input sizes
TRACE_SHAPES = SHAPES

def make(sizes, dtype, perm, stride, values=None):
    """A tensor of `sizes` laid out as the fuzzer drew it, filled by cycling `values`.
    perm: the order of the dims in memory (None: row-major); stride "pad": rows padded by one
    element (storage offset 1); "double": every stride doubled."""
    order = perm if perm is not None else tuple(range(len(sizes)))
    stored = [sizes[p] for p in order]
    if stride == "pad" and stored:
        stored[-1] = stored[-1] + 1
    elif stride == "double":
        stored.append(2)
    t = torch.empty(stored, dtype=dtype)
    if stride == "pad" and stored:
        t = t.narrow(-1, 1, stored[-1] - 1)
    elif stride == "double":
        t = t.select(-1, 0)
    if perm is not None:
        t = t.permute(sorted(range(len(perm)), key=lambda i: perm[i]))
    if values is not None and t.numel():
        filler = torch.tensor(values, dtype=dtype).repeat(t.numel() // len(values) + 1)
        t.copy_(filler[:t.numel()].reshape(t.shape))
    return t


def inputs(shapes, fill=None):
    """Real tensors at `shapes` (values from SPECS, or all equal to `fill`)."""
    return [make(shape, dtype, perm, stride, values if fill is None else (fill,))
            for (dtype, perm, stride, values), shape in zip(SPECS, shapes)]


def describe(out, value=int):
    """(shape, stride, storage offset, dtype) of each tensor in a result (None: not a tensor)."""
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [(tuple(value(s) for s in t.shape), tuple(value(s) for s in t.stride()),
             value(t.storage_offset()), t.dtype) if isinstance(t, torch.Tensor) else None for t in leaves]


def done(difference):
    if difference is None:
        print("does not reproduce: eager and the traced/compiled run agree")
        sys.exit(0)
    print("REPRODUCES:", difference)
    sys.exit(1)


ERRORS = (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError, AssertionError,
          ArithmeticError, KeyError)  # how an op rejects its input


def run(thunk):
    """(result, None) or (None, the error the op raised)."""
    try:
        return thunk(), None
    except ERRORS as exc:
        return None, exc


def words(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def unbacked(shapes):
    """Real inputs at `shapes` with every size marked unbacked, as torch.export and
    mark_unbacked users (and data-dependent sizes) present them to the compiler."""
    tensors = inputs(shapes)
    for t in tensors:
        for d in range(t.dim()):
            torch._dynamo.decorators.mark_unbacked(t, d)
    return tensors


def compiled_run(compiled, shapes):
    try:
        compiled(*unbacked(shapes))
        return None
    except Exception as exc:   # dynamo wraps the failing assert in its own errors
        return exc


if __name__ == "__main__":
    _, error = run(lambda: call(*inputs(SHAPES)))
    print("eager at", SHAPES, ":", words(error) if error else "accepts")
    compiled = torch.compile(call, fullgraph=True, backend="aot_eager")
    if TRACE_SHAPES != SHAPES:   # the same compiled function works at other sizes
        ok = compiled_run(compiled, TRACE_SHAPES)
        print("compiled at", TRACE_SHAPES, ":", words(ok) if ok else "accepts")
        caused_by_sizes = ok is None
    c_error = compiled_run(compiled, SHAPES)
    print("compiled at", SHAPES, ":", words(c_error) if c_error else "accepts")
    if TRACE_SHAPES == SHAPES:
        caused_by_sizes = c_error is not None and re.search("assert|guard", str(c_error), re.I)
    done("eager accepts, the compiled code (unbacked sizes) raises " + words(c_error)
         if error is None and c_error is not None and caused_by_sizes else None)
