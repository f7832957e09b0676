"""verishape for every ``torch.compile`` in the process: ``verishape.enable()``.

Frameworks that vet a backend's name (accelerate checks ``torch_compile_backend`` against
its own list) cannot be handed ``backend="verishape"``.  This switch leaves their setting
alone: while it holds, every frame Dynamo compiles builds ``VeriShapeEnv``, whatever
backend the ``torch.compile`` call named, so its shape decisions are proved; the backend it
named compiles as it would.  Batch-1 widening needs verishape's backend around the named
one and is not done here (training graphs are never widened anyway).

Torch's FX-graph and AOTAutograd caches are keyed apart while the switch holds (the
process's ``torch.compiler.config.cache_key_tag`` gains verishape's tag), so an artifact
compiled with proved decisions is never served to a stock compile, nor the reverse.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

from . import frames
from .backend import cache_tag, current_settings

_lock = threading.Lock()
_saved_tag: list[str] = []


def enable() -> contextlib.AbstractContextManager[None]:
    """Turn verishape on for every ``torch.compile`` of the process; returns a context
    manager that turns it off again on exit (``with verishape.enable(): ...``), or call
    :func:`disable`."""
    with _lock:
        if not _saved_tag:
            _saved_tag.append(torch.compiler.config.cache_key_tag)
            # stock backends' frames reason with VeriShapeEnv; widening and generic
            # recompiles are verishape's backend's (see compiler/widen/)
            settings = current_settings(widen_specializations=False, generic_recompiles=False)
            torch.compiler.config.cache_key_tag = cache_tag(_saved_tag[0] or None, settings)
            frames.set_everywhere(True)
    return _until_exit()


def disable() -> None:
    """Turn the process-wide switch off (no-op when it is off)."""
    with _lock:
        if _saved_tag:
            torch.compiler.config.cache_key_tag = _saved_tag.pop()
            frames.set_everywhere(False)


def is_enabled() -> bool:
    return bool(_saved_tag)


@contextlib.contextmanager
def _until_exit() -> Iterator[None]:
    try:
        yield
    finally:
        disable()
