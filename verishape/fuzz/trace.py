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
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._dynamo.source import ConstantSource
from torch._guards import Source
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

from .inputs import Case, build

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
               python_dispatcher: bool) -> Trace:
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


def static_fake_ok(fn: Callable[..., Any], case: Case) -> bool:
    """Does the fake implementation accept ``case`` at static (concrete) sizes?  Tells a
    symbolic-tracing gap apart from a meta function that rejects valid input."""
    with _quiet(), FakeTensorMode():
        args, kwargs = case.map_specs(
            lambda i, s: build(s.shape, s.layout, lambda base: torch.empty(base, dtype=s.dtype)))
        try:
            fn(*args, **kwargs)
        except OP_ERRORS:
            return False
    return True
