"""The backend object that marks a frame as verishape's and keeps caches apart.

It wraps the backend the user chose (a name such as ``"inductor"``/``"aot_eager"`` or a
callable) and calls it unchanged, inside ``torch.compiler.config.patch(cache_key_tag=...)``:
the tag enters the keys of Inductor's FX graph cache and the AOTAutograd cache, so a
verishape artifact (whose guards may be fewer) is never served to a stock compile, nor
the reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from verishape._version import __version__

from .frames import MARKER

CACHE_TAG = f"verishape-{__version__}"


def cache_tag(user_tag: str | None) -> str:
    return f"{user_tag}+{CACHE_TAG}" if user_tag else CACHE_TAG


class VerishapeBackend:
    """Calls the user's backend; its presence in a frame's backend chain selects
    VeriShapeEnv for that frame (see :mod:`compiler.frames`)."""

    def __init__(self, backend: str | Callable[..., Any], *, mode: str | None, options: dict[str, Any] | None,
                 dynamic: bool | None) -> None:
        setattr(self, MARKER, True)
        self._spec = backend
        self.__name__ = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
        if backend == "inductor":
            # torch.compile builds this wrapper for "inductor" itself; we build the same
            # one so mode and options mean exactly what they mean there.
            self._inner: Any = torch._TorchCompileInductorWrapper(mode or "default", options, dynamic)
        else:
            from torch._dynamo.backends.registry import lookup_backend

            self._inner = lookup_backend(backend)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        with torch.compiler.config.patch(cache_key_tag=cache_tag(torch.compiler.config.cache_key_tag)):
            return self._inner(gm, example_inputs, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # get_compiler_config(), reset() and friends belong to the wrapped backend.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["_inner"], name)

    def __repr__(self) -> str:
        return f"VerishapeBackend({self._spec!r})"
