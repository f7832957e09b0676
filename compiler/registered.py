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
and ``widen_specializations`` (bool); every other key is an Inductor option.  A bad one is
refused in one line that names it and what is accepted.
"""

from __future__ import annotations

import threading
from typing import Any

from verishape.core.errors import VerishapeError

from . import frames
from .backend import VerishapeBackend

#: inner backends, and verishape's own option keys
INNER_BACKENDS = ("inductor", "aot_eager", "eager")
OWN_OPTIONS = ("backend", "widen_specializations")

_built: dict[tuple[Any, ...], VerishapeBackend] = {}
_built_lock = threading.Lock()


class BadOption(VerishapeError, ValueError):
    """A ``mode`` or ``options`` entry this backend does not accept (the message names it
    and what is accepted)."""


def _settings(mode: str | None, options: dict[str, Any] | None) -> tuple[str, bool, dict[str, Any] | None]:
    options = dict(options or {})
    inner = options.pop("backend", "inductor")
    if inner not in INNER_BACKENDS:
        raise BadOption(f"backend='verishape': options['backend']={inner!r} is not an inner backend; use one of "
                        f"{', '.join(map(repr, INNER_BACKENDS))}")
    widen = options.pop("widen_specializations", True)
    if not isinstance(widen, bool):
        raise BadOption(f"backend='verishape': options['widen_specializations']={widen!r} must be True or False")
    if inner != "inductor" and (options or (mode not in (None, "default"))):
        what = f"mode={mode!r}" if mode not in (None, "default") else f"options {sorted(options)}"
        raise BadOption(f"backend='verishape': {what} apply to the inductor inner backend only "
                        f"(options['backend']={inner!r}); drop them or use options['backend']='inductor'")
    return inner, widen, options or None


def _backend(mode: str | None, options: dict[str, Any] | None) -> VerishapeBackend:
    inner, widen, inner_options = _settings(mode, options)
    key = (inner, widen, mode, tuple(sorted((k, repr(v)) for k, v in (inner_options or {}).items())))
    with _built_lock:
        backend = _built.get(key)
        if backend is None:
            backend = VerishapeBackend(inner, mode=mode if inner == "inductor" else None, options=inner_options,
                                       dynamic=None, widen_specializations=widen)
            _built[key] = backend
    return backend


def verishape_backend(gm: Any, example_inputs: Any, *, mode: str | None = None,
                      options: dict[str, Any] | None = None) -> Any:
    """The named backend ``"verishape"``: compile ``gm`` as ``verishape.compile`` would."""
    return _backend(mode, options)(gm, example_inputs)


# Dynamo's wrapper keeps this function as its ``compiler_fn``: the marker makes the frames
# it compiles build VeriShapeEnv (``frames.is_verishape_backend``).
setattr(verishape_backend, frames.MARKER, True)
frames.install()  # before the first frame: Dynamo imports this module when it looks the name up
