"""Run an op under FakeTensorMode with symbolic (backed) or unbacked input sizes.

A trace records what the meta/fake implementation predicts as sympy expressions over one
symbol per input dimension (duck sizing off, so equal sizes are not silently unified): the
output sizes, strides, storage offsets and dtypes, plus the conditions under which that
prediction is claimed valid (guards, runtime asserts, symbol ranges).  Evaluating those
expressions at other sizes is how a single trace is checked at many points.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sympy
import torch

from verishape.core import torch_names, torch_seam

# a torch without what fuzzing reads is refused here in one line, before the imports fail
torch_seam.require_names(torch_names.FUZZ_VOCABULARY, "verishape's meta-function fuzzing")

import torch.utils._pytree as pytree  # noqa: E402
from torch._dispatch.python import enable_python_dispatcher  # noqa: E402
from torch._dynamo.source import ConstantSource  # noqa: E402
from torch._guards import Source  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv  # noqa: E402

from .inputs import Case, build  # noqa: E402

#: Errors an op (or its fake implementation) may raise: what we compare, never hide.
OP_ERRORS: tuple[type[BaseException], ...] = (
    RuntimeError, ValueError, IndexError, TypeError, NotImplementedError, AssertionError,
    ArithmeticError, KeyError,
)

BACKED = "backed"
UNBACKED = "unbacked"


def _dim_source(leaf: int, dim: int) -> Source:
    """Names an input dimension (``t0_size1``) in guards and logs."""
    return ConstantSource(f"t{leaf}_size{dim}")


@dataclasses.dataclass(frozen=True)
class OutMeta:
    """Metadata of one output tensor: ints (eager) or sympy expressions (a trace)."""

    shape: tuple[Any, ...]
    stride: tuple[Any, ...]
    offset: Any
    dtype: torch.dtype


@dataclasses.dataclass
class Trace:
    """What a fake run predicted, and under which conditions."""

    mode: str
    dims: dict[sympy.Symbol, tuple[int, int]]   # symbol -> (leaf, dim)
    outputs: list[OutMeta] | None                 # None when the trace raised
    structure: str = ""
    error: BaseException | None = None
    guards: list[sympy.Basic] = dataclasses.field(default_factory=list)
    asserts: list[sympy.Basic] = dataclasses.field(default_factory=list)
    ranges: list[sympy.Basic] = dataclasses.field(default_factory=list)
    data_dependent: bool = False   # the op read tensor values into sizes (item(), nonzero...)

    def conditions(self) -> list[sympy.Basic]:
        """Everything the prediction assumes: guards, runtime asserts, ranges."""
        return [*self.ranges, *self.guards, *self.asserts]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Fake tensor logs every failing meta call with a traceback at ERROR level; failing
    is an expected outcome here, reported through the trace instead."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    old = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(old)


def _expr(x: Any) -> Any:
    if isinstance(x, torch.SymInt):
        return x.node.expr
    return sympy.Integer(int(x))


def describe(out: Any) -> tuple[list[OutMeta], str]:
    """Tensor leaves of an op result, with a structure string (tree spec, non-tensor leaves
    abstracted) so that a different number or nesting of outputs is noticed."""
    leaves, spec = pytree.tree_flatten(out)
    metas = []
    kinds = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            metas.append(OutMeta(tuple(_expr(s) for s in leaf.shape), tuple(_expr(s) for s in leaf.stride()),
                                 _expr(leaf.storage_offset()), leaf.dtype))
            kinds.append("T")
        else:
            kinds.append("-")
    return metas, f"{spec.num_leaves}:{''.join(kinds)}"


def eager_meta(out: Any) -> tuple[list[OutMeta], str]:
    metas, structure = describe(out)
    as_int = [OutMeta(tuple(int(s) for s in m.shape), tuple(int(s) for s in m.stride), int(m.offset), m.dtype)
              for m in metas]
    return as_int, structure


def run_traced(fn: Callable[..., Any], case: Case, shapes: Sequence[Sequence[int]], mode: str,
               python_dispatcher: bool,
               around: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext) -> Trace:
    """Trace ``fn`` on ``case`` at ``shapes``: backed symbols hinted by ``shapes``, or
    unbacked symbols (no hints at all; ``shapes`` is then only used for ranks)."""
    env = ShapeEnv(duck_shape=False)
    dims: dict[sympy.Symbol, tuple[int, int]] = {}
    ranges: list[sympy.Basic] = []
    fake_mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=False)
    with _quiet(), fake_mode, (enable_python_dispatcher() if python_dispatcher else contextlib.nullcontext()):
        def make(i: int, spec: Any) -> torch.Tensor:
            sizes: list[Any] = []
            for d, hint in enumerate(shapes[i]):
                if mode == UNBACKED:
                    s = env.create_unbacked_symint()
                    torch._check(s >= 0)
                    sym = s.node.expr
                else:
                    sym = env.create_symbol(hint, _dim_source(i, d), dynamic_dim=DimDynamic.DYNAMIC)
                    s = env.create_symintnode(sym, hint=hint, source=_dim_source(i, d))
                if isinstance(sym, sympy.Symbol):
                    dims[sym] = (i, d)
                sizes.append(s)
            return build(sizes, spec.layout, lambda base: torch.empty(base, dtype=spec.dtype))

        args, kwargs = case.map_specs(make)
        n_input_guards = len(env.guards)
        input_asserts = {ra.expr for ras in env.deferred_runtime_asserts.values() for ra in ras}
        trace = Trace(mode, dims, None)
        unbacked_before = env.unbacked_symint_counter
        try:
            with around():   # only the op call, not the making of its inputs
                out = fn(*args, **kwargs)
            trace.outputs, trace.structure = describe(out)
        except OP_ERRORS as exc:
            trace.error = exc
    for sym, (leaf, dim) in dims.items():
        vr = env.var_to_range.get(sym)
        lower = int(vr.lower) if vr is not None and isinstance(vr.lower, sympy.Integer) else 0
        ranges.append(sympy.Ge(sym, max(lower, 0)))
        if vr is not None and isinstance(vr.upper, sympy.Integer):
            ranges.append(sympy.Le(sym, int(vr.upper)))
    trace.ranges = ranges
    trace.data_dependent = env.unbacked_symint_counter > unbacked_before
    trace.guards = [g.expr for g in env.guards[n_input_guards:]]
    trace.asserts = [ra.expr for ras in env.deferred_runtime_asserts.values() for ra in ras
                     if ra.expr not in input_asserts]
    return trace


#: Where torch keeps its Python meta functions, references and decompositions (paths
#: relative to the torch package): a line there is "the failing meta/decomposition check".
META_PLACES = ("_meta_registrations.py", "_refs/", "_decomp/", "_prims/", "_subclasses/fake_impls.py",
               "nn/functional.py", "functional.py")


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _place(filename: str, places: Sequence[str]) -> str | None:
    if not filename.startswith(_TORCH_DIR):
        return None
    rel = filename[len(_TORCH_DIR):].replace(os.sep, "/")
    return rel if rel.startswith(tuple(places)) else None


def raise_site(exc: BaseException) -> str:
    """The innermost line of torch's Python meta/decomposition code the error passed through
    (``torch/_meta_registrations.py:2150 in meta_bn``), or "" when it came from C++ alone."""
    site = ""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        rel = _place(code.co_filename, META_PLACES)
        if rel is not None:
            site = f"torch/{rel}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return site


def meta_function(fn: Callable[..., Any], case: Case, shapes: Sequence[Sequence[int]], mode: str,
                  python_dispatcher: bool) -> str:
    """The op's own Python meta, decomposition or fake kernel (``torch/_meta_registrations.py:973
    in meta_max (aten.max.default)``), or the aten overload alone (``aten.median.dim``) when its
    meta is C++; "" when the call reached no aten op.

    Two ways in, tried in order: a registered decomposition the python dispatcher runs *before*
    any aten op reaches the fake mode (``_upsample_nearest_vec``), then the function registered
    for the first aten overload that does reach it (a dispatch mode above the fake mode sees it
    first).  Why: findings whose fake run went through the same function share a root cause.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[Any] = []
    early: list[Any] = []
    codes = {f.__code__: f for f in _registered().values()}

    class First(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if not seen and getattr(func, "namespace", "") == "aten":   # prim.device & co. only ask
                seen.append(func)
            return func(*args, **(kwargs or {}))

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and not seen and not early and frame.f_code in codes:
            early.append(codes[frame.f_code])

    @contextlib.contextmanager
    def watched() -> Iterator[None]:
        old = sys.getprofile()
        sys.setprofile(profile)
        try:
            with First():
                yield
        finally:
            sys.setprofile(old)

    run_traced(fn, case, shapes, mode, python_dispatcher, around=watched)
    op = seen[0] if seen else None
    impl = early[0] if early else _registered().get(op)
    if impl is None:
        return "" if op is None else str(op)
    code = impl.__code__
    rel = _place(code.co_filename, META_PLACES) or os.path.basename(code.co_filename)
    return f"torch/{rel}:{code.co_firstlineno} in {code.co_name}" + ("" if early else f" ({op})")


@functools.cache
def _registered() -> dict[Any, Any]:
    """aten overload -> the Python function torch registers for that op specifically (meta
    function, decomposition or fake kernel; a fallback registered for many ops is skipped)."""
    import torch._decomp as decomp
    import torch._meta_registrations  # noqa: F401 - fills decomp.meta_table
    from torch._subclasses import fake_impls

    found: dict[Any, Any] = {}
    for table in (fake_impls.op_implementations_dict, decomp.decomposition_table, decomp.meta_table):
        uses: dict[Any, int] = {}
        for f in table.values():
            uses[f] = uses.get(f, 0) + 1
        for op, f in table.items():
            while getattr(f, "__wrapped__", None) is not None:
                f = f.__wrapped__
            if uses.get(table[op], 0) <= 4 and hasattr(f, "__code__"):
                found[op] = f   # later tables win: the meta function over a decomposition
    return found


def static_fake(fn: Callable[..., Any], case: Case,
                python_dispatcher: bool = False) -> tuple[list[OutMeta] | None, str, BaseException | None]:
    """The fake implementation at ``case``'s static (concrete) sizes, as a user without dynamic
    shapes meets it: (outputs' metadata, structure, None) or (None, "", the error).

    ``python_dispatcher``: as the finding was traced.  It decides whether an op's Python
    decomposition runs (what compiled code runs) or its meta registration: the two can disagree
    (``upsample_nearest``'s decomposition accepts an empty input its meta rejects)."""
    with _quiet(), FakeTensorMode(), (enable_python_dispatcher() if python_dispatcher else contextlib.nullcontext()):
        args, kwargs = case.map_specs(
            lambda i, s: build(s.shape, s.layout, lambda base: torch.empty(base, dtype=s.dtype)))
        try:
            out = fn(*args, **kwargs)
        except OP_ERRORS as exc:
            return None, "", exc
        outputs, structure = describe(out)
    return _plain_ints(outputs), structure, None


def _plain_ints(outputs: list[OutMeta]) -> list[OutMeta]:
    """Static fake metadata with plain ints (a static fake reports ints already; an op's own
    data-dependent size stays a SymInt expression and is kept as it is)."""
    def num(x: Any) -> Any:
        return int(x) if isinstance(x, sympy.Integer) else x
    return [OutMeta(tuple(num(s) for s in m.shape), tuple(num(s) for s in m.stride), num(m.offset), m.dtype)
            for m in outputs]


def static_fake_ok(fn: Callable[..., Any], case: Case) -> bool:
    """Does the fake implementation accept ``case`` at static (concrete) sizes?  Tells a
    symbolic-tracing gap apart from a meta function that rejects valid input."""
    return static_fake(fn, case)[2] is None
