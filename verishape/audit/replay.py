"""Replay a counterexample: eager against the compiled artifact with guards skipped.

This is what a deployment that drops guard evaluation
(``torch.compiler.set_stance(..., skip_guard_eval_unsafe=True)``) would run.  Inputs are
rebuilt at the counterexample's sizes from the frame's real inputs (same dtypes, fresh
values from a fixed seed), capped so that no tensor exceeds ``MAX_NUMEL`` elements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .capture import Frame, Run
from .space import parse_source

MAX_NUMEL = 1 << 20


def _rebuild(value: Any, name: str, cex: dict[str, int | float], gen: torch.Generator) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    shape = list(value.shape)
    for src, v in cex.items():
        parsed = parse_source(src)
        if parsed and parsed[0] == name and parsed[1] < len(shape):
            shape[parsed[1]] = int(v)
    if any(d < 0 for d in shape):
        raise ValueError(f"negative size {shape}")
    if math.prod(shape) > MAX_NUMEL:
        raise OverflowError(f"{name} would have {math.prod(shape)} elements (cap {MAX_NUMEL})")
    if value.dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=value.dtype)
    if value.dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    return torch.randint(0, 10, shape, generator=gen, dtype=value.dtype)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, equal_nan=True, atol=1e-5, rtol=1e-4)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _guardless(original: Any, kwargs: dict[str, Any], frame: Frame, arg_names: Sequence[str],
               args: list[Any]) -> tuple[Any, str | None]:
    """Compile ``original`` with every guard dropped, warm it at the frame's own inputs
    (so the same branch is traced), then run it at the counterexample."""
    import compiler

    options = dict(kwargs.get("options") or {})
    options["guard_filter_fn"] = torch.compiler.skip_all_guards_unsafe
    # verishape.compile wraps the backend in a fresh object, so Dynamo cannot reuse the
    # script's own (guarded) cache entry for this code: the artifact is new and guardless.
    guardless = compiler.compile(original, **{**kwargs, "options": options})
    try:
        guardless(*[frame.local_scope[n] for n in arg_names])
        return guardless(*args), None
    except Exception as exc:  # noqa: BLE001 - reported as the artifact's behaviour
        return None, _one_line(exc)


def replay(run: Run, frame: Frame, cex: dict[str, int | float] | None) -> dict[str, Any]:
    if not cex:
        return {"outcome": "not_replayed", "reason": "no counterexample"}
    data_dependent = sorted(k for k in cex if parse_source(k) is None)
    if data_dependent:
        return {"outcome": "not_replayed",
                "reason": f"{', '.join(data_dependent)} come from tensor data, not from input sizes"}
    entry = run.compiled.get(frame.code)
    if entry is None:
        return {"outcome": "not_replayed",
                "reason": "the frame is not a function passed to torch.compile (nested or after a graph break)"}
    original, compiled, compile_kwargs = entry
    code = frame.code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    # An nn.Module's frame is its forward: skip ``self``.
    arg_names = names[1:] if isinstance(original, torch.nn.Module) else names
    gen = torch.Generator().manual_seed(0)
    try:
        args = [_rebuild(frame.local_scope[n], n, cex, gen) for n in arg_names]
    except KeyError as exc:
        return {"outcome": "not_replayed", "reason": f"input {exc} not captured"}
    except (OverflowError, ValueError) as exc:
        return {"outcome": "not_replayed", "reason": str(exc)}
    shapes = {n: list(a.shape) for n, a in zip(arg_names, args) if isinstance(a, torch.Tensor)}
    try:
        want: Any = original(*args)
        eager_error = None
    except Exception as exc:  # noqa: BLE001 - eager's behaviour is the reference
        want, eager_error = None, _one_line(exc)
    mode = "skip_guard_eval_unsafe"
    try:
        with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
            got: Any = compiled(*args)
        compiled_error = None
    except Exception as exc:  # noqa: BLE001 - the artifact's behaviour is what we report
        got, compiled_error = None, _one_line(exc)
        if "skip_guard_eval_unsafe" in str(exc):
            # With a single cache entry the stance still checks guards (there is nothing
            # to tell entries apart by); deployers then drop guards at compile time.
            mode = "guard_filter_fn=skip_all_guards_unsafe"
            got, compiled_error = _guardless(original, compile_kwargs, frame, arg_names, args)
    out: dict[str, Any] = {"mode": mode, "inputs": shapes, "eager_error": eager_error,
                           "compiled_error": compiled_error}
    if eager_error and compiled_error:
        out["outcome"] = "both_fail"
    elif eager_error:
        out["outcome"] = "compiled_accepts_what_eager_rejects"
    elif compiled_error:
        out["outcome"] = "compiled_fails"
    else:
        out["outcome"] = "agree" if _same(got, want) else "differ"
    return out
