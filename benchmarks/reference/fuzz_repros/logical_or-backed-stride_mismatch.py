"""verishape fuzz-meta repro: logical_or, stride_mismatch

op:       logical_or
kind:     stride_mismatch (wrong_metadata)
mode:     backed symbolic sizes (torch.compile(dynamic=True) / torch.export)
where:    trace_point
message:  output 0 of shape [10, 10, 5]: meta strides [50, 5, 1], eager [50, 1, 10]
blame:    meta
evidence: static sizes: the fake tensor differs too (output 0 of shape [10, 10, 5]: meta strides [50, 5, 1], eager [50, 1, 10])
settings: mode=backed, python_dispatcher=False, duck_shape=False, specialize_zero_one=True, fake_mode=FakeTensorMode(allow_non_fake_inputs=False), unbacked_inputs=None, torch=2.13.0+cpu
found by: verishape 0.1.0 fuzz-meta --seed 0 (torch 2.13.0+cpu)

Run: python logical_or-backed-stride_mismatch.py   (exit 1 and REPRODUCES: while the difference is there; exit 0 otherwise)
"""
import logging
import sys
import contextlib

import torch
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

fn = torch.logical_or


def call(t0, t1):
    """The call under test, tensor inputs as parameters."""
    return fn(t0, t1)


# The tensor inputs: (dtype, order of dims in memory, stride kind, values cycled to fill it)
SPECS = [
    (torch.float32, None, 'dense', (-8.478, -1.766, -4.323, -2.4, -7.951, 3.612, -8.068, -0.573, 3.129, -3.034, 5.107, 1.135, 4.947, 5.774, -3.973, 3.271)),  # t0
    (torch.float32, (1, 0), 'dense', (4.55, 7.179, 3.309, 4.785, 7.468, -1.813, -7.019, -4.426, -1.201, -0.989, -0.061, 5.158, 2.887, -6.655, -2.704, -2.117)),  # t1
]
SHAPES = [(10, 1, 5), (10, 5)]  # the input sizes
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


def first_difference(meta, real, layout=True):
    """The first difference a compiler would act on, in words (None: they agree).  Strides of
    size-1 dims and strides/offsets of empty outputs are never read, so never compared."""
    if len(meta) != len(real) or [m is None for m in meta] != [r is None for r in real]:
        return f"the fake run returns {len(meta)} outputs, eager {len(real)}"
    for i, (m, r) in enumerate(zip(meta, real)):
        if m is None:
            continue
        (shape, stride, offset, dtype), (e_shape, e_stride, e_offset, e_dtype) = m, r
        if dtype != e_dtype:
            return f"output {i}: dtype {dtype} under fake tensors, {e_dtype} in eager"
        if len(shape) != len(e_shape) or any(a is not None and a != b for a, b in zip(shape, e_shape)):
            return f"output {i}: shape {list(shape)} under fake tensors, {list(e_shape)} in eager"
        if not layout or None in shape or 0 in e_shape:
            continue
        if any(n > 1 and a is not None and a != b for n, a, b in zip(e_shape, stride, e_stride)):
            return f"output {i} of shape {list(e_shape)}: strides {list(stride)} under fake tensors, {list(e_stride)} in eager"
        if offset is not None and offset != e_offset:
            return f"output {i}: storage offset {offset} under fake tensors, {e_offset} in eager"
    return None


if __name__ == "__main__":
    real = describe(call(*inputs(SHAPES)))
    meta, conditions = fake_run(TRACE_SHAPES, SHAPES, unbacked=False)
    print("eager at", SHAPES, ":", real)
    print("fake  at", SHAPES, ":", meta)
    # the guards hold there, so torch reuses this prediction at these sizes
    valid = show_conditions(conditions, SHAPES)
    static, static_error = static_fake_run(SHAPES)
    static_diff = static_error is None and first_difference(static, real, layout=True)
    print("fake at static sizes:", static if static_error is None else full(static_error))
    difference = first_difference(meta, real, layout=True) if valid else None
    done(difference and difference + ("; static-size fake tensors differ the same way" if static_diff
                                      else "; static-size fake tensors agree with eager"))
