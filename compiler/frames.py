"""Choose the ShapeEnv class per Dynamo frame.

Dynamo builds each frame's ShapeEnv in ``OutputGraph.__init__``, looking ``ShapeEnv`` up
as a global of ``torch._dynamo.output_graph``; no config picks the class.  We install,
once, two small hooks:

* ``OutputGraph.__init__`` is wrapped to look at the frame's ``compiler_fn``: if the
  backend chain contains a verishape backend, a context variable is set while the
  original ``__init__`` runs.
* the module global ``ShapeEnv`` becomes a factory that builds :class:`VeriShapeEnv` when
  that variable is set, and the stock class otherwise.

The decision is made from the frame's own backend, so a plain ``torch.compile`` function
reached after a graph break keeps the stock ShapeEnv even when it runs inside a
verishape-compiled call, and a context variable is per thread.  Nothing is patched for
the duration of a call.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch._dynamo.output_graph as output_graph
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from verishape.shape_env import VeriShapeEnv

MARKER = "_verishape_backend"

_building_verishape_frame: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "verishape_building_frame", default=False
)
_install_lock = threading.Lock()
_installed = False

#: In audit mode (``verishape verify-guards``) every frame uses VeriShapeEnv and each new
#: frame is reported to this sink with its code object, real locals and ShapeEnv.
_audit_sink: contextvars.ContextVar[Callable[[Any, dict[str, Any]], None] | None] = contextvars.ContextVar(
    "verishape_audit_sink", default=None
)


@contextlib.contextmanager
def audit(sink: Callable[[Any, dict[str, Any]], None]) -> Iterator[None]:
    """Audit mode for this thread: all frames get VeriShapeEnv; ``sink(output_graph,
    init_arguments)`` sees each one as it is created."""
    install()
    token = _audit_sink.set(sink)
    try:
        yield
    finally:
        _audit_sink.reset(token)


def is_verishape_backend(compiler_fn: Any, depth: int = 8) -> bool:
    """Walk Dynamo's wrappers (``WrapBackendDebug.__wrapped__``,
    ``_TorchCompileWrapper.compiler_fn``) down to the user's backend."""
    fn = compiler_fn
    for _ in range(depth):
        if fn is None:
            return False
        if getattr(fn, MARKER, False):
            return True
        fn = getattr(fn, "__wrapped__", None) or getattr(fn, "compiler_fn", None)
    return False


def _shape_env_factory(*args: Any, **kwargs: Any) -> ShapeEnv:
    cls = VeriShapeEnv if (_building_verishape_frame.get() or _audit_sink.get() is not None) else ShapeEnv
    return cls(*args, **kwargs)


#: The VeriShapeEnvs of recent verishape frames, by code object (for ``verishape.explain``).
_ENVS_PER_CODE = 32
_envs_by_code: dict[Any, list[Any]] = {}
_envs_lock = threading.Lock()


def envs_for(code: Any) -> list[Any]:
    with _envs_lock:
        return list(_envs_by_code.get(code, ()))


def _remember(code: Any, env: Any) -> None:
    with _envs_lock:
        envs = _envs_by_code.setdefault(code, [])
        envs.append(env)
        del envs[:-_ENVS_PER_CODE]


def install() -> None:
    """Install the hooks (idempotent, thread-safe)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        original_init = output_graph.OutputGraph.__init__
        signature = inspect.signature(original_init)

        @functools.wraps(original_init)
        def init(self: Any, code_options: Any, compiler_fn: Any, *args: Any, **kwargs: Any) -> None:
            token = _building_verishape_frame.set(is_verishape_backend(compiler_fn))
            try:
                original_init(self, code_options, compiler_fn, *args, **kwargs)
            finally:
                _building_verishape_frame.reset(token)
            sink = _audit_sink.get()
            if sink is not None or isinstance(self.shape_env, VeriShapeEnv):
                bound = dict(signature.bind(self, code_options, compiler_fn, *args, **kwargs).arguments)
                if isinstance(self.shape_env, VeriShapeEnv):
                    _remember(bound.get("f_code"), self.shape_env)
                if sink is not None:
                    sink(self, bound)

        output_graph.OutputGraph.__init__ = init  # type: ignore[method-assign]
        output_graph.ShapeEnv = _shape_env_factory  # type: ignore[attr-defined, assignment]
        _installed = True


def installed() -> bool:
    return _installed
