"""verishape fuzz-meta repro: as_strided, shape_determined_permissive

op:       as_strided
kind:     shape_determined_permissive (error_mismatch)
mode:     backed symbolic sizes (torch.compile(dynamic=True) / torch.export)
where:    trace_point
message:  fake tensor accepts, eager raises RuntimeError: setStorage: sizes [1], strides [1], storage offset 0, and itemsize 4 requiring a storage size of 4 are out of bounds for storage of size 0 whatever the tensor values (zeros, ones, identity, small ints all rejected)
blame:    private
evidence: as_strided does not check storage bounds in its meta (views outside the storage are the caller's responsibility, as the docs warn); eager's storage check has no meta counterpart
settings: mode=backed, python_dispatcher=False, duck_shape=False, specialize_zero_one=True, fake_mode=FakeTensorMode(allow_non_fake_inputs=False), unbacked_inputs=None, torch=2.13.0+cpu
found by: verishape 0.1.0 fuzz-meta --seed 0 (torch 2.13.0+cpu)

Run: python as_strided-backed-shape_determined_permissive.py   (exit 1 and REPRODUCES: while the difference is there; exit 0 otherwise)
"""
import logging
import sys
import contextlib

import torch
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

fn = torch.as_strided


def call(t0):
    """The call under test, tensor inputs as parameters."""
    return fn(t0, (1,), (1,), storage_offset=0)


# The tensor inputs: (dtype, order of dims in memory, stride kind, values cycled to fill it)
SPECS = [
    (torch.float32, None, 'dense', (-8.478,)),  # t0
]
SHAPES = [(0,)]  # the input sizes
TRACE_SHAPES = SHAPES
DISPATCHER = contextlib.nullcontext  # how the fuzzer traced it

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



def fake_run(shapes, at, unbacked):
    """Run `call` on fake tensors with one symbolic size per input dimension, as torch.compile
    and torch.export trace it: backed sizes hinted by `shapes`, or unbacked sizes (no hint).
    Returns the outputs' metadata with each size evaluated at the sizes `at`, and the
    conditions the prediction was made under (guards, runtime asserts): True when one holds
    at `at`, False when it fails there, None when it cannot be evaluated."""
    env = ShapeEnv(duck_shape=False)
    value_at = {}
    with FakeTensorMode(shape_env=env), DISPATCHER():
        tensors = []
        for i, ((dtype, perm, stride, _), shape) in enumerate(zip(SPECS, shapes)):
            sizes = []
            for d, hint in enumerate(shape):
                if unbacked:
                    s = env.create_unbacked_symint()
                    torch._check(s >= 0)
                else:
                    source = ConstantSource(f"t{i}.size({d})")
                    sym = env.create_symbol(hint, source, dynamic_dim=DimDynamic.DYNAMIC)
                    s = env.create_symintnode(sym, hint=hint, source=source)
                if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol:
                    value_at[s.node.expr] = at[i][d]
                sizes.append(s)
            tensors.append(make(sizes, dtype, perm, stride))
        known = len(env.guards), {a.expr for v in env.deferred_runtime_asserts.values() for a in v}
        out = call(*tensors)
    conditions = [g.expr for g in env.guards[known[0]:]]
    conditions += [a.expr for v in env.deferred_runtime_asserts.values() for a in v if a.expr not in known[1]]

    def value(x):
        try:
            return int(x.node.expr.xreplace(value_at)) if isinstance(x, torch.SymInt) else int(x)
        except TypeError:   # an op's own data-dependent size: not comparable
            return None

    def truth(c):
        c = c.xreplace(value_at)
        return bool(c) if c.is_Boolean and not c.free_symbols else None

    return describe(out, value), {str(c): truth(c) for c in conditions}


def show_conditions(conditions, where):
    failing = [c for c, ok in conditions.items() if ok is not True]
    print(f"conditions recorded by the trace: {len(conditions)}; "
          + (f"not holding at {where}: {failing}" if failing else f"all hold at {where}"))
    return not failing


if __name__ == "__main__":
    errors = []
    for fill in (None, 0, 1):  # the recorded values, all zeros, all ones: the error is the same
        _, error = run(lambda: call(*inputs(SHAPES, fill)))
        print("eager at", SHAPES, "fill", "recorded values" if fill is None else fill, ":",
              full(error) if error else "accepts")
        errors.append(error)
    meta, error = run(lambda: fake_run(TRACE_SHAPES, SHAPES, unbacked=False))
    print("fake  at", SHAPES, ":", full(error) if error else f"accepts, returns {meta[0]}")
    # the guards hold there, so torch reuses this prediction at these sizes
    valid = error is None and show_conditions(meta[1], SHAPES)
    static, static_error = static_fake_run(SHAPES)
    print("fake at static sizes:", full(static_error) if static_error else f"accepts, returns {static}")
    done("eager raises " + words(errors[0]) + ", the fake run accepts"
         + ("; static-size fake tensors accept it too" if static_error is None
            else "; static-size fake tensors reject it: only symbolic sizes skip the check")
         if valid and all(errors) else None)
