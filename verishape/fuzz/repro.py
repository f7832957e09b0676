"""Standalone repro files for ``fuzz-meta`` findings: a bug report a user can paste upstream.

A repro imports only torch (and the user's ``--import`` modules that register custom ops),
builds the input tensors explicitly, runs the call in eager and under the fake/symbolic (or
compiled) mode that shows the difference, prints both sides and the difference in words, and
exits 1 while the difference is there (0, "does not reproduce", once it is fixed).

It is generated from a finding's JSON record alone, so repros can be written for a saved
campaign report later (:func:`write_repros`).  A file is written only after it reproduced in
a fresh Python process: a candidate that does not (a point that only the fuzzer's own trace
reaches, say) is tried in its next, longer form, and reported when none works.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib
import os
import re
import subprocess
import sys
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

DEFAULT_TIMEOUT_S = 180.0


class ReproBug(RuntimeError):
    """A finding verishape cannot write a repro for: a bug in verishape, not in the op."""


@dataclasses.dataclass(frozen=True)
class _Named(TensorSpec):
    """A tensor leaf printed as its parameter name (``t0``) in the ``call`` body."""

    name: str = ""

    def source(self) -> str:
        return self.name


def file_name(record: dict[str, Any]) -> str:
    """Deterministic: op, variant, mode and kind, which identify a finding in a report."""
    full = f"{record['op']}.{record['variant']}" if record.get("variant") else record["op"]
    stem = re.sub(r"[^A-Za-z0-9]+", "_", full).strip("_")
    return f"{stem}-{record['mode']}-{record['kind']}.py"


def parse_case(source: str) -> Case:
    """The case from its printed form (``Case(args=(T(...), ...), kwargs={...})``)."""
    namespace = {"Case": Case, "T": T, "torch": torch, "float": float, "complex": complex, "slice": slice}
    case = eval(source, namespace)  # our own printed case, from our own report
    if not isinstance(case, Case):
        raise ReproBug(f"verishape bug: the case record does not evaluate to a Case: {source[:200]}")
    return case


def _user_modules(import_lines: Sequence[str]) -> list[str]:
    return [line.split()[1] for line in import_lines if line.startswith("import ")]


def resolve_fn(fn_source: str, import_lines: Sequence[str]) -> Any:
    """The callable of a finding, as the fuzzer got it (modules imported as ``python -m`` would)."""
    cwd = os.getcwd()
    if sys.path[:1] not in ([cwd], [""]):
        sys.path.insert(0, cwd)
    namespace: dict[str, Any] = {"torch": torch}
    for line in import_lines:
        exec(line, namespace)  # noqa: S102 - import lines recorded by the fuzzer
    return eval(fn_source, namespace)


def public_expr(fn: Any) -> str | None:
    """A short public name for an OpInfo's callable (``torch.index_select``), so the repro does
    not import torch's test suite; None when there is none (a lambda, a private helper)."""
    name = getattr(fn, "__name__", None)
    if not name or name == "<lambda>":
        return None
    owner = getattr(fn, "__objclass__", None)
    if owner is not None and getattr(torch.Tensor, name, None) is not None and \
            getattr(torch._C.TensorBase, name, None) is fn:
        return f"torch.Tensor.{name}"
    for module in ("torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special",
                   getattr(fn, "__module__", None) or ""):
        if not module.startswith("torch") or "._" in module or "testing" in module:
            continue
        for qual in (name, getattr(fn, "__qualname__", name)):
            if "<" in qual or qual.startswith("_"):
                continue
            try:
                obj: Any = importlib.import_module(module)
                for part in qual.split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError):
                continue
            if obj is fn:
                return f"{module}.{qual}"
    return None


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
            done(first_difference(meta, real, layout={not unbacked}) if valid else None)
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
                      words(error) if error else "accepts")
                errors.append(error)
            meta, error = run(lambda: fake_run(TRACE_SHAPES, SHAPES, unbacked={unbacked}))
            print("fake  at", SHAPES, ":", words(error) if error else f"accepts, returns {{meta[0]}}")
            # {"compiled code raises only where a runtime assert fails" if unbacked else
               "the guards hold there, so torch reuses this prediction at these sizes"}
            valid = error is None and show_conditions(meta[1], SHAPES)
            done("eager raises " + words(errors[0]) + ", the fake run accepts"
                 if valid and all(errors) else None)
        ''')


def _main_rejects(record: dict[str, Any]) -> str:
    symbolic = record["kind"] == "symbolic_trace_error"
    unbacked = record["mode"] == "unbacked"
    body = '''
        def static_fake_run(shapes):
            """The op on fake tensors of fixed sizes (no symbols)."""
            with FakeTensorMode():
                return describe(call(*[make(shape, dtype, perm, stride)
                                       for (dtype, perm, stride, _), shape in zip(SPECS, shapes)]))


        if __name__ == "__main__":
            real, error = run(lambda: describe(call(*inputs(SHAPES))))
            print("eager at", SHAPES, ":", words(error) if error else real)
            static, static_error = run(lambda: static_fake_run(SHAPES))
            print("fake, fixed sizes    :", words(static_error) if static_error else static)
    '''
    if symbolic:
        body += f'''
            _, sym_error = run(lambda: fake_run(TRACE_SHAPES, SHAPES, unbacked={unbacked}))
            print("fake, symbolic sizes :", words(sym_error) if sym_error else "accepts")
            done("eager and fixed-size fake tensors accept, symbolic sizes raise " + words(sym_error)
                 if error is None and static_error is None and sym_error is not None else None)
        '''
    else:
        body += '''
            done("eager accepts, the fake tensor raises " + words(static_error)
                 if error is None and static_error is not None else None)
        '''
    return textwrap.dedent(body)


def _main_compiled(record: dict[str, Any]) -> str:
    if record["kind"] == "compiled_rejects_unbacked_assert":
        return textwrap.dedent('''
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
            ''')
    return textwrap.dedent('''
        class Call(torch.nn.Module):
            def forward(self, *tensors):
                return call(*tensors)


        if __name__ == "__main__":
            _, error = run(lambda: call(*inputs(SHAPES)))
            print("eager at", SHAPES, ":", words(error) if error else "accepts")
            tensors = inputs(TRACE_SHAPES)
            # every size that can be dynamic is declared so (0 and 1 are specialized anyway)
            dims = [{d: torch.export.Dim(f"t{i}_{d}") for d in range(t.dim()) if t.size(d) >= 2}
                    for i, t in enumerate(tensors)]
            try:
                torch.export.export(Call(), tuple(tensors), dynamic_shapes=(tuple(dims),))
                e_error = None
            except Exception as exc:   # export reports the violation as its own UserError
                e_error = exc
            print("torch.export with dynamic sizes at", TRACE_SHAPES, ":", words(e_error) if e_error else "accepts")
            pinned = e_error is not None and re.search("constraints? violat|specializ", str(e_error), re.I)
            done("eager accepts " + str(SHAPES) + ", but tracing pins a dynamic size: " + words(e_error)
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
    parts = [_header(record, meta, name), "import sys"]
    if fake and not plan.python_dispatcher:
        parts.append("import contextlib")
    if family == "compiled":
        parts.append("import re")
    if user:
        parts.append("import os\n\nsys.path.insert(0, os.getcwd())  # --import modules, found as `python -m` "
                     "finds them: run from the folder verishape ran in")
    parts.append("\nimport torch")
    if fake:
        parts.append(_FAKE_IMPORTS)
        if plan.python_dispatcher:
            parts.append("from torch._dispatch.python import enable_python_dispatcher")
    elif family == "rejects":
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
    parts.append(_PRELUDE)
    if family != "mismatch":
        parts.append(_ERROR_HELPERS)
    if fake:
        parts.append(_FAKE)
    if family == "mismatch":
        parts.append(_DIFFERENCE)
    parts.append(_MAINS[family](record))
    return "\n".join(parts).rstrip() + "\n"


def plans(record: dict[str, Any]) -> list[Plan]:
    """Candidate forms, shortest story first: traced where eager runs, then traced at the
    fuzzer's own trace sizes and evaluated at the solver point."""
    case = parse_case(record["case"])
    trace = tuple(tuple(s) for s in case.shapes())
    point = tuple(tuple(s) for s in record["point"]) if record.get("point") else None
    pyd = bool(record.get("python_dispatcher"))
    out = []
    if point is not None:
        out.append(Plan(point, point, pyd))
        out.append(Plan(trace, point, pyd))
    else:
        out.append(Plan(trace, trace, pyd))
    if record["mode"] == "unbacked" or not pyd:
        return out
    return out + [dataclasses.replace(p, python_dispatcher=False) for p in out]


# ----------------------------------------------------------------------------- checking, writing


def check_file(path: str, cwd: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[bool, str]:
    """Run ``path`` in a fresh Python process: (reproduces, why not or the difference)."""
    try:
        out = subprocess.run([sys.executable, path], check=False, capture_output=True, text=True, cwd=cwd, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout_s:.0f} s"
    lines = out.stdout.strip().splitlines()
    if out.returncode == 1 and lines and lines[-1].startswith(MARKER):
        return True, lines[-1][len(MARKER):].strip()
    tail = (out.stderr.strip().splitlines() or lines or [""])[-1]
    return False, f"exit {out.returncode}: {tail[:300]}"


OP_DB_MODULE = "torch.testing._internal.common_methods_invocations"


def _fn_source_of(record: dict[str, Any]) -> str:
    """How the fuzzer names the callable (``ops.py``), for reports saved before records
    carried ``fn_source``: a custom op ``ns::name`` or an OpInfo entry."""
    op, variant = record["op"], record.get("variant", "")
    if "::" in op:
        ns, _, name = op.partition("::")
        return f"torch.ops.{ns}.{name.split('.')[0]}.default"
    return f"next(o for o in op_db if o.name == {op!r} and o.variant_test_name == {variant!r}).op"


def _fn_expr(record: dict[str, Any], import_lines: list[str]) -> tuple[str, list[str]]:
    """A short public expression for the callable where one exists (no test-suite import)."""
    source = record.get("fn_source") or _fn_source_of(record)
    if "op_db" in source and not any("op_db" in line for line in import_lines):
        import_lines = [*import_lines, f"from {OP_DB_MODULE} import op_db"]
    if "op_db" not in source:
        return source, import_lines
    expr = public_expr(resolve_fn(source, import_lines))
    if expr is None:
        return source, import_lines
    return expr, [line for line in import_lines if "op_db" not in line]


def write_repro(record: dict[str, Any], directory: str, meta: dict[str, Any], imports: Sequence[str] = (),
                cwd: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[str | None, str]:
    """Write the first candidate that reproduces; (path or None, the difference or why not)."""
    lines = list(record.get("imports") or ())
    lines += [f"import {m}" for m in imports if f"import {m}" not in lines]
    fn_expr, lines = _fn_expr(record, lines)
    name = file_name(record)
    path = os.path.join(directory, name)
    trial = os.path.join(directory, f".checking-{name}")
    why = "no candidate"
    try:
        for plan in plans(record):
            with open(trial, "w") as fh:
                fh.write(render(record, plan, fn_expr, lines, meta, name))
            ok, why = check_file(trial, cwd=cwd, timeout_s=timeout_s)
            if ok:
                os.replace(trial, path)
                return path, why
    finally:
        if os.path.exists(trial):
            os.unlink(trial)
    return None, why


def write_repros(report: dict[str, Any], directory: str, imports: Sequence[str] = (), *,
                 cwd: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, jobs: int = 1) -> list[str]:
    """One checked repro file per finding of ``report`` (a fresh or a saved campaign report).

    Returns the paths written; ``report["summary"]["repros"]`` gets the counts and, for each
    finding whose repro did not reproduce in a fresh process, why (nothing is written for it).
    ``imports``: the modules given to ``--import`` (custom ops), for reports that lack them.
    ``jobs``: files checked at once (each check is its own process; the files do not depend on it).
    """
    unknown = sorted({f["kind"] for f in report["findings"]} - FAMILIES.keys())
    if unknown:
        raise ReproBug(f"verishape bug: no repro generator for finding kinds {unknown}; "
                       f"add them to verishape/fuzz/repro.py")
    os.makedirs(directory, exist_ok=True)
    from .._version import __version__

    config = report.get("summary", {}).get("config", {})
    meta = {"version": __version__, "seed": config.get("seed", "?")}
    written: list[str] = []
    failed: list[dict[str, Any]] = []
    # Resolve every callable here first (imports, op_db): threads then only wait on processes.
    for record in report["findings"]:
        _fn_expr(record, list(record.get("imports") or ()))
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(lambda r: write_repro(r, directory, meta, imports, cwd=cwd, timeout_s=timeout_s),
                                report["findings"]))
    for record, (path, why) in zip(report["findings"], results):
        if path is None:
            failed.append({k: record[k] for k in ("op", "variant", "mode", "kind")} | {"why": why})
        else:
            written.append(path)
    report.setdefault("summary", {})["repros"] = {
        "dir": directory, "written": len(written), "verified": len(written),
        "not_reproduced": len(failed), "failures": failed,
    }
    return written


def summary_line(report: dict[str, Any]) -> str:
    r = report["summary"]["repros"]
    line = (f"repros: {r['written']} written to {r['dir']}, each verified to reproduce in a fresh process"
            f"; {r['not_reproduced']} did not reproduce (not written)")
    for f in r["failures"]:
        full = f"{f['op']}.{f['variant']}" if f["variant"] else f["op"]
        line += f"\n  [{f['kind']}] {full} ({f['mode']}): {f['why']}"
    return line
