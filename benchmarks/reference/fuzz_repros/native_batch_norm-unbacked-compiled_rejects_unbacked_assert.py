"""verishape fuzz-meta repro: native_batch_norm, compiled_rejects_unbacked_assert

op:       native_batch_norm
kind:     compiled_rejects_unbacked_assert (compiled_rejects)
mode:     unbacked sizes (torch._dynamo.mark_unbacked / data-dependent sizes), python dispatcher on
where:    trace_point
message:  eager accepts, the unbacked trace's runtime assert Eq(u1, u3); Eq(u1, u4); Eq(u1, u5) fails at u0=1, u1=2, u2=1, u3=3, u4=3, u5=3, u6=3
blame:    eager
evidence: static sizes: the fake tensor rejects it too (RuntimeError: Attempting to broadcast a dimension of length 3 at -1! Mismatching argument at index 1 had torch.Size([3]); but expected shape should be broadcastable to [2])
evidence: public API: torch.nn.functional.batch_norm rejects the same inputs (ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 2, 1])); the aten op's eager kernel lacks that check, the meta is right
settings: mode=unbacked, python_dispatcher=True, duck_shape=False, specialize_zero_one=True, fake_mode=FakeTensorMode(allow_non_fake_inputs=False), unbacked_inputs=create_unbacked_symint() with torch._check(s >= 0), torch=2.13.0+cpu
found by: verishape 0.1.0 fuzz-meta --seed 0 (torch 2.13.0+cpu)

Run: python native_batch_norm-unbacked-compiled_rejects_unbacked_assert.py   (exit 1 and REPRODUCES: while the difference is there; exit 0 otherwise)
"""
import logging
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

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
RUNTIME_ASSERT_TEXT = 'Runtime assertion failed for expression'
SPECIALIZED_TEXT = 'specialized it to be a constant'

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


def static_fake_run(shapes):
    """The op on fake tensors of fixed sizes (no symbols): does it happen without dynamic shapes?
    (outputs' metadata, None) or (None, the error)."""
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)  # the error is printed below
    try:
        with FakeTensorMode():
            return describe(call(*[make(shape, dtype, perm, stride)
                                   for (dtype, perm, stride, _), shape in zip(SPECS, shapes)])), None
    except (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError, AssertionError,
            ArithmeticError, KeyError) as exc:
        return None, exc


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


def full(exc):
    """The whole error text, indented, as a bug report quotes it."""
    body = "\n".join("    " + line for line in str(exc).strip().splitlines())
    return f"{type(exc).__name__}:\n{body}"



torch._dynamo.config.capture_scalar_outputs = True


def unbacked_program(sizes):
    """`call` with every input size unbacked: the sizes arrive as tensor data (tolist()),
    as data-dependent sizes do, so the compiled code checks them with its runtime asserts
    (no Dynamo guard on input sizes can stand in for them)."""
    flat = sizes.tolist()
    tensors, i = [], 0
    for (dtype, perm, stride, _), shape in zip(SPECS, SHAPES):
        dims = flat[i:i + len(shape)]
        i += len(shape)
        for d in dims:
            torch._check(d >= 0)
        tensors.append(make(dims, dtype, perm, stride).zero_())
    return call(*tensors)


def compiled_run(compiled, shapes):
    try:
        compiled(torch.tensor([n for shape in shapes for n in shape], dtype=torch.int64))
        return None
    except Exception as exc:   # the claimed error is matched by its text below
        return exc


if __name__ == "__main__":
    _, error = run(lambda: call(*inputs(SHAPES)))
    print("eager at", SHAPES, ":", full(error) if error else "accepts")
    static, static_error = static_fake_run(SHAPES)
    print("fake at static sizes:", full(static_error) if static_error else "accepts")
    compiled = torch.compile(unbacked_program, fullgraph=True, backend="aot_eager")
    if TRACE_SHAPES != SHAPES:   # the same compiled program works at other sizes
        ok = compiled_run(compiled, TRACE_SHAPES)
        print("compiled at", TRACE_SHAPES, ":", full(ok) if ok else "accepts")
    c_error = compiled_run(compiled, SHAPES)
    print("compiled at", SHAPES, ":", full(c_error) if c_error else "accepts")
    claimed = c_error is not None and RUNTIME_ASSERT_TEXT in str(c_error)
    if c_error is not None and not claimed:
        print("the compiled call fails, but not with the claimed runtime assert")
    done("eager accepts, the compiled code (unbacked sizes) raises " + words(c_error)
         + ("" if static_error is None else "; static-size fake tensors reject it too")
         if error is None and claimed else None)
