"""The text of a standalone repro file, rendered from a finding's JSON record.

:mod:`verishape.fuzz.repro` decides which candidate forms to try and keeps the first that
reproduces in a fresh process; this module only writes the source: the header, the helper
functions every file carries (so the file needs torch and nothing else), and one ``main``
per family of finding kinds.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from typing import Any

import torch

from .inputs import Case, T, TensorSpec, to_source

#: Printed as the last line of a file that reproduces; an uncaught exception also exits 1,
#: so the exit status alone would count a crashing repro as a reproduction.
MARKER = "REPRODUCES:"

MISMATCH = ("shape_mismatch", "stride_mismatch", "storage_offset_mismatch", "dtype_mismatch",
            "output_structure_mismatch", "unbacked_silent_shape_mismatch")
ACCEPTS = ("meta_accepts_eager_rejects", "unbacked_unchecked_error", "shape_determined_permissive")
REJECTS = ("meta_rejects_eager_accepts", "symbolic_trace_error")
COMPILED = ("compiled_rejects_unbacked_assert", "compiled_rejects_specialization")

#: Every kind a repro can be generated for; any other kind is a verishape bug (a kind added
#: to the fuzzer without a generator), never a file that does not reproduce.
FAMILIES = {**{k: "mismatch" for k in MISMATCH}, **{k: "accepts" for k in ACCEPTS},
            **{k: "rejects" for k in REJECTS}, **{k: "compiled" for k in COMPILED}}


class ReproBug(RuntimeError):
    """A finding verishape cannot write a repro for: a bug in verishape, not in the op."""


@dataclasses.dataclass(frozen=True)
class _Named(TensorSpec):
    """A tensor leaf printed as its parameter name (``t0``) in the ``call`` body."""

    name: str = ""

    def source(self) -> str:
        return self.name


def parse_case(source: str) -> Case:
    """The case from its printed form (``Case(args=(T(...), ...), kwargs={...})``)."""
    namespace = {"Case": Case, "T": T, "torch": torch, "float": float, "complex": complex, "slice": slice}
    case = eval(source, namespace)  # our own printed case, from our own report
    if not isinstance(case, Case):
        raise ReproBug(f"verishape bug: the case record does not evaluate to a Case: {source[:200]}")
    return case


def _user_modules(import_lines: Sequence[str]) -> list[str]:
    return [line.split()[1] for line in import_lines if line.startswith("import ")]



# ----------------------------------------------------------------------------- rendering


@dataclasses.dataclass(frozen=True)
class Plan:
    """One candidate form of a repro: where the trace is hinted and where eager runs."""

    trace_shapes: tuple[tuple[int, ...], ...]
    shapes: tuple[tuple[int, ...], ...]
    python_dispatcher: bool


def _shapes_src(shapes: Sequence[Sequence[int]]) -> str:
    return "[" + ", ".join(repr(tuple(s)) for s in shapes) + "]"


def _call_src(case: Case) -> tuple[str, str]:
    """``call``'s parameters and the op call with them, e.g. (``t0, t1``, ``fn(t0, 0, t1)``)."""
    args, kwargs = case.map_specs(lambda i, s: _Named(s.shape, s.dtype, name=f"t{i}"))
    parts = [to_source(a) for a in args] + [f"{k}={to_source(v)}" for k, v in kwargs.items()]
    params = ", ".join(f"t{i}" for i in range(len(case.leaves())))
    return params, f"fn({', '.join(parts)})"


def _specs_src(case: Case) -> str:
    rows = []
    for i, s in enumerate(case.leaves()):
        values = to_source(tuple(s.pool) or (1,))
        rows.append(f"    ({s.dtype}, {s.layout.perm!r}, {s.layout.stride!r}, {values}),  # t{i}")
    return "SPECS = [\n" + "\n".join(rows) + "\n]"


_MODE_WORDS = {
    "backed": "backed symbolic sizes (torch.compile(dynamic=True) / torch.export)",
    "unbacked": "unbacked sizes (torch._dynamo.mark_unbacked / data-dependent sizes)",
}


def _header(record: dict[str, Any], meta: dict[str, Any], name: str) -> str:
    full = f"{record['op']}.{record['variant']}" if record.get("variant") else record["op"]
    pyd = ", python dispatcher on" if record.get("python_dispatcher") else ""
    klass = record.get("class", "")
    documented = record.get("documented")
    lines = [
        f"verishape fuzz-meta repro: {full}, {record['kind']}",
        "",
        f"op:       {full}",
        f"kind:     {record['kind']}" + (f" ({klass})" if klass else ""),
        f"mode:     {_MODE_WORDS.get(record['mode'], record['mode'])}{pyd}",
        f"where:    {record.get('where', '')}",
        f"message:  {record.get('message', '')}",
    ]
    if documented:
        lines.append(f"torch documents this: {documented}")
    if record.get("blame"):
        lines.append(f"blame:    {record['blame']}")
    for sentence in record.get("evidence") or ():
        lines.append(f"evidence: {sentence}")
    settings = record.get("settings") or {"mode": record["mode"], "python_dispatcher": record.get("python_dispatcher")}
    lines.append("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    lines += [
        (f"found by: verishape {meta.get('version', '?')} fuzz-meta --seed {meta.get('seed', '?')} "
         f"(torch {torch.__version__})"),
        "",
        f"Run: python {name}   (exit 1 and {MARKER} while the difference is there; exit 0 otherwise)",
    ]
    return '"""' + "\n".join(line.replace('"""', "'''").replace("\\", "\\\\") for line in lines) + '\n"""'


_PRELUDE = '''
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
'''

_ERROR_HELPERS = '''
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
    body = "\\n".join("    " + line for line in str(exc).strip().splitlines())
    return f"{type(exc).__name__}:\\n{body}"

'''

_FAKE = '''
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
'''

_FAKE_IMPORTS = """\
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv"""

_DIFFERENCE = '''
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
'''


def _shapes_block(plan: Plan, compiled: bool = False) -> str:
    if plan.trace_shapes == plan.shapes:
        return f"SHAPES = {_shapes_src(plan.shapes)}  # the input sizes\nTRACE_SHAPES = SHAPES"
    traced = "compiled" if compiled else "traced (the sizes hinting the symbolic trace)"
    return (f"TRACE_SHAPES = {_shapes_src(plan.trace_shapes)}  # where the op is {traced}\n"
            f"SHAPES = {_shapes_src(plan.shapes)}  # where eager runs and the trace's formulas are evaluated")


def _main_mismatch(record: dict[str, Any]) -> str:
    unbacked = record["mode"] == "unbacked"
    return textwrap.dedent(f'''
        if __name__ == "__main__":
            real = describe(call(*inputs(SHAPES)))
            meta, conditions = fake_run(TRACE_SHAPES, SHAPES, unbacked={unbacked})
            print("eager at", SHAPES, ":", real)
            print("fake  at", SHAPES, ":", meta)
            # {"no runtime assert fails there, so compiled code would not catch it" if unbacked else
               "the guards hold there, so torch reuses this prediction at these sizes"}
            valid = show_conditions(conditions, SHAPES)
            static, static_error = static_fake_run(SHAPES)
            static_diff = static_error is None and first_difference(static, real, layout={not unbacked})
            print("fake at static sizes:", static if static_error is None else full(static_error))
            difference = first_difference(meta, real, layout={not unbacked}) if valid else None
            done(difference and difference + ("; static-size fake tensors differ the same way" if static_diff
                                              else "; static-size fake tensors agree with eager"))
        ''')


def _main_accepts(record: dict[str, Any]) -> str:
    unbacked = record["mode"] == "unbacked"
    values_loop = ("(None, 0, 1):  # the recorded values, all zeros, all ones: the error is the same"
                   if record["kind"] == "shape_determined_permissive" else "(None,):  # the recorded values")
    return textwrap.dedent(f'''
        if __name__ == "__main__":
            errors = []
            for fill in {values_loop}
                _, error = run(lambda: call(*inputs(SHAPES, fill)))
                print("eager at", SHAPES, "fill", "recorded values" if fill is None else fill, ":",
                      full(error) if error else "accepts")
                errors.append(error)
            meta, error = run(lambda: fake_run(TRACE_SHAPES, SHAPES, unbacked={unbacked}))
            print("fake  at", SHAPES, ":", full(error) if error else f"accepts, returns {{meta[0]}}")
            # {"compiled code raises only where a runtime assert fails" if unbacked else
               "the guards hold there, so torch reuses this prediction at these sizes"}
            valid = error is None and show_conditions(meta[1], SHAPES)
            static, static_error = static_fake_run(SHAPES)
            print("fake at static sizes:", full(static_error) if static_error else f"accepts, returns {{static}}")
            done("eager raises " + words(errors[0]) + ", the fake run accepts"
                 + ("; static-size fake tensors accept it too" if static_error is None
                    else "; static-size fake tensors reject it: only symbolic sizes skip the check")
                 if valid and all(errors) else None)
        ''')


def _main_rejects(record: dict[str, Any]) -> str:
    symbolic = record["kind"] == "symbolic_trace_error"
    unbacked = record["mode"] == "unbacked"
    body = '''
        if __name__ == "__main__":
            real, error = run(lambda: describe(call(*inputs(SHAPES))))
            print("eager at", SHAPES, ":", full(error) if error else real)
            static, static_error = static_fake_run(SHAPES)
            print("fake, fixed sizes    :", full(static_error) if static_error else static)
    '''
    if symbolic:
        body += f'''
            _, sym_error = run(lambda: fake_run(TRACE_SHAPES, SHAPES, unbacked={unbacked}))
            print("fake, symbolic sizes :", full(sym_error) if sym_error else "accepts")
            done("eager and fixed-size fake tensors accept, symbolic sizes raise " + words(sym_error)
                 if error is None and static_error is None and sym_error is not None else None)
        '''
    else:
        body += '''
            done("eager accepts, the fake tensor raises " + words(static_error) + " (at static sizes too)"
                 if error is None and static_error is not None else None)
        '''
    return textwrap.dedent(body)


#: The exact text of each claimed compiled-side error (an internal Dynamo assertion such as
#: "Guard failed on the same frame it was created" is a different claim and does not count).
RUNTIME_ASSERT_TEXT = "Runtime assertion failed for expression"
SPECIALIZED_TEXT = "specialized it to be a constant"


def _main_compiled(record: dict[str, Any]) -> str:
    if record["kind"] == "compiled_rejects_unbacked_assert":
        return textwrap.dedent('''
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
            ''')
    return textwrap.dedent('''
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
        ''')


_MAINS = {"mismatch": _main_mismatch, "accepts": _main_accepts, "rejects": _main_rejects, "compiled": _main_compiled}


def render(record: dict[str, Any], plan: Plan, fn_expr: str, import_lines: Sequence[str],
           meta: dict[str, Any], name: str) -> str:
    """The repro file's text for one candidate ``plan``."""
    family = FAMILIES.get(record["kind"])
    if family is None:
        raise ReproBug(f"verishape bug: no repro generator for finding kind {record['kind']!r} "
                       f"({record['op']}); add one to verishape/fuzz/repro.py")
    case = parse_case(record["case"])
    params, call = _call_src(case)
    user = _user_modules(import_lines)
    fake = family in ("mismatch", "accepts") or record["kind"] == "symbolic_trace_error"
    parts = [_header(record, meta, name), "import logging\nimport sys"]
    if fake and not plan.python_dispatcher:
        parts.append("import contextlib")
    if user:
        parts.append("import os\n\nsys.path.insert(0, os.getcwd())  # --import modules, found as `python -m` "
                     "finds them: run from the folder verishape ran in")
    parts.append("\nimport torch")
    if fake:
        parts.append(_FAKE_IMPORTS)
        if plan.python_dispatcher:
            parts.append("from torch._dispatch.python import enable_python_dispatcher")
    else:
        parts.append("from torch._subclasses.fake_tensor import FakeTensorMode")
    parts += [line + ("  # registers the custom op" if line.startswith("import ") else "") for line in import_lines]
    parts.append(f"\nfn = {fn_expr}\n")
    parts.append(f'\ndef call({params}):\n    """The call under test, tensor inputs as parameters."""\n    return {call}\n')
    parts.append("\n# The tensor inputs: (dtype, order of dims in memory, stride kind, values cycled to fill it)")
    parts.append(_specs_src(case))
    parts.append(_shapes_block(plan, compiled=family == "compiled"))
    if fake:
        pyd = "enable_python_dispatcher" if plan.python_dispatcher else "contextlib.nullcontext"
        parts.append(f"DISPATCHER = {pyd}  # how the fuzzer traced it")
    if family == "compiled":
        parts.append(f"RUNTIME_ASSERT_TEXT = {RUNTIME_ASSERT_TEXT!r}\nSPECIALIZED_TEXT = {SPECIALIZED_TEXT!r}")
    parts.append(_PRELUDE)
    parts.append(_ERROR_HELPERS)
    if fake:
        parts.append(_FAKE)
    if family == "mismatch":
        parts.append(_DIFFERENCE)
    parts.append(_MAINS[family](record))
    return "\n".join(parts).rstrip() + "\n"


def plans(record: dict[str, Any]) -> list[Plan]:
    """Candidate forms, shortest story first: traced where eager runs, then traced at the
    fuzzer's own trace sizes and evaluated at the solver point; never with another dispatcher
    setting than the fuzzer's."""
    case = parse_case(record["case"])
    trace = tuple(tuple(s) for s in case.shapes())
    point = tuple(tuple(s) for s in record["point"]) if record.get("point") else None
    pyd = bool(record.get("python_dispatcher"))
    # Always the fuzzer's own dispatcher setting: a repro that drops it tests something else.
    if point is not None:
        return [Plan(point, point, pyd), Plan(trace, point, pyd)]
    return [Plan(trace, trace, pyd)]
