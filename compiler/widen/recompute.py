"""Layout computations recorded while a generic compile is lowered, and recomputed at 1.

Some shape questions are asked inside a computation whose *result* is all the lowering keeps (docs/compile.md,
"Inductor's answers"): each call is recorded with its operands and result, and an answer asked inside it is moot
where the same torch function gives that result at 1 (:mod:`verishape.compiler.widen.questions`).  :func:`tracking`
wraps those functions and the size-hint reads for one block (each named once in ``torch_names.WIDENING_REGISTRY``),
arguments untouched: a missing optional one is said once and its answers refused, a missing required one refuses
widening on that torch (``torch_seam.widening_refused``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import sympy
import torch
from torch import _prims_common
from torch._subclasses import fake_impls
from torch.utils import _pytree as pytree

from verishape.core import torch_names, torch_seam

from . import over_ranges
from .kernel_call import KernelCall, sizes_of, spec_of
from .over_ranges import NotANumber, at_point, exprs, number

#: where hint reads go: (sizevars, "optimization" | "guarding", expr, value, calling function)
HintSink = Callable[[Any, str, Any, Any, str], None]
#: called with Inductor's scheduler after it generated code (its sizes are final then)
ScheduledSink = Callable[[Any], None]
#: the ranges that the lowering's direct range reads see now (None: leave them alone)
WidenedRanges = Callable[[], "dict[sympy.Symbol, Any] | None"]


@dataclasses.dataclass
class ViewStrides(over_ranges.Recorded):
    """A call of torch's view-stride computation (``fake_impls._compute_stride``: Inductor's
    ``View.create`` asks it for a view of a non-contiguous buffer; None: reshape index math)."""

    old_size: tuple[sympy.Expr, ...]
    old_stride: tuple[sympy.Expr, ...]
    new_size: tuple[sympy.Expr, ...]
    #: the strides it returned (None: not viewable; unset while the call runs)
    result: tuple[sympy.Expr, ...] | None = None
    why = "a view's strides, the same at 1 on every dimension larger than 1"

    def _right_at(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        """Whether the same computation at ``sub`` (over the ranges of sizes that stay symbolic)
        gives the recorded strides where the size is not 1 (a size-1 stride addresses nothing)."""
        if self.result is None:
            return True  # reshape index math instead of a view: right for any size
        at = [[at_point(e, sub) for e in part] for part in (self.old_size, self.old_stride, self.new_size)]
        generic = [at_point(e, sub) for e in self.result]
        compute = _unwrapped(fake_impls._compute_stride)
        symbols = over_ranges.Symbols([e for part in at for e in part], self.ranges)
        out = over_ranges.decided(lambda: compute(*[[symbols.value(e) for e in part] for part in at]))
        if out is None:
            return False
        exact = [e.xreplace(symbols.back) for e in exprs(out)]
        return all(n == 1 or over_ranges.same(a, b) for n, a, b in zip(at[2], generic, exact, strict=True))


@dataclasses.dataclass
class StrideOrder(over_ranges.Recorded):
    """A call of Inductor's ``Layout.is_stride_ordered``: does a buffer already have the
    stride order an op requires (``require_strides`` copies it when not)."""

    size: tuple[sympy.Expr, ...]
    stride: tuple[sympy.Expr, ...]
    order: tuple[int, ...]
    result: bool | None = None
    why = "a stride-order check whose result is the same at 1"

    def _right_at(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        """Whether torch's own check gives the recorded result on the layout at ``sub``
        (under a size allocator of its own: nothing is guarded)."""
        from torch._inductor import ir
        from torch._inductor.sizevars import SizeVarAllocator
        from torch._inductor.virtualized import V

        if self.result is None:
            return False
        size, stride = ([at_point(e, sub) for e in part] for part in (self.size, self.stride))
        # sizes that stay symbolic at ``sub`` range over theirs, and must decide the check
        symbols = over_ranges.Symbols([*size, *stride], self.ranges)

        class _Sizes:  # what the check reads of V.graph: 2.13 its sizevars, 2.11 its _shape_env
            sizevars = SizeVarAllocator(symbols.env)
            _shape_env = symbols.env

        with V.set_graph_handler(_Sizes()):  # type: ignore[arg-type]
            layout = ir.FixedLayout(torch.device("cpu"), torch.float32, [symbols.expr(e) for e in size],
                                    [symbols.expr(e) for e in stride])
            got = over_ranges.decided(lambda: _unwrapped(ir.Layout.is_stride_ordered)(layout, list(self.order)))
        return got == self.result


@dataclasses.dataclass
class DenseCheck(over_ranges.Recorded):
    """A call of torch's ``is_non_overlapping_and_dense_or_false`` (Inductor's ``run_node``
    asks it to decide on a channels-last layout): a pure function of sizes and strides."""

    size: tuple[sympy.Expr, ...]
    stride: tuple[sympy.Expr, ...]
    result: bool | None = None
    #: the check's caller as (file tail, name): how it reads the result (:class:`OverlapCheck`)
    reader: tuple[str, str] = ("", "")
    why = "a dense-layout check whose result is the same at 1"

    @classmethod
    def record(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> DenseCheck:
        """The recording of a check of one tensor's sizes and strides, with its caller."""
        (a,) = args
        size, stride = exprs(a.shape), exprs(a.stride())
        caller = sys._getframe(2).f_code  # frames: this, the check (:func:`_tracked`), its caller
        # the caller as :data:`YES_READERS` names one: the tail of its file from ``torch/``, its name
        filename = caller.co_filename.replace("\\", "/")
        reader = filename[filename.rfind("/torch/") + 1:], caller.co_name  # rfind's -1: the whole name
        return cls(size, stride, ranges=_ranges_now(size + stride), reader=reader)

    def _right_at(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        """Whether torch's own check on the sizes and strides at ``sub`` gives the recorded result: on a meta tensor
        (nothing is guarded), or over the ranges of sizes that stay symbolic there."""
        if self.result is None:
            return False
        try:
            size, stride = ([number(e, sub) for e in part] for part in (self.size, self.stride))
        except NotANumber:
            return self._right_over_ranges(sub)
        exact = self._exact(torch.empty_strided(size, stride, device="meta"))
        if self.reader in YES_READERS:  # its caller acts on "yes" (1) alone: for a bool, the whole result
            return (exact == 1) == (self.result == 1)
        return exact == self.result

    @staticmethod
    def _exact(t: torch.Tensor) -> Any:
        return bool(_unwrapped(_prims_common.is_non_overlapping_and_dense_or_false)(t))

    def _right_over_ranges(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        check = torch_seam.optional(".".join(torch_names.DENSE_CHECK_ON_SIZES))
        if check is None:
            return False  # a torch without the sizes-and-strides form: not recomputed (refused)
        size, stride = ([at_point(e, sub) for e in part] for part in (self.size, self.stride))
        symbols = over_ranges.Symbols([*size, *stride], self.ranges)
        exact = over_ranges.decided(lambda: check([symbols.value(e) for e in size], [symbols.value(e) for e in stride]))
        return bool(exact) == self.result


@dataclasses.dataclass
class OverlapCheck(DenseCheck):
    """A call of torch's internal-overlap check (``torch_names.OVERLAP_CHECK``; torch 2.15's reinplacing pass runs
    ``copy_``'s meta function, which raises on "yes", on the view it writes through: ``s < 2``).  Rerun on integers
    at 1 only (a size symbolic there: refused).  Its result (no 0, yes 1, too hard 2) compares whole, except for a
    caller of :data:`YES_READERS`, which acts on "yes" alone (a (1, 2, 4) view is "no" where an (s, 2, 4) one is
    "too hard": the copy raises for neither)."""

    result: int | None = None  # type: ignore[assignment]
    why = "an internal-overlap check whose result is the same at 1"

    @staticmethod
    def _exact(t: torch.Tensor) -> Any:
        module_name, name = torch_names.OVERLAP_CHECK
        return int(_unwrapped(getattr(sys.modules[module_name], name))(t))

    def _right_over_ranges(self, sub: dict[sympy.Symbol, sympy.Basic]) -> bool:
        return False


#: torch's callers of the overlap check that act only on "yes" (``== 1``, 2.11 to 2.15): ``copy_``'s meta function
#: raises, a scatter's output is a plain clone (2.15's slice-scatter chunking, which reads ``!= 0``, is not one)
YES_READERS = (("torch/_meta_registrations.py", "meta_copy_"), ("torch/_meta_registrations.py", "_scatter_meta_output"))


def _unwrapped(fn: Any) -> Any:
    """torch's own ``fn``, where a wrapper of the seam's is installed over it."""
    return getattr(fn, "_verishape_original", fn)


#: the recorded computation a question is being asked in (None outside all of them;
#: :data:`UNRECORDED` inside one whose operands could not be recorded)
computing: contextvars.ContextVar[Any] = contextvars.ContextVar("verishape_layout_call", default=None)


_said: set[str] = set()


def say_once(key: str, *message: Any) -> None:
    """Warn ``message`` on the verishape logger, once per ``key``."""
    if key not in _said:
        _said.add(key)
        logging.getLogger("verishape").warning(*message)


def _say_missing(where: str) -> None:
    say_once(where, "verishape: this torch has no %s; shape answers asked in it are not recomputed "
             "at size 1, so a size-1 call that depends on them compiles as stock", where)


#: the guarding-hint readers of each torch release (one registry row; see the seam)
_GUARDING_HINTS = next(row.paths for row in torch_names.WIDENING_REGISTRY
                       if "SizeVarAllocator.guarding_hint_or_throw" in row.paths)
#: what recording a layout check raises on a call it does not know (another signature, a sparse tensor)
_CHECK_ERRORS = (ValueError, TypeError, AttributeError, RuntimeError, sympy.SympifyError)


@contextlib.contextmanager
def tracking(on_hint: HintSink, on_scheduled: ScheduledSink, widened: WidenedRanges) -> Iterator[None]:
    """For one block, wrap the layout computations recomputed at 1 (tying the questions asked in a call to it), the hint
    reads, the scheduler's code generation (``on_scheduled`` reads the sizes after it) and the direct range reads."""
    makers = {"_compute_stride": partial(_tracked, _view_strides, (ValueError, TypeError, AttributeError),
                                         lambda out: None if out is None else exprs(out)),
              "conv_layout": _tracked_conv_layout,
              "Layout.is_stride_ordered": partial(_tracked, _stride_order, _CHECK_ERRORS, bool),
              "ExternKernel.process_kernel": _tracked_process_kernel,
              "SizeVarAllocator.optimization_hint": partial(_tracked_hint, "optimization", on_hint),
              **{path: partial(_tracked_hint, "guarding", on_hint) for path in _GUARDING_HINTS},
              "Scheduler.codegen": partial(_tracked_codegen, on_scheduled),
              "is_non_overlapping_and_dense_or_false": partial(_tracked, DenseCheck.record, _CHECK_ERRORS, bool),
              torch_names.OVERLAP_CHECK[1]: partial(_tracked, OverlapCheck.record, _CHECK_ERRORS, int)}
    with contextlib.ExitStack() as restore:  # undone last first
        _widening_range_reads(widened, restore)
        for module_name, path in torch_names.WIDENING_HOOKS:  # (a module not loaded: wrap gives None, not said)
            undo = torch_seam.wrap(module_name, path, lambda original, path=path: makers[path](original))
            if undo is not None:
                restore.callback(undo)
            elif module_name in sys.modules and path not in _GUARDING_HINTS:  # that row names every release's readers
                _say_missing(f"{module_name}.{path}")
        yield


def _widening_range_reads(widened: WidenedRanges, restore: contextlib.ExitStack) -> None:
    """Wrap ``bound_sympy`` wherever an Inductor module imported it, until ``restore`` unwinds: a call about a kept
    size sees that size's range with the lower bound 1 (``widened()``), so every bound the lowering derives this way
    holds at 1 (a wider range gives a looser bound, which every use of a bound accepts: it is an over-approximation)."""
    module_name, name = torch_names.RANGE_READER
    raw = getattr(sys.modules.get(module_name), name, None)
    if raw is None:
        _say_missing(f"{module_name}.{name}")
        return
    original = _unwrapped(raw)

    def bound_sympy(expr: Any, ranges: Any = None) -> Any:
        wide = widened() or {}
        hit = {s: wide[s] for s in expr.free_symbols if s in wide} if isinstance(expr, sympy.Basic) else {}
        return original(expr, {**(ranges or {}), **hit} if hit else ranges)

    bound_sympy._verishape_original = original  # type: ignore[attr-defined]
    for mod_name, module in list(sys.modules.items()):
        if mod_name.startswith("torch._inductor") and module is not None \
                and getattr(module, name, None) in (original, raw):
            restore.callback(setattr, module, name, getattr(module, name))
            setattr(module, name, bound_sympy)


def _tracked_codegen(on_scheduled: ScheduledSink, original: Any) -> Any:
    def codegen(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        on_scheduled(self)
        return out

    return codegen


def _inside(call: Any, original: Any, args: Any, kwargs: Any) -> Any:
    """``original(*args, **kwargs)`` with the questions it asks tied to ``call`` (None: :data:`UNRECORDED`)."""
    token = computing.set(call if call is not None else UNRECORDED)
    try:
        return original(*args, **kwargs)
    finally:
        computing.reset(token)


#: set while a hint reader runs: a reader called by another (2.11's ``size_hint`` calls
#: ``symbolic_hint``) is the outer read, reported once, by the outer one
_reading_hint: contextvars.ContextVar[bool] = contextvars.ContextVar("verishape_hint_read", default=False)


def _tracked_hint(kind: str, on_hint: HintSink, original: Any) -> Any:
    def hint(*args: Any, **kwargs: Any) -> Any:
        outer = not _reading_hint.get()
        token = _reading_hint.set(True)
        try:
            out = original(*args, **kwargs)
        finally:
            _reading_hint.reset(token)
        if outer and len(args) > 1:  # (sizevars, expr): the caller is the function that read it
            on_hint(args[0], kind, args[1], out, sys._getframe(1).f_code.co_name)
        return out

    return hint


def _tracked(record: Callable[[tuple[Any, ...], dict[str, Any]], Any], errors: tuple[type[Exception], ...],
             result: Callable[[Any], Any], original: Any) -> Any:
    """``original`` (a layout computation) recording each call as ``record(args, kwargs)`` makes
    it, and its result as ``result`` makes it; a call whose recording raises one of ``errors`` (a
    signature or operand this does not know) is not recomputed (refused)."""
    def tracked(*args: Any, **kwargs: Any) -> Any:
        try:
            call = record(args, kwargs)
        except errors:
            call = None
        out = _inside(call, original, args, kwargs)
        if call is not None:
            call.result, call.done = result(out), True
        return out

    return tracked


def shape_env_now() -> Any:
    """The ShapeEnv being traced or lowered (None outside a trace)."""
    return getattr(getattr(torch._guards.TracingContext.try_get(), "fake_mode", None), "shape_env", None)


def _ranges_now(exprs: Iterable[sympy.Expr]) -> dict[sympy.Symbol, Any]:
    """The ranges the ShapeEnv being traced or lowered knows for the symbols of ``exprs`` (none outside a trace)."""
    known = getattr(shape_env_now(), "var_to_range", {})
    return {s: known[s] for e in exprs for s in e.free_symbols if s in known}


def _view_strides(args: tuple[Any, ...], kwargs: dict[str, Any]) -> ViewStrides:
    old_size, old_stride, new_size = (exprs(a) for a in args[:3])
    return ViewStrides(old_size, old_stride, new_size, ranges=_ranges_now(old_size + old_stride + new_size))


def _stride_order(args: tuple[Any, ...], kwargs: dict[str, Any]) -> StrideOrder:
    layout, order = args[:2]
    size, stride = tuple(map(sympy.sympify, layout.size)), tuple(map(sympy.sympify, layout.stride))
    return StrideOrder(size, stride, tuple(map(int, order)), ranges=_ranges_now(size + stride))


#: a layout computation whose operands could not be recorded: never done, never moot
UNRECORDED = over_ranges.Recorded()


def _node_layout(node: Any) -> tuple[Any, ...]:
    """An IR node's sizes, strides (contiguous where it has no layout yet), dtype and device."""
    from torch._inductor import ir

    size = tuple(sympy.sympify(e) for e in node.get_size())
    stride = (node.get_layout().stride if ir.is_storage_and_layout(node)
              else ir.FlexibleLayout.contiguous_strides(list(size)))
    return size, tuple(sympy.sympify(e) for e in stride), node.get_dtype(), node.get_device()


def _recorded_kernel(kernel: Any, kernel_args: tuple[Any, ...], kernel_kwargs: dict[str, Any],
                     outputs_of: Callable[[Any], list[Any]], original: Any, args: Any, kwargs: Any) -> Any:
    """``original(*args, **kwargs)``, recorded as a :class:`KernelCall` of ``kernel`` on the layouts of ``kernel_args``
    and ``kernel_kwargs`` (IR nodes as tensors), its outputs the specs ``outputs_of`` reads off the result (one it
    cannot read: not recomputed, refused)."""
    from torch._inductor import ir

    def tensor_spec(node: Any) -> Any:
        try:
            return ("tensor", *_node_layout(node))
        except (AttributeError, NotImplementedError, TypeError):
            return None

    flat, spec = pytree.tree_flatten({"args": kernel_args, "kwargs": kernel_kwargs})
    call = KernelCall(kernel, [tensor_spec(a) if isinstance(a, ir.IRNode) else spec_of(a) for a in flat], spec)
    out = _inside(call, original, args, kwargs)
    try:
        outputs = outputs_of(out)
    except (TypeError, IndexError, AttributeError):
        outputs = [None]
    call.outputs = None if any(o is None for o in outputs) else outputs
    call.ranges = _ranges_now([e for c in (*call.flat, *outputs) if c is not None for e in sizes_of(c)])
    call.done = True
    return out


def _tracked_process_kernel(original: Any) -> Any:
    def process_kernel(cls: Any, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        return _recorded_kernel(kernel, args, kwargs, lambda out: [spec_of(o) for o in pytree.tree_leaves(out[0])],
                                original, (cls, kernel, *args), kwargs)

    return process_kernel


#: ``conv_layout``'s operands, in the order of ``aten.convolution``'s
_CONV_OPERANDS = ("x", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")


def _tracked_conv_layout(original: Any) -> Any:
    """Inductor's ``conv_layout`` reads its layout off torch's fake convolution of its operands (whose memory-format
    choice asks about the batch size): recorded as that kernel's call, recomputed at 1 as any extern kernel's."""
    signature = inspect.signature(original)

    def outputs_of(layout: Any) -> list[Any]:
        return [("tensor", tuple(map(sympy.sympify, layout.size)), tuple(map(sympy.sympify, layout.stride)),
                 layout.dtype, layout.device)]

    def conv_layout(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs).arguments
            operands = tuple(bound[name] for name in _CONV_OPERANDS)
        except (TypeError, KeyError):  # not the signature this knows: not recomputed (refused)
            return _inside(None, original, args, kwargs)
        return _recorded_kernel(torch.ops.aten.convolution.default, operands, {}, outputs_of, original, args, kwargs)

    return conv_layout
