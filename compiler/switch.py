"""verishape for every ``torch.compile`` in the process: ``verishape.enable()``.

Frameworks that vet a backend's name (accelerate checks ``torch_compile_backend`` against
its own list) cannot be handed ``backend="verishape"``.  This switch leaves their setting
alone: while it holds, every frame Dynamo compiles builds ``VeriShapeEnv``, whatever
backend the ``torch.compile`` call named, so its shape decisions are proved, and that
backend runs inside verishape's (put around it when the frame's ``OutputGraph`` is built,
``compiler/frames.py``): size-1 calls and other layouts served by proved reuse, generic
recompiles, as ``verishape.compile`` does; ``enable(widen_specializations=False)`` leaves the
named backend alone.

A ``torch.compile(model, shapes_spec=...)`` (``dynamic_shapes=`` from torch 2.14) made while
the switch holds declares its sizes as ``verishape.compile(model, shapes_spec=...)`` does
(:mod:`verishape.compiler.declared`: read by the callable's parameter names through its
wrappers, backed symbols over the declared ranges),
not as torch's own spec does (unbacked symbols of whatever frame has a local of that name, which a
Hugging Face forward's ``wrapper(*args, **kwargs)`` never has): ``torch.compile`` is routed to
``verishape.compile`` for those calls alone, and restored when the switch is turned off.

Torch's FX-graph and AOTAutograd caches are keyed apart while the switch holds (the
process's ``torch.compiler.config.cache_key_tag`` gains verishape's tag), so an artifact
compiled with proved decisions is never served to a stock compile, nor the reverse.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

from verishape.core.torch_names import SPEC_KEYWORDS

from . import frames
from .backend import VerishapeBackend, cache_tag, current_settings

_lock = threading.Lock()
_saved_tag: list[str] = []
#: ``torch.compile`` as it was before the switch (restored when it is turned off)
_saved_compile: list[Callable[..., Any]] = []


def enable(*, widen_specializations: bool = True, generic_recompiles: bool = True
           ) -> contextlib.AbstractContextManager[None]:
    """Turn verishape on for every ``torch.compile`` of the process; returns a context
    manager that turns it off again on exit (``with verishape.enable(): ...``), or call
    :func:`disable`.  ``widen_specializations`` and ``generic_recompiles`` mean what they
    mean for ``verishape.compile`` (on by default; both off: the frames reason with
    VeriShapeEnv, and the backend each call named compiles alone).  A second call while
    on changes nothing."""
    for name, value in (("widen_specializations", widen_specializations), ("generic_recompiles", generic_recompiles)):
        if not isinstance(value, bool):
            raise TypeError(f"verishape.enable: {name}={value!r} must be True or False")
    with _lock:
        if not _saved_tag:
            _saved_tag.append(torch.compiler.config.cache_key_tag)
            generic = widen_specializations and generic_recompiles
            settings = current_settings(widen_specializations=widen_specializations, generic_recompiles=generic)
            torch.compiler.config.cache_key_tag = cache_tag(_saved_tag[0] or None, settings)
            frames.set_everywhere(True, _wrapper(widen_specializations, generic) if widen_specializations else None)
            _saved_compile.append(torch.compile)
            torch.compile = _declaring(torch.compile, widen_specializations, generic)
    return _until_exit()


def _declaring(original: Callable[..., Any], widen: bool, generic: bool) -> Callable[..., Any]:
    """``torch.compile``, with a call that passes a spec (``shapes_spec``, or ``dynamic_shapes``
    as torch 2.14 names it) made as ``verishape.compile`` makes it (the switch's settings);
    every other call unchanged."""
    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        # the spec under either release's keyword (2.13's shapes_spec, 2.14's dynamic_shapes)
        if all(kwargs.get(k) is None for k in SPEC_KEYWORDS):
            return original(model, **kwargs)
        from .api import compile as declared_compile

        settings = {"widen_specializations": widen, "generic_recompiles": generic}
        if kwargs.get("backend") == "verishape":
            # the named backend (compiler/registered.py): its own option keys are
            # verishape.compile's arguments, the rest Inductor's
            options = dict(kwargs.get("options") or {})
            kwargs["backend"] = options.pop("backend", "inductor")
            settings.update({k: options.pop(k) for k in settings if k in options})
            kwargs["options"] = options or None
        return declared_compile(model, **settings, **kwargs)

    compile._verishape_original = original  # type: ignore[attr-defined]
    return compile


def _wrapper(widen: bool, generic: bool) -> Callable[[Any], VerishapeBackend]:
    def wrap(compiler_fn: Any) -> VerishapeBackend:
        return VerishapeBackend(compiler_fn, mode=None, options=None, dynamic=None, widen_specializations=widen,
                                generic_recompiles=generic, owner=compiler_fn)

    return wrap


def disable() -> None:
    """Turn the process-wide switch off (no-op when it is off)."""
    with _lock:
        if _saved_tag:
            torch.compiler.config.cache_key_tag = _saved_tag.pop()
            frames.set_everywhere(False)
            original = _saved_compile.pop()
            if getattr(torch.compile, "_verishape_original", None) is original:
                torch.compile = original  # (else another library wrapped it since: left to it)


def is_enabled() -> bool:
    return bool(_saved_tag)


@contextlib.contextmanager
def _until_exit() -> Iterator[None]:
    try:
        yield
    finally:
        disable()
