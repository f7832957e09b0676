"""``verishape.compile``: ``torch.compile`` with VeriShapeEnv in the frames it compiles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

import torch

from . import frames
from .backend import VerishapeBackend

F = TypeVar("F", bound=Callable[..., Any])


@overload
def compile(model: F, **kwargs: Any) -> F: ...
@overload
def compile(model: None = None, **kwargs: Any) -> Callable[[F], F]: ...


def compile(
    model: Callable[..., Any] | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    disable: bool = False,
    widen_specializations: bool = False,
    **kwargs: Any,
) -> Any:
    """A drop-in for :func:`torch.compile`: same arguments, same behaviour, same
    compiler underneath; the frames it compiles decide shape questions with proofs.

    Usable bare (``@verishape.compile``), with arguments
    (``@verishape.compile(dynamic=True)``) or as a call (``verishape.compile(model)``).
    Further keyword arguments go to ``torch.compile`` unchanged.

    ``widen_specializations=True``: after each dynamic compile, trace the frame again at
    size 1 for every size whose range ``[2, ...]`` comes from 0/1 specialization; where
    the size-1 graph provably equals the generic one (see
    :mod:`verishape.compiler.widen`), the installed guard admits 1 and a batch-1 call
    reuses the graph instead of recompiling.  Costs one extra trace per dynamic size per
    compile (no codegen); off by default.
    """
    if model is None:
        def decorate(fn: Callable[..., Any]) -> Any:
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                           options=options, disable=disable, widen_specializations=widen_specializations,
                           **kwargs)

        return decorate
    if not callable(model):
        raise TypeError(f"verishape.compile: model must be a function or nn.Module, got {type(model).__name__}")
    frames.install()
    options = dict(options) if options else None
    passthrough: dict[str, Any] = {}
    if options and "guard_filter_fn" in options:
        passthrough["options"] = {"guard_filter_fn": options.pop("guard_filter_fn")}
    if backend == "inductor":
        wrapped = VerishapeBackend(backend, mode=mode, options=options, dynamic=dynamic,
                                   widen_specializations=widen_specializations)
        torch_mode, torch_options = None, passthrough.get("options")
    else:
        wrapped = VerishapeBackend(backend, mode=None, options=None, dynamic=dynamic,
                                   widen_specializations=widen_specializations)
        torch_mode = mode
        torch_options = {**(options or {}), **(passthrough.get("options") or {})} or None
    return torch.compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=wrapped, mode=torch_mode,
                         options=torch_options, disable=disable, **kwargs)
