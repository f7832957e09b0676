"""Choose the ShapeEnv class per Dynamo frame.

Dynamo builds each frame's ShapeEnv in ``OutputGraph.__init__``, looking ``ShapeEnv`` up
as a global of ``torch._dynamo.output_graph``; no config picks the class.  We install,
once, two small hooks:

* ``OutputGraph.__init__`` is wrapped to look at the frame's ``compiler_fn``: if the
  backend chain contains a verishape backend, a context variable is set while the
  original ``__init__`` runs.
* the module global ``ShapeEnv`` becomes a factory that builds :class:`VeriShapeEnv` when
  that variable is set, and the stock class otherwise.

Both hooks go through :mod:`verishape.core.torch_seam`, which binds ``OutputGraph.__init__``'s
arguments by name (no position is assumed) and whose probe, run when VeriShapeEnv is
imported, has checked that ``__init__`` takes those arguments and builds the frame's
ShapeEnv by calling that module global.

The decision is made from the frame's own backend, so a plain ``torch.compile`` function
reached after a graph break keeps the stock ShapeEnv even when it runs inside a
verishape-compiled call, and a context variable is per thread.  Nothing is patched for
the duration of a call.

``torch.export`` builds its ShapeEnv in two more places, both as module globals: the fake
inputs of non-strict export (``torch._export.non_strict_utils``) and the fallback fake
mode of the ATen re-trace (``torch.export._trace``); strict export goes through Dynamo's
``OutputGraph``.  A factory is installed at those two sites, and :func:`exporting` (used
by ``verishape.export``) makes them and ``OutputGraph`` build the export's VeriShapeEnv
subclass for the duration of one export call on this thread; every other export keeps the
stock class at the export sites (audit mode included).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from torch.fx.experimental.symbolic_shapes import ShapeEnv

from verishape.core import torch_names, torch_seam
from verishape.core.shape_env import FEATURES, VeriShapeEnv

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


def is_verishape_backend(compiler_fn: Any) -> bool:
    return verishape_backend(compiler_fn)[0] is not None


def verishape_backend(compiler_fn: Any, depth: int = 8) -> tuple[Any, dict[str, Any]]:
    """Walk Dynamo's wrappers (``WrapBackendDebug.__wrapped__``,
    ``_TorchCompileWrapper.compiler_fn``) down to the user's backend: the verishape backend
    there (None: another backend), and the options the last wrapper above it holds (the
    named backend reads its own from them)."""
    fn = compiler_fn
    held: dict[str, Any] = {}
    for _ in range(depth):
        if fn is None:
            return None, held
        if getattr(fn, MARKER, False):
            return fn, held
        held = getattr(fn, "kwargs", None) if isinstance(getattr(fn, "kwargs", None), dict) else held
        fn = getattr(fn, "__wrapped__", None) or getattr(fn, "compiler_fn", None)
    return None, held


#: Inside ``verishape.export`` on this thread: the VeriShapeEnv class to build and the
#: list that collects every ShapeEnv the export builds, in construction order.
_export_envs: contextvars.ContextVar[tuple[type[VeriShapeEnv], list[Any]] | None] = contextvars.ContextVar(
    "verishape_export_envs", default=None)


@contextlib.contextmanager
def exporting(envs: list[Any], env_class: type[VeriShapeEnv] = VeriShapeEnv) -> Iterator[None]:
    """Every ShapeEnv built on this thread inside the block (export's fake inputs, a strict
    export's Dynamo frame, the re-trace's fallback fake mode) is an ``env_class``, appended
    to ``envs``.  Raises :class:`UnsupportedTorch` when the export sites could not be hooked:
    exporting with the stock env would silently drop what the caller asked for."""
    install()
    require_export_hooks()
    token = _export_envs.set((env_class, envs))
    try:
        yield
    finally:
        _export_envs.reset(token)


#: ``verishape.enable()``: every frame of every ``torch.compile`` in the process, whatever
#: backend it names, builds VeriShapeEnv; ``_wrap_everywhere`` (when widening is on) puts
#: verishape's backend around such a frame's own, as ``verishape.compile`` does
_everywhere = False
_wrap_everywhere: Callable[[Any], Any] | None = None


def set_everywhere(on: bool, wrap: Callable[[Any], Any] | None = None) -> None:
    global _everywhere, _wrap_everywhere
    install()
    _everywhere, _wrap_everywhere = on, (wrap if on else None)


def _shape_env_factory(*args: Any, **kwargs: Any) -> ShapeEnv:
    """Dynamo's ``OutputGraph``: the export's class inside ``exporting`` (a strict export's
    frame), VeriShapeEnv for a verishape backend's frame, in audit mode or while
    ``verishape.enable()`` holds, else stock."""
    if _export_envs.get() is not None:
        return _export_site_factory(*args, **kwargs)
    verishape = _building_verishape_frame.get() or _audit_sink.get() is not None or _everywhere
    cls = VeriShapeEnv if verishape else ShapeEnv
    return cls(*args, **kwargs)


def _export_site_factory(*args: Any, **kwargs: Any) -> ShapeEnv:
    """``torch.export``'s own sites: the export's class inside ``exporting``, else stock
    (also in audit mode: an export's premises differ from a frame's, see
    ``verishape.compiler.export.program.ExportShapeEnv``)."""
    export = _export_envs.get()
    if export is None:
        return ShapeEnv(*args, **kwargs)
    env_class, envs = export
    env = env_class(*args, **kwargs)
    envs.append(env)
    return env


#: Modules of ``torch.export`` that build a ShapeEnv from their module global ``ShapeEnv``.
EXPORT_SITES = torch_names.EXPORT_SITES
_export_hook_error: str | None = "verishape's torch.export hooks are not installed (call verishape.compiler.frames.install())"


def require_export_hooks() -> None:
    """Refuse to export when a site could not be hooked (a torch whose internals moved)."""
    if _export_hook_error is not None:
        raise torch_seam.UnsupportedTorch(f"verishape.export cannot run on this torch: {_export_hook_error}")


def _install_export_hooks() -> str | None:
    """Point each export site's ``ShapeEnv`` global at the factory.  Returns why it could
    not (nothing is changed then), or None.  ``torch.compile`` does not need these sites,
    so a failure here is reported only when ``verishape.export`` is called."""
    if FEATURES.export_sites_missing is not None:
        return f"this torch lacks {FEATURES.export_sites_missing}"
    return torch_seam.set_export_sites_shape_env(_export_site_factory, EXPORT_SITES)


#: The VeriShapeEnvs of recent verishape frames, by code object (for ``verishape.explain``).
_ENVS_PER_CODE = 32
_envs_by_code: dict[Any, list[Any]] = {}
_envs_lock = threading.Lock()


def envs_for(code: Any) -> list[Any]:
    with _envs_lock:
        return list(_envs_by_code.get(code, ()))


def envs_for_callable(fn: Any) -> list[Any]:
    """The frames Dynamo compiled for ``fn`` through its shared wrapper frame (a compiled
    ``nn.Module`` runs as ``external_utils.wrap_inline``'s ``inner``, one code object for
    every module compiled in the process: its frames are told apart by the closure's ``fn``)."""
    with _envs_lock:
        return list(_envs_by_callable.get(fn, ()))


#: The VeriShapeEnvs of frames compiled through Dynamo's shared wrapper frame, by the
#: callable it wraps (weakly: a module that is gone takes its frames with it)
_envs_by_callable: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


#: each remembered frame's compile id (weakly, by its env)
_compile_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def compile_id_of(env: Any) -> str | None:
    """The compile id of a remembered frame (its env), or None."""
    with _envs_lock:
        return _compile_ids.get(env)


def _wrapped_callable(arguments: dict[str, Any]) -> Any:
    """The callable a wrapper frame of ``torch._dynamo.external_utils`` calls (its closure
    variable ``fn``), or None for any other frame."""
    code = arguments.get("f_code")
    if code is None or not code.co_filename.endswith("external_utils.py") or "fn" not in code.co_freevars:
        return None
    return (arguments.get("local_scope") or {}).get("fn")


def _remember(code: Any, env: Any, wrapped: Any = None) -> None:
    from torch._guards import CompileContext

    with _envs_lock:
        # which compile this frame is (Dynamo's recompile reasons are listed by it); kept
        # here, not on the env, whose state is torch's
        _compile_ids[env] = str(CompileContext.current_compile_id())
        envs = _envs_by_code.setdefault(code, [])
        envs.append(env)
        del envs[:-_ENVS_PER_CODE]
        if wrapped is not None:
            try:
                mine = _envs_by_callable.setdefault(wrapped, [])
            except TypeError:  # not weakly referenceable: found by its code only
                return
            mine.append(env)
            del mine[:-_ENVS_PER_CODE]


def forget(env: Any) -> None:
    """Drop a remembered frame whose attempt Dynamo is made to trace again (its decisions
    never reach an installed entry; the next attempt is remembered in its place)."""
    with _envs_lock:
        for envs in (*_envs_by_code.values(), *_envs_by_callable.values()):
            if any(e is env for e in envs):
                envs[:] = [e for e in envs if e is not env]
        _compile_ids.pop(env, None)


def install() -> None:
    """Install the hooks (idempotent, thread-safe)."""
    global _installed, _export_hook_error
    with _install_lock:
        if _installed:
            return
        torch_seam.hook_output_graph_init(_around_output_graph_init)
        torch_seam.set_output_graph_shape_env(_shape_env_factory)
        _export_hook_error = _install_export_hooks()
        _installed = True


def _around_output_graph_init(graph: Any, arguments: dict[str, Any], run: Callable[[], None]) -> None:
    """Runs the stock ``OutputGraph.__init__`` (``run``) with the frame's backend choosing
    the ShapeEnv class; arguments are read by name (the seam binds them)."""
    token = _building_verishape_frame.set(is_verishape_backend(arguments.get("compiler_fn")))
    try:
        run()
    finally:
        _building_verishape_frame.reset(token)
    wrap = _wrap_everywhere
    if (wrap is not None and _everywhere and _export_envs.get() is None and _audit_sink.get() is None
            and graph.compiler_fn is not None and not is_verishape_backend(graph.compiler_fn)):
        # verishape.enable(): the frame's own backend runs inside verishape's (widening,
        # generic recompiles), read by Dynamo from this attribute when it compiles
        graph.compiler_fn = wrap(graph.compiler_fn)
    sink = _audit_sink.get()
    if isinstance(graph.shape_env, VeriShapeEnv) and _export_envs.get() is None:
        # (a strict export's frame is explained through its ExportedProgram)
        _remember(arguments.get("f_code"), graph.shape_env, _wrapped_callable(arguments))
    if sink is not None:
        sink(graph, arguments)


def installed() -> bool:
    return _installed
