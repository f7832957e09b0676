"""``verishape.compile``: ``torch.compile`` with VeriShapeEnv in the frames it compiles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

import torch

from verishape.core.errors import UsageError

from . import declared as declared_sizes
from . import frames
from .export import compile_dde
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
    widen_specializations: bool = True,
    generic_recompiles: bool = True,
    shapes_spec: Any = None,
    dynamic_shapes: Any = None,
    **kwargs: Any,
) -> Any:
    """A drop-in for :func:`torch.compile`: same arguments, same behaviour, same
    compiler underneath; the frames it compiles decide shape questions with proofs.

    Usable bare (``@verishape.compile``), with arguments
    (``@verishape.compile(dynamic=True)``) or as a call (``verishape.compile(model)``).
    Further keyword arguments go to ``torch.compile`` unchanged.

    ``widen_specializations``: a call that misses the cache only because dynamic sizes are
    1 (Dynamo gives them the range ``[2, ...]``: 0/1 specialization) runs the compiled
    artifact of the frame's dynamic compile instead of compiling again, when the size-1
    trace is proved to compute what that artifact computes at 1 (the Dynamo and AOT graphs,
    the guards, and every shape answer Inductor's lowering acted on; see
    :mod:`verishape.compiler.widen.reuse`).  The proof is made when size 1 arrives, for the sizes
    that are 1 in that call; a refusal compiles as stock would, with the reason in
    :func:`verishape.explain`.  A program that never sees size 1 pays for two graph copies
    and a log of the lowering's answers per dynamic compile.  On by default (measured on
    seven tiny Hugging Face models with Inductor: one compile fewer each, compile CPU of a
    batch sweep 0.80x stock); ``widen_specializations=False`` compiles size 1 as stock does.

    ``generic_recompiles``: a frame's first compile is static, as stock's; once its calls
    have brought different inputs (a decoder's prefill and decode steps), its later
    compiles also give a symbol to every size two or more input tensors share (stock: only
    the sizes that changed), so the artifact they make serves the sizes still to come and
    the widening proofs serve sizes of 1 and other layouts from it (a served decoder: 4
    compiles where stock needs 8 and its recompile limit;
    :mod:`verishape.compiler.widen.generic_recompile`).
    Off with ``widen_specializations=False`` too.

    ``shapes_spec`` (or ``dynamic_shapes``, torch 2.14's name; not both): torch's declaration
    of the sizes a server will send (:mod:`torch.fx.experimental.dynamic_spec`), read by
    parameter name through the wrappers Dynamo enters it by (a Hugging Face forward's
    ``*args, **kwargs``): generic from the first compile over the declared ranges, guarded
    as stock guards (:mod:`verishape.compiler.declared`); not with ``dynamic``.
    """
    if model is None:
        def decorate(fn: Callable[..., Any]) -> Any:
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           disable=disable, widen_specializations=widen_specializations, shapes_spec=shapes_spec,
                           generic_recompiles=generic_recompiles, dynamic_shapes=dynamic_shapes, **kwargs)

        return decorate
    if not callable(model):
        raise TypeError(f"verishape.compile: model must be a function or nn.Module, got {type(model).__name__}")
    declared = _declared(shapes_spec, dynamic_shapes, dynamic, model)
    frames.install()
    options = dict(options) if options else None
    passthrough: dict[str, Any] = {}
    if options and "guard_filter_fn" in options:
        passthrough["options"] = {"guard_filter_fn": options.pop("guard_filter_fn")}
    if backend == "inductor":
        wrapped = VerishapeBackend(backend, mode=mode, options=options, dynamic=dynamic,
                                   widen_specializations=widen_specializations,
                                   generic_recompiles=generic_recompiles, declared=declared)
        torch_mode, torch_options = None, passthrough.get("options")
    else:
        wrapped = VerishapeBackend(backend, mode=None, options=None, dynamic=dynamic,
                                   widen_specializations=widen_specializations,
                                   generic_recompiles=generic_recompiles, declared=declared)
        torch_mode = mode
        torch_options = {**(options or {}), **(passthrough.get("options") or {})} or None
    compiled = torch.compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=wrapped, mode=torch_mode,
                             options=torch_options, disable=disable, **kwargs)
    _answer_compiler_config(compiled, wrapped)
    # a data-dependent error that leaves it names the proved torch._check that settles it
    return compiled if disable else compile_dde.catching(compiled)


def _answer_compiler_config(compiled: Any, backend: VerishapeBackend) -> None:
    """``compiled.get_compiler_config()`` (torch's public API) answers what stock's does: the
    Inductor config it compiles under.  Dynamo reads it off an Inductor backend when the
    compiler is built, and ours reaches Dynamo wrapped, so it is read here, at the same
    point (Inductor is imported there, as under stock)."""
    config = backend.compiler_config()
    if config is not None and callable(getattr(compiled, "get_compiler_config", None)):
        compiled.get_compiler_config = lambda: config


def _declared(shapes_spec: Any, dynamic_shapes: Any, dynamic: bool | None,
              model: Callable[..., Any]) -> declared_sizes.Declared | None:
    """The sizes the spec declares for ``model`` (None: no spec), given as ``shapes_spec``
    (torch 2.13's name) or ``dynamic_shapes`` (2.14's); refused with both, or with ``dynamic``."""
    if shapes_spec is not None and dynamic_shapes is not None:
        raise UsageError("verishape.compile: shapes_spec and dynamic_shapes both given; they name one argument "
                         "(torch 2.13 calls it shapes_spec, 2.14 and later dynamic_shapes): pass one")
    keyword, spec = ("shapes_spec", shapes_spec) if shapes_spec is not None else ("dynamic_shapes", dynamic_shapes)
    if spec is None:
        return None
    if dynamic is not None:
        raise UsageError(f"verishape.compile: dynamic={dynamic!r} with {keyword}: the spec says what is dynamic; "
                         "leave dynamic unset")
    return declared_sizes.parse(spec, model, keyword)
