"""Differential check of batch-1 widening: one program, one size sweep, against eager.

A program is called on a sweep of sizes (for example 3, 4, 1, 5, 1) under
``verishape.compile`` with automatic dynamic shapes, as a user would, and every call is
compared with eager on fresh copies of the same inputs: exceptions (both raise, or neither),
the structure of the outputs, their sizes, dtypes, strides (on dimensions larger than 1),
values (``allclose`` with NaNs equal), which outputs share storage with which inputs or with
each other, and the inputs after the call (in-place updates).  A call at size 1 that ran the
generic artifact (a reuse) and differs from eager is **wrong** unless stock
``torch.compile``, run on the same sweep, differs the same way, or differs from eager in
strides alone and returns outputs of these shapes with these very strides at another size (a
layout chosen by a benchmark, not by the size: then it is stock's own difference, reported
apart).  Used by the fuzzer (:mod:`verishape.fuzz.widen_programs`), the
adversarial corpus and the benchmarks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

#: tolerance for float outputs (generated kernels reorder reductions)
RTOL, ATOL = 1e-4, 1e-5


@dataclasses.dataclass
class Call:
    """One call of the sweep: its size, whether it reused a generic artifact, and how it
    compares with eager (None: the same)."""

    size: int
    #: it ran a generic artifact: reused when it was traced, or the cache entry of an
    #: earlier reuse at the same size
    reused: bool
    difference: str | None
    eager_raised: str | None = None
    #: the difference is in the outputs' strides alone (values, shapes, sharing as eager's)
    strides_only: bool = False


@dataclasses.dataclass
class Sweep:
    """The outcome of one program's sweep under one backend."""

    backend: str
    calls: list[Call]
    #: reasons a size-1 call was not widened, from the frames' decision logs
    refusals: list[str]
    #: frame compiles the user's backend ran (a reuse compiles nothing)
    compiles: int
    #: for each call that differed from eager: whether stock torch.compile differed too
    stock_differs: dict[int, bool] = dataclasses.field(default_factory=dict)
    #: a warm sweep (``warm=True``): which calls of the cold process before it reused, and
    #: the graphs the warm one lowered (torch's caches served the rest)
    cold_reused: list[bool] | None = None
    lowered: int | None = None

    @property
    def reuses(self) -> int:
        return sum(c.reused for c in self.calls)

    @property
    def wrong(self) -> list[str]:
        """Reused calls that differ from eager where stock does not."""
        return [f"size {c.size} (call {i}): {c.difference}" for i, c in enumerate(self.calls)
                if c.reused and c.difference is not None and not self.stock_differs.get(i, False)]

    @property
    def other_differences(self) -> list[str]:
        """Differences from eager that are not widening's: stock's own, or in calls that
        compiled as stock does."""
        return [f"size {c.size} (call {i}): {c.difference}" for i, c in enumerate(self.calls)
                if c.difference is not None and not (c.reused and not self.stock_differs.get(i, False))]

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "compiles": self.compiles, "reuses": self.reuses,
                "sizes": [c.size for c in self.calls], "reused": [c.reused for c in self.calls],
                "eager_raised": [c.eager_raised for c in self.calls],
                "wrong": self.wrong, "other_differences": self.other_differences, "refusals": self.refusals,
                **({"cold_reused": self.cold_reused, "lowered": self.lowered} if self.cold_reused is not None else {})}


def run_sweep(fn: Callable[..., Any], make_args: Callable[[int], Sequence[Any]], sizes: Sequence[int],
              backend: str = "inductor", check_stock: bool = True, device: str | None = None,
              warm: bool = False, **compile_kwargs: Any) -> Sweep:
    """Call ``fn`` compiled with ``verishape.compile(backend=...)`` on ``make_args(n)`` for
    each ``n`` of ``sizes`` and compare every call with eager.  ``make_args`` must return
    the same values for the same ``n`` (a seeded generator): the two sides get their own
    copies.  Dynamo is reset before and after.  Torch's FX-graph and AOTAutograd caches are
    off for the sweep: a generic graph they serve is never reused (it was lowered out of
    sight), so with them on the outcome would depend on what ran on this machine before.

    ``device`` (``"cuda"``): the inputs ``make_args`` builds on the CPU are moved there, and
    the program runs with it as the default device (tensors it creates land there too).
    ``"triton-cpu"``: on the CPU, with Inductor's Triton codegen and Triton's interpreter
    running the kernels (:mod:`verishape.fuzz.triton_cpu`).

    ``warm``: torch's caches on instead, in a folder of the sweep's own: the sweep runs
    cold, Dynamo is reset, and it runs again served by those caches (a restart, with the
    widening records the cold run wrote); the warm run is returned and checked."""
    if warm:
        return _warm_sweep(fn, make_args, sizes, backend, check_stock, device, **compile_kwargs)
    if device == "triton-cpu":
        from .triton_cpu import triton_on_cpu

        with triton_on_cpu():
            return run_sweep(fn, make_args, sizes, backend, check_stock, None, **compile_kwargs)
    if device is not None:
        on_cpu = make_args

        def make_args(n: int) -> list[Any]:
            # built on the CPU whatever the default device (seeded CPU generators), then moved
            with torch.device("cpu"):
                made = on_cpu(n)
            return [a.to(device) if isinstance(a, torch.Tensor) else a for a in made]

    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False), \
            (torch.device(device) if device is not None else contextlib.nullcontext()):
        return _run_sweep(fn, make_args, sizes, backend, check_stock, **compile_kwargs)


def _warm_sweep(fn: Callable[..., Any], make_args: Callable[[int], Sequence[Any]], sizes: Sequence[int],
                backend: str, check_stock: bool, device: str | None, **compile_kwargs: Any) -> Sweep:
    import os
    import shutil
    import tempfile

    from torch._dynamo.utils import counters

    folder, saved = tempfile.mkdtemp(prefix="verishape-warm-sweep-"), os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        with torch._inductor.config.patch(fx_graph_cache=True), torch._functorch.config.patch(enable_autograd_cache=True), \
                (torch.device(device) if device is not None else contextlib.nullcontext()):
            cold = _run_sweep(fn, make_args, sizes, backend, False, **compile_kwargs)
            counters.clear()
            warm = _run_sweep(fn, make_args, sizes, backend, check_stock, **compile_kwargs)
            warm.lowered = counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_bypass"]
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
        shutil.rmtree(folder, ignore_errors=True)
    warm.cold_reused = [c.reused for c in cold.calls]
    return warm


def _run_sweep(fn: Callable[..., Any], make_args: Callable[[int], Sequence[Any]], sizes: Sequence[int],
               backend: str, check_stock: bool, **compile_kwargs: Any) -> Sweep:
    import verishape
    from torch._dynamo.utils import counters

    from verishape.compiler import frames

    calls = _calls(lambda: verishape.compile(fn, backend=backend, **compile_kwargs), fn, make_args, sizes,
                   reused_counter=lambda: counters["verishape"]["reused"], clear_frames=True)
    with frames._envs_lock:
        envs = [e for es in frames._envs_by_code.values() for e in es]
    refusals = [f"{name}: {why}" for env in envs for name, why in env.verishape_log.not_widened]
    # Dynamo counts the graphs a backend returns; a compiled candidate (restarted) is not one
    compiles = counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] + counters["verishape"]["candidates"]
    torch._dynamo.reset()
    sweep = Sweep(backend, [c for c, _ in calls], refusals, compiles)
    differing = [i for i, (c, _) in enumerate(calls) if c.difference is not None and c.reused]
    if differing and check_stock:
        stock = _calls(lambda: torch.compile(fn, backend=backend, **compile_kwargs), fn, make_args, sizes)
        torch._dynamo.reset()
        for i in differing:
            sweep.stock_differs[i] = (_same_difference(calls[i][1], stock[i][1], calls[i][0].difference,
                                                       stock[i][0].difference)
                                      or _stocks_own_layout(calls[i][1], calls[i][0], stock))
    return sweep


def _stocks_own_layout(ours: Any, call: Call, stock: list[tuple[Call, Any]]) -> bool:
    """A reused call that differs from eager in its outputs' strides alone, where stock's
    own compiles of the sweep return outputs of these very shapes with these very strides at
    another size and differ from eager the same way.  Inductor's layout choices that are
    timings, not sizes (on CUDA, ``pad_mm`` pads a matmul's output to an aligned stride when
    its benchmark says padding is faster), give stock (4, 1) at one size of the H200's sweep and
    (3, 1) at another for one (2, 3) output: our strides are one of stock's, not a reuse's
    invention.  Values, shapes, dtypes and sharing must still equal eager's."""
    if isinstance(ours, BaseException) or not call.strides_only:
        return False
    return any(c.strides_only and _layouts(theirs) == _layouts(ours)
               for c, theirs in stock if not isinstance(theirs, BaseException))


def _layouts(out: Any) -> Any:
    """The shapes and strides of every tensor in an output, in order."""
    if isinstance(out, torch.Tensor):
        return (tuple(out.shape), tuple(out.stride()))
    if isinstance(out, (list, tuple)):
        return tuple(_layouts(o) for o in out)
    if isinstance(out, dict):
        return tuple((k, _layouts(v)) for k, v in out.items())
    return None


def _same_difference(ours: Any, theirs: Any, why_ours: str | None, why_theirs: str | None) -> bool:
    """Stock differs from eager too, and its result is ours (both raise, or equal outputs)."""
    if why_theirs is None:
        return False
    if isinstance(ours, BaseException) or isinstance(theirs, BaseException):
        return isinstance(ours, BaseException) and isinstance(theirs, BaseException)
    return difference(theirs, ours, [], [], [], []) is None


def _calls(make_compiled: Callable[[], Callable[..., Any]], fn: Callable[..., Any],
           make_args: Callable[[int], Sequence[Any]], sizes: Sequence[int],
           reused_counter: Callable[[], int] | None = None, clear_frames: bool = False) -> list[tuple[Call, Any]]:
    from torch._dynamo.utils import counters

    from verishape.compiler import frames

    torch._dynamo.reset()
    counters.clear()
    if clear_frames:
        with frames._envs_lock:
            frames._envs_by_code.clear()
    compiled = make_compiled()
    out = []
    served: set[int] = set()  # sizes whose cache entry runs a reused generic artifact
    for n in sizes:
        eager_args, args = _copy(make_args(n)), _copy(make_args(n))
        want = _outcome(fn, eager_args)
        before = reused_counter() if reused_counter is not None else 0
        traced = counters["stats"]["unique_graphs"]
        got = _outcome(compiled, args)
        reused = reused_counter is not None and reused_counter() > before
        if reused:
            served.add(n)
        elif counters["stats"]["unique_graphs"] == traced and reused_counter is not None:
            # nothing traced: the size-1 entry made by the reuse ran again, or an entry a
            # reuse at another size made (a generic one) serves this size too
            reused = n in served or _served_by_a_reuse(fn, make_args(n))
        why = _compare(want, got, eager_args, args)
        strides_only = why is not None and _compare(want, got, eager_args, args, strides=False) is None
        eager_raised = f"{type(want).__name__}: {str(want).splitlines()[0][:160] if str(want) else ''}" \
            if isinstance(want, BaseException) else None
        out.append((Call(n, reused, why, eager_raised, strides_only), got))
    return out


def _served_by_a_reuse(fn: Callable[..., Any], args: Sequence[Any]) -> bool:
    """The cache entry of ``fn``'s frame that Dynamo runs for ``args`` (the newest whose
    guards pass) was made by a compile that reused a kept generic artifact (its env logged
    the reuse).  Only the frame's own entries: a reuse in a graph break's resume function
    is seen by size alone."""
    from verishape.compiler import frames
    from verishape.core import torch_seam

    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    f_locals = dict(zip(code.co_varnames[:code.co_argcount], args))
    entry = next((e for e in torch_seam.cache_entries(code) if e.guard_manager.check(f_locals)), None)
    if entry is None:
        return False
    made = f"{entry.compile_id.frame_id}/{entry.compile_id.frame_compile_id}"
    return any(e.verishape_log.widened and (frames.compile_id_of(e) or "").split("_")[0] == made
               for e in frames.envs_for(code))


def _copy(args: Sequence[Any]) -> list[Any]:
    return [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]


def _outcome(fn: Callable[..., Any], args: list[Any]) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - an exception is an outcome to compare
        return exc


def _compare(want: Any, got: Any, eager_args: list[Any], args: list[Any], strides: bool = True) -> str | None:
    if isinstance(want, BaseException) or isinstance(got, BaseException):
        if isinstance(want, BaseException) and isinstance(got, BaseException):
            return None
        if isinstance(want, BaseException):
            return f"eager raises {type(want).__name__} ({_first_line(want)}), compiled returns"
        return f"compiled raises {type(got).__name__} ({_first_line(got)}), eager returns"
    in_want = [a for a in eager_args if isinstance(a, torch.Tensor)]
    in_got = [a for a in args if isinstance(a, torch.Tensor)]
    why = difference(want, got, in_want, in_got, [], [], strides=strides)
    if why is not None:
        return why
    for i, (a, b) in enumerate(zip(in_want, in_got)):
        why = _tensor_values(a, b)
        if why is not None:
            return f"input {i} after the call: {why}"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else ""


def difference(want: Any, got: Any, in_want: list[torch.Tensor], in_got: list[torch.Tensor],
               out_want: list[torch.Tensor], out_got: list[torch.Tensor], path: str = "output",
               strides: bool = True) -> str | None:
    """How ``got`` differs from ``want`` (None: it does not).  ``in_*`` are the inputs
    (storage sharing with them is compared); ``out_*`` collect the tensors seen so far
    (storage sharing between outputs); ``strides=False`` leaves the strides out."""
    if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
        if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor)):
            return f"{path}: {type(want).__name__} vs {type(got).__name__}"
        why = _tensor_meta(want, got, strides) or _tensor_values(want, got)
        if why is None:
            why = _sharing(want, in_want, out_want, got, in_got, out_got)
        out_want.append(want)
        out_got.append(got)
        return f"{path}: {why}" if why is not None else None
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(want) != len(got) or type(want) is not type(got):
            return f"{path}: {type(want).__name__} of {len(want)} vs {type(got).__name__}"
        for i, (a, b) in enumerate(zip(want, got)):
            why = difference(a, b, in_want, in_got, out_want, out_got, f"{path}[{i}]", strides)
            if why is not None:
                return why
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(want) != list(got):
            return f"{path}: keys differ"
        for k in want:
            why = difference(want[k], got[k], in_want, in_got, out_want, out_got, f"{path}[{k!r}]", strides)
            if why is not None:
                return why
        return None
    if isinstance(want, float) and isinstance(got, float) and math.isnan(want) and math.isnan(got):
        return None
    if type(want) is not type(got) or want != got:
        return f"{path}: {want!r} vs {got!r}"
    return None


def _tensor_meta(a: torch.Tensor, b: torch.Tensor, strides: bool = True) -> str | None:
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} vs {b.dtype}"
    # the significant strides, torch's own rule (``_prims_common.check_significant_strides``):
    # a dimension of size 1 addresses nothing, and stock torch.compile itself returns other
    # strides there than eager (Inductor: ``x.transpose(0, 1).contiguous() * 2`` at (1, 3, 4)
    # gives (4, 4, 1) where eager gives (4, 12, 1)); :func:`size_one_strides` says whether
    # they differ too
    significant = [(x, y) for n, x, y in zip(a.shape, a.stride(), b.stride()) if n > 1]
    if strides and any(x != y for x, y in significant) and a.numel() > 0:
        return f"strides {a.stride()} vs {b.stride()} (sizes {tuple(a.shape)})"
    return None


def size_one_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors of one shape differ in the stride of a dimension of size 1 only
    (not a difference by torch's rule; reported apart where a caller wants to know)."""
    return (a.shape == b.shape and a.numel() > 0 and tuple(a.stride()) != tuple(b.stride())
            and all(x == y for n, x, y in zip(a.shape, a.stride(), b.stride()) if n > 1))


def _tensor_values(a: torch.Tensor, b: torch.Tensor) -> str | None:
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    if a.dtype.is_floating_point or a.dtype.is_complex:
        same = torch.allclose(a, b.to(a.dtype), rtol=RTOL, atol=ATOL, equal_nan=True)
    else:
        same = torch.equal(a, b.to(a.dtype))
    if not same:
        diff = (a.double() - b.double()).abs() if a.numel() and not a.dtype.is_complex else None
        return "values differ" + (f" (max abs diff {diff.nan_to_num(float('inf')).max().item():.3g})"
                                  if diff is not None else "")
    return None


def _sharing(want: torch.Tensor, in_want: list[torch.Tensor], out_want: list[torch.Tensor],
             got: torch.Tensor, in_got: list[torch.Tensor], out_got: list[torch.Tensor]) -> str | None:
    """Which inputs and earlier outputs the output shares storage with, on both sides
    (an empty tensor shares nothing that could be observed)."""
    def shares(t: torch.Tensor, others: list[torch.Tensor]) -> list[int]:
        if t.numel() == 0:
            return []
        key = t.untyped_storage().data_ptr()
        return [i for i, o in enumerate(others) if o.numel() and o.untyped_storage().data_ptr() == key]

    a = (shares(want, in_want), shares(want, out_want))
    b = (shares(got, in_got), shares(got, out_got))
    if a != b:
        return f"storage shared with inputs {a[0]} and outputs {a[1]} in eager, inputs {b[0]} and outputs {b[1]}"
    return None


def reason_class(why: str) -> str:
    """A refusal reason without its symbols and numbers, for counting by kind: which check
    refused, and where (the Inductor function that asked, the op where graphs differ)."""
    import re

    text = why.split(": ", 1)[1] if why.startswith("L[") or why.startswith("(") else why
    site = re.search(r"asked in ([\w.<>]+)", text)
    if "the general path needs at least 1" in text:
        kind = "divisor" if "the divisor" in text else "size"
        where = "AOT graph" if "AOT graph" in text else "Inductor's code"
        return f"a {kind} of the {where} is not >= 1 at 1"
    if "lowering's answer" in text or "shape answer the lowering acted on" in text:
        return f"a lowering answer not right at 1 (asked in {site.group(1) if site else '?'})"
    graph = re.search(r"the (Dynamo|AOT) graph at size 1 differs from the generic graph(?: at node \d+ \(\('(\w+)', '([^']+)')?",
                      text)
    if graph:
        return f"the {graph.group(1)} graph differs" + (f" at {graph.group(3)}" if graph.group(3) else " (outputs)")
    if "excludes" in text and "guard" in text:
        return "a generic guard excludes 1"
    if "not implied at size 1" in text:
        return "a generic guard or range not implied at 1"
    if "no AOTAutograd inference graph" in text:
        return "no inference graph kept (training, or served from a cache)"
    if "not read" in text:
        return "Inductor's sizes not read"
    if "binds other input sizes" in text or "makes one symbol of sizes" in text:
        return "the size-1 trace binds input sizes to symbols differently"
    if "input sizes or strides at size 1 differ" in text:
        return "input sizes or strides differ"
    return re.sub(r"\d+", "N", text)[:80]
