"""verishape fuzz-meta repro: hash_tensor, compiled_rejects_specialization

op:       hash_tensor
kind:     compiled_rejects_specialization (compiled_rejects)
mode:     backed symbolic sizes (torch.compile(dynamic=True) / torch.export)
where:    outside_guards
message:  the guards pin t0_size0 to 2 (Eq(t0_size0, 2)); eager accepts t0_size0=3
torch documents this: torch documents that a guard pinning a dynamic dim to one value specializes it: torch.export and mark_dynamic report a constraint violation, torch.compile recompiles
blame:    documented
settings: mode=backed, python_dispatcher=False, duck_shape=False, specialize_zero_one=True, fake_mode=FakeTensorMode(allow_non_fake_inputs=False), unbacked_inputs=None, torch=2.13.0+cpu
found by: verishape 0.1.0 fuzz-meta --seed 0 (torch 2.13.0+cpu)

Run: python hash_tensor-backed-compiled_rejects_specialization.py   (exit 1 and REPRODUCES: while the difference is there; exit 0 otherwise)
"""
import logging
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

fn = torch.hash_tensor


def call(t0):
    """The call under test, tensor inputs as parameters."""
    return fn(t0)


# The tensor inputs: (dtype, order of dims in memory, stride kind, values cycled to fill it)
SPECS = [
    (torch.float32, None, 'dense', (-8.478, -1.766)),  # t0
]
SHAPES = [(3,)]  # the input sizes
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



class Call(torch.nn.Module):
    def forward(self, *tensors):
        return call(*tensors)


if __name__ == "__main__":
    _, error = run(lambda: call(*inputs(SHAPES)))
    print("eager at", SHAPES, ":", full(error) if error else "accepts")
    static, static_error = static_fake_run(SHAPES)
    # at static sizes nothing is pinned: each size compiles on its own (one recompile per size)
    print("fake at static sizes:", full(static_error) if static_error else "accepts")
    tensors = inputs(TRACE_SHAPES)
    # every size that can be dynamic is declared so (0 and 1 are specialized anyway)
    dims = [{d: torch.export.Dim(f"t{i}_{d}") for d in range(t.dim()) if t.size(d) >= 2}
            for i, t in enumerate(tensors)]
    try:
        torch.export.export(Call(), tuple(tensors), dynamic_shapes=(tuple(dims),))
        e_error = None
    except Exception as exc:   # the claimed error is matched by its text below
        e_error = exc
    print("torch.export with dynamic sizes at", TRACE_SHAPES, ":", full(e_error) if e_error else "accepts")
    # the claim is a pin to one value, not a range guard (which export also reports)
    pinned = e_error is not None and SPECIALIZED_TEXT in str(e_error)
    if e_error is not None and not pinned:
        print("export fails, but not by specializing a size to a constant")
    claim = pinned and next(line.strip(" -") for line in str(e_error).splitlines() if SPECIALIZED_TEXT in line)
    done("eager accepts " + str(SHAPES) + ", but tracing pins a dynamic size: " + claim
         if error is None and pinned else None)
