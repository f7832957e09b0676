"""``torch.compile(model, backend="verishape")``: verishape as a named Dynamo backend.

The package registers this module's :func:`verishape_backend` under the
``torch_dynamo_backends`` entry point (``pyproject.toml``), as compiler add-ons do: Dynamo
finds it by name, ``torch._dynamo.list_backends()`` lists it, and frameworks that pass a
backend name on reach it without importing verishape.  It behaves as ``verishape.compile``
does with the same settings: the frames it compiles reason with ``VeriShapeEnv``, the inner
backend (Inductor unless ``options["backend"]`` names another) compiles unchanged, and
batch-1 widening is on.

Torch hands a named backend its ``mode`` and ``options``.  ``options`` takes two keys of
verishape's own, ``backend`` (the inner backend: ``inductor``, ``aot_eager`` or ``eager``)
``widen_specializations`` and ``generic_recompiles`` (bools); every other key is an Inductor
option.  A bad one is
refused in one line that names it and what is accepted.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from verishape.core import torch_seam
from verishape.core.errors import VerishapeError

from . import declared as declared_sizes
from . import frames
from .backend import VerishapeBackend
from .widen import generic_recompile

#: inner backends, and verishape's own option keys
INNER_BACKENDS = ("inductor", "aot_eager", "eager")
OWN_OPTIONS = ("backend", "widen_specializations", "generic_recompiles")

log = logging.getLogger("verishape")

_built: dict[tuple[Any, ...], VerishapeBackend] = {}
_built_lock = threading.Lock()


class BadOption(VerishapeError, ValueError):
    """A ``mode`` or ``options`` entry this backend does not accept (the message names it
    and what is accepted)."""


def _settings(mode: str | None, options: dict[str, Any] | None) -> tuple[str, bool, bool, dict[str, Any] | None]:
    options = dict(options or {})
    inner = options.pop("backend", "inductor")
    if inner not in INNER_BACKENDS:
        raise BadOption(f"backend='verishape': options['backend']={inner!r} is not an inner backend; use one of "
                        f"{', '.join(map(repr, INNER_BACKENDS))}")
    flags = []
    for name in ("widen_specializations", "generic_recompiles"):
        value = options.pop(name, True)
        if not isinstance(value, bool):
            raise BadOption(f"backend='verishape': options[{name!r}]={value!r} must be True or False")
        flags.append(value)
    widen, generic = flags
    if inner != "inductor" and (options or (mode not in (None, "default"))):
        what = f"mode={mode!r}" if mode not in (None, "default") else f"options {sorted(options)}"
        raise BadOption(f"backend='verishape': {what} apply to the inductor inner backend only "
                        f"(options['backend']={inner!r}); drop them or use options['backend']='inductor'")
    return inner, widen, generic, options or None


def _backend(mode: str | None, options: dict[str, Any] | None) -> VerishapeBackend:
    inner, widen, generic, inner_options = _settings(mode, options)
    key = (inner, widen, generic, mode, tuple(sorted((k, repr(v)) for k, v in (inner_options or {}).items())))
    with _built_lock:
        backend = _built.get(key)
        if backend is None:
            backend = VerishapeBackend(inner, mode=mode if inner == "inductor" else None, options=inner_options,
                                       dynamic=None, widen_specializations=widen, generic_recompiles=generic)
            _built[key] = backend
    return backend


def verishape_backend(gm: Any, example_inputs: Any, *, mode: str | None = None,
                      options: dict[str, Any] | None = None) -> Any:
    """The named backend ``"verishape"``: compile ``gm`` as ``verishape.compile`` would."""
    _say_if_torch_reads_a_spec()
    return _backend(mode, options)(gm, example_inputs)


#: the line of :func:`_say_if_torch_reads_a_spec` has been said in this process
_said_torch_reads_the_spec = False


def _say_if_torch_reads_a_spec() -> None:
    """``torch.compile(backend="verishape", shapes_spec=...)`` (``dynamic_shapes=`` from torch
    2.14) outside ``verishape.enable()``:
    torch applied its own reading of the spec while tracing, before any backend is called (its
    unbacked sizes, matched by the frame's local names: a wrapped forward's ``**kwargs``
    often matches none), so a user must not believe verishape declared it.  Said once."""
    global _said_torch_reads_the_spec
    if _said_torch_reads_the_spec or not declared_sizes.torch_spec_active():
        return
    _said_torch_reads_the_spec = True
    keyword = torch_seam.spec_keyword() or "shapes_spec"
    log.warning("verishape: torch.compile(backend='verishape', %s=...) compiles with torch's own reading of the spec; "
                "for verishape's declared sizes call verishape.compile(fn, %s=...) or turn on verishape.enable() "
                "before torch.compile", keyword, keyword)


def _generic_recompiles(held: dict[str, Any]) -> bool:
    """Whether a frame of this backend, with the ``mode`` and ``options`` torch's wrapper
    holds for it, recompiles generic (:mod:`verishape.compiler.widen.generic_recompile`);
    options it would refuse: no (the backend call refuses them in one line)."""
    try:
        _, widen, generic, _ = _settings(held.get("mode"), held.get("options"))
    except BadOption:
        return False
    return widen and generic


# Dynamo's wrapper keeps this function as its ``compiler_fn``: the marker makes the frames
# it compiles build VeriShapeEnv (``frames.is_verishape_backend``); the policy reads its
# options through ``generic_recompiles``.
setattr(verishape_backend, frames.MARKER, True)
verishape_backend.generic_recompiles = _generic_recompiles  # type: ignore[attr-defined]
frames.install()  # before the first frame: Dynamo imports this module when it looks the name up
generic_recompile.install()
