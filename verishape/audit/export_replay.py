"""Replay of an audited export at a counterexample: the exported program (``ep.module()``)
and the eager module, called on the same rebuilt inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from .exports import ExportFrame
from .replay import NotReplayable, _one_line, _rebuild, _same
from .space import parse_source


#: What ``ep.module()`` raises when it refuses an input: its input checks
#: (``Guard failed: x.size()[0] >= 17``) and its ``_assert_scalar`` nodes.
_REJECTIONS = ("Guard failed", "Runtime assertion failed", "Expected input at")


def _inputs_at(frame: ExportFrame, cex: dict[str, int | float], seed: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
    sizes: dict[str, dict[int, int]] = {}
    for src, value in cex.items():
        parsed = parse_source(src)
        if parsed is None:
            raise NotReplayable(f"{src} comes from tensor data, not from an input size")
        name, dim = parsed
        if name not in frame.leaves:
            raise NotReplayable(f"input {name!r} of {src} was not captured")
        sizes.setdefault(name, {})[dim] = int(value)
    gen = torch.Generator().manual_seed(seed)
    by_path = {path: name for name, (path, _) in frame.leaves.items()}

    def rebuild(path: Any, value: Any) -> Any:
        name = by_path.get(tuple(path))
        return value if name is None else _rebuild(value, name, {(): sizes.get(name, {})}, gen)

    args, kwargs = pytree.tree_map_with_path(rebuild, (tuple(frame.args), dict(frame.kwargs)))
    return tuple(args), dict(kwargs)


def replay_export(frame: ExportFrame, cex: dict[str, int | float] | None) -> dict[str, Any]:
    """Call the exported program (``ep.module()``) and the eager module at ``cex``."""
    if not cex:
        return {"outcome": "not_replayed", "reason": "no counterexample"}
    if frame.program is None:
        return {"outcome": "not_replayed", "reason": "the export failed: there is no program to run"}
    try:
        eager_args = _inputs_at(frame, cex)
        program_args = _inputs_at(frame, cex)
    except NotReplayable as exc:
        return {"outcome": "not_replayed", "reason": str(exc)}
    want, eager_error = _call(frame.module, eager_args, _one_line)
    got, compiled_error = _call(frame.program.module(), program_args, _one_line)
    out: dict[str, Any] = {"mode": "exported_program", "compile_id": None, "graph_calls": None,
                           "inputs": {n: list(v.shape) for n, (p, _) in frame.leaves.items()
                                      if isinstance(v := _at(eager_args, p), torch.Tensor)},
                           "eager_error": eager_error, "compiled_error": compiled_error}
    if eager_error and compiled_error:
        out["outcome"] = "both_fail"
    elif eager_error:
        out["outcome"] = "compiled_accepts_what_eager_rejects"
    elif compiled_error:
        rejected = any(compiled_error.split(": ", 1)[-1].startswith(r) or r in compiled_error for r in _REJECTIONS)
        out["outcome"] = "compiled_rejects" if rejected else "compiled_fails"
    else:
        out["outcome"] = "agree" if _same(got, want) else "differ"
    return out


def _at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[getattr(key, "idx", getattr(key, "key", None))]
    return tree


def _call(fn: Any, inputs: tuple[tuple[Any, ...], dict[str, Any]], one_line: Callable[[BaseException], str]) -> tuple[Any, str | None]:
    args, kwargs = inputs
    try:
        with torch.no_grad():
            return fn(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - what either side raises is its reported behaviour
        return None, one_line(exc)
