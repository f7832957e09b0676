"""The one seam between verishape and torch's private internals.

verishape replaces or reads a handful of private torch names (ShapeEnv methods, the
class Dynamo's ``OutputGraph`` builds, export's ShapeEnv sites, two FX passes, Inductor's
backend wrapper, the cache-entry list of a code object, Dynamo's compilation metrics) and
reads many more as data (sympy functions, sources, IR classes).  Every one is listed once,
in :mod:`verishape.core.torch_names`, and this module is the probe of item 1 of issue 14:
instead of trusting a version string, :func:`probe` checks each name, signature and
construction site verishape relies on, so a torch that moved one of them is refused in one
line naming what is missing, never compiled silently with the stock ShapeEnv.

Why the list is checked against the code: the probe is only as good as its list.  The
names sit in one data module that every patch and read here takes them from, and
``tests/test_torch_seam.py`` reads every module of the package, so a private torch name
read anywhere but declared nowhere fails the suite instead of failing a user's compile.

Nothing here imports torch at module import: ``verishape --version`` and the CLI's input
checks must work whatever torch is installed (or not).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import logging
import re
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .errors import VerishapeError
from .torch_names import (AOT_MODULE_SIMPLIFIED, ASSERT_PASS_MODULES, CACHE_ENTRIES, COMPILATION_METRICS, DEDUPE_SYMINTS, DYNAMO_TLS,
                          EXPORT_ENTRY, EXPORT_SITES, GUARD_BUILDER, GUARD_BUILDER_PARAMS, INDUCTOR_VIRTUALIZED, INDUCTOR_WRAPPER, LOWERING_VOCABULARY, OUTPUT_GRAPH,
                          OUTPUT_GRAPH_MODULE, OUTPUT_GRAPH_PARAMS, RANGE_READER, READ_NAMES, REQUIRED_MEMBERS, REQUIRED_STATIC_PARAMS,
                          SHAPE_ENV, SHAPES_SPEC_CONFIGS, SOURCE, SPEC_KEYWORDS, VOCABULARY, WIDENING_REGISTRY, _MISSING)

#: The oldest torch whose internals verishape was written against; newer ones are accepted
#: when the probe passes.
MIN_VERSION = (2, 11)


class UnsupportedTorch(VerishapeError, ImportError):
    """The installed torch lacks an internal verishape relies on (or is older than 2.11)."""


def parse_version(text: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; raises ValueError on anything else."""
    m = re.match(r"^(\d+)\.(\d+)", text)
    if not m:
        raise ValueError(f"cannot read a torch version from {text!r}")
    return int(m.group(1)), int(m.group(2))





def wrap(module_name: str, path: str, make: Callable[[Any], Any]) -> Callable[[], None] | None:
    """Replace ``module_name.path`` (a function, method, classmethod or staticmethod) by
    ``make(original)`` and return the undo, or None where the module or name is absent.
    ``original`` is torch's own function even when a wrapper is already installed (the
    ``_verishape_original`` attribute this sets on each wrapper), so wrappers never stack."""
    import sys

    module = sys.modules.get(module_name)
    if module is None:
        return None
    *owners, name = path.split(".")
    owner: Any = module
    for o in owners:
        owner = getattr(owner, o, None)
    raw = owner.__dict__.get(name) if owner is not None else None
    if raw is None:
        return None
    kind = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
    fn = raw.__func__ if kind is not None else raw
    original = getattr(fn, "_verishape_original", fn)
    wrapped = make(original)
    wrapped._verishape_original = original
    setattr(owner, name, kind(wrapped) if kind is not None else wrapped)
    return lambda: setattr(owner, name, raw)


_wrapped_once: set[tuple[str, str]] = set()
_wrap_once_lock = threading.Lock()


def wrap_once(target: tuple[str, str], make: Callable[[Any], Any], missing: str) -> None:
    """:func:`wrap` ``target`` (module name, path) the first time this is called for it,
    importing the module first; where torch lacks it, log ``missing`` once as a warning
    (the caller's feature then behaves as stock)."""
    with _wrap_once_lock:
        if target in _wrapped_once:
            return
        _wrapped_once.add(target)
    importlib.import_module(target[0])
    if wrap(*target, make) is None:
        logging.getLogger("verishape").warning("verishape: this torch has no %s.%s: %s", *target, missing)


def widening_missing(lookup: Callable[[str], Any] | Mapping[str, Any] | None = None) -> list[str]:
    """The required rows of :data:`WIDENING_REGISTRY` (and the range reader) this torch lacks
    entirely; empty when widening can run.  Imports Inductor's modules."""
    if lookup is None:
        lookup = resolve
    elif isinstance(lookup, Mapping):
        lookup = functools.partial(lambda table, name: table.get(name, _MISSING), dict(lookup))
    missing = [f"{row.module}.{' or '.join(row.paths)}" for row in WIDENING_REGISTRY
               if row.required and not row.present(lookup)]
    missing += [name for name in LOWERING_VOCABULARY if lookup(name) is _MISSING]
    if lookup(".".join(RANGE_READER)) is _MISSING:
        missing.append(".".join(RANGE_READER))
    return missing


@functools.cache
def widening_refused() -> str | None:
    """Why widening cannot run on the installed torch (one line), or None; probed once."""
    missing = widening_missing()
    if not missing:
        return None
    import torch

    return (f"verishape cannot widen on torch {torch.__version__}: missing {', '.join(missing)} "
            f"(without them a size-1 call could run an artifact whose decisions it cannot see); "
            f"size-1 calls compile as stock")


def require_names(names: tuple[str, ...], who: str) -> None:
    """Refuse, in one line naming ``who`` and what is missing, a torch that lacks any of
    ``names`` (for the groups probed on first use, not at import)."""
    missing = [name for name in names if resolve(name) is _MISSING]
    if missing:
        import torch

        raise UnsupportedTorch(f"{who} cannot run on torch {torch.__version__}: missing {', '.join(missing)}")




def resolve(dotted: str) -> Any:
    """The object at ``dotted`` (longest importable module prefix, then attributes), or
    ``_MISSING``.  Only ImportError/AttributeError mean "missing": anything else is a bug."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def _source_text(obj: Any) -> str | None:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return None


# ---------------------------------------------------------------------------- the probe


@dataclasses.dataclass(frozen=True)
class Features:
    """Probed facts about the installed torch's internals."""

    torch_version: tuple[int, int]
    maybe_evaluate_static_params: frozenset[str]
    has_guard_or_defer_runtime_assert: bool
    source_name_is_method: bool
    #: Why ``verishape.export`` cannot hook export's ShapeEnv sites here (None: it can).
    #: Optional: ``torch.compile`` does not need them, so only ``verishape.export`` refuses.
    export_sites_missing: str | None = None

    @property
    def static_eval_knows_size_oblivious(self) -> bool:
        return "size_oblivious" in self.maybe_evaluate_static_params


def _check_shape_env(shape_env: Any) -> list[str]:
    if shape_env is _MISSING:
        return [SHAPE_ENV]
    missing = []
    static = getattr(shape_env, "_maybe_evaluate_static", None)
    if static is None:
        missing.append("ShapeEnv._maybe_evaluate_static")
    else:
        params = set(inspect.signature(inspect.unwrap(static)).parameters)
        missing += [f"ShapeEnv._maybe_evaluate_static({p}=...)" for p in sorted(REQUIRED_STATIC_PARAMS - params)]
        # VeriShapeEnv forwards cache_clear/cache_info of the stock ``_lru_cache`` wrapper.
        missing += [f"ShapeEnv._maybe_evaluate_static.{a} (the _lru_cache wrapper)"
                    for a in ("cache_clear", "cache_info") if not hasattr(static, a)]
    missing += [f"ShapeEnv.{m}" for m in REQUIRED_MEMBERS if not hasattr(shape_env, m)]
    # The _lru_cache helpers compare this instance counter; VeriShapeEnv bumps it.  It is
    # an instance attribute, so look for it in the names the class's own code uses.
    if not any("_version_counter" in getattr(getattr(fn, "__code__", None), "co_names", ())
               for fn in vars(shape_env).values()):
        missing.append("ShapeEnv._version_counter")
    return missing


def _check_output_graph(lookup: Callable[[str], Any], shape_env: Any) -> list[str]:
    graph = lookup(OUTPUT_GRAPH)
    if graph is _MISSING:
        return [OUTPUT_GRAPH]
    params = inspect.signature(graph.__init__).parameters
    missing = [f"OutputGraph.__init__({p}=...)" for p in OUTPUT_GRAPH_PARAMS if p not in params]
    # The frame's ShapeEnv must be built by calling the module global we replace: a torch
    # that builds it elsewhere would silently compile with the stock class.
    text = _source_text(inspect.unwrap(graph.__init__))
    if text is None or not re.search(r"(?<![\w.])ShapeEnv\(", text):
        missing.append("the ShapeEnv(...) call in OutputGraph.__init__")
    if not _is_shape_env_global(lookup(OUTPUT_GRAPH_MODULE + ".ShapeEnv"), shape_env):
        missing.append(OUTPUT_GRAPH_MODULE + ".ShapeEnv (module global)")
    return missing


def _is_shape_env_global(obj: Any, shape_env: Any) -> bool:
    """The stock class, or a factory verishape already put there."""
    return obj is shape_env or getattr(obj, "_verishape_factory", False)


def _check_export_sites(lookup: Callable[[str], Any], shape_env: Any) -> str | None:
    bad = [f"{site}.ShapeEnv" for site in EXPORT_SITES if not _is_shape_env_global(lookup(site + ".ShapeEnv"), shape_env)]
    return ", ".join(bad) or None


def _check_hooked_functions(lookup: Callable[[str], Any]) -> list[str]:
    missing = [f"{m}.insert_deferred_runtime_asserts" for m in ASSERT_PASS_MODULES
               if lookup(m + ".insert_deferred_runtime_asserts") is _MISSING]
    missing += [name for name in (DEDUPE_SYMINTS, INDUCTOR_WRAPPER, CACHE_ENTRIES, COMPILATION_METRICS, *READ_NAMES,
                                  EXPORT_ENTRY, *VOCABULARY)
                if lookup(name) is _MISSING]
    aot = lookup(AOT_MODULE_SIMPLIFIED)
    if aot is _MISSING or "bw_compiler" not in inspect.signature(aot).parameters:
        missing.append(f"{AOT_MODULE_SIMPLIFIED}(bw_compiler=...)")
    return missing


def probe(lookup: Callable[[str], Any] | Mapping[str, Any] | None = None,
          version_text: str | None = None) -> tuple[Features | None, list[str]]:
    """Read the facts off the installed torch (or off ``lookup``, a mapping from dotted
    names to fake objects, for tests).  Returns the features and what is missing; the
    features are None when the version itself is refused."""
    if lookup is None:
        lookup = resolve
    elif isinstance(lookup, Mapping):
        lookup = functools.partial(lambda table, name: table.get(name, _MISSING), dict(lookup))
    if version_text is None:
        import torch

        version_text = torch.__version__
    version = parse_version(version_text)
    if version < MIN_VERSION:
        return None, [f"torch >= {MIN_VERSION[0]}.{MIN_VERSION[1]}"]
    shape_env = lookup(SHAPE_ENV)
    missing = _check_shape_env(shape_env) + _check_output_graph(lookup, shape_env) + _check_hooked_functions(lookup)
    source = lookup(SOURCE)
    if source is _MISSING:
        missing.append(SOURCE)
    static = getattr(shape_env, "_maybe_evaluate_static", None)
    name_attr = inspect.getattr_static(source, "name", None) if source is not _MISSING else None
    features = Features(
        torch_version=version,
        maybe_evaluate_static_params=frozenset(inspect.signature(inspect.unwrap(static)).parameters) - {"self"}
        if static is not None else frozenset(),
        has_guard_or_defer_runtime_assert=hasattr(shape_env, "guard_or_defer_runtime_assert"),
        source_name_is_method=callable(name_attr) and not isinstance(name_attr, property)
        and not hasattr(name_attr, "__set_name__"),
        export_sites_missing=_check_export_sites(lookup, shape_env),
    )
    return features, missing


def require(lookup: Callable[[str], Any] | Mapping[str, Any] | None = None,
            version_text: str | None = None) -> Features:
    """Probe, and refuse in one line when anything verishape relies on is absent."""
    if version_text is None:
        import torch

        version_text = torch.__version__
    features, missing = probe(lookup, version_text)
    if missing or features is None:
        raise UnsupportedTorch(
            f"verishape cannot run on torch {version_text}: missing {', '.join(missing)}"
            f" (verishape needs torch >= {MIN_VERSION[0]}.{MIN_VERSION[1]} with these internals)"
        )
    return features


@functools.cache
def features() -> Features:
    """The installed torch's features, probed once (raises UnsupportedTorch)."""
    return require()


# ---------------------------------------------------------------------------- the patches


def stock_shape_env() -> type:
    return resolve(SHAPE_ENV)


def mark_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """Tag a ShapeEnv factory so that the probe (and re-installs) recognise it."""
    factory._verishape_factory = True  # type: ignore[attr-defined]
    return factory


def hook_output_graph_init(hook: Callable[[Any, dict[str, Any], Callable[[], None]], None]) -> None:
    """Wrap ``OutputGraph.__init__``: ``hook(graph, arguments, run)`` gets the call's
    arguments by name (``inspect.signature(...).bind``, so no argument position is assumed)
    and must call ``run()`` exactly once to run the original."""
    module = importlib.import_module(OUTPUT_GRAPH_MODULE)
    original = module.OutputGraph.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        arguments = dict(bound.arguments)
        arguments.pop(next(iter(signature.parameters)), None)  # self
        hook(self, arguments, lambda: original(self, *args, **kwargs))

    module.OutputGraph.__init__ = init


def set_output_graph_shape_env(factory: Callable[..., Any]) -> None:
    """Dynamo's frames build their ShapeEnv through this factory (checked by the probe)."""
    module = importlib.import_module(OUTPUT_GRAPH_MODULE)
    module.ShapeEnv = mark_factory(factory)  # type: ignore[attr-defined]


def set_export_sites_shape_env(factory: Callable[..., Any], sites: tuple[str, ...] = EXPORT_SITES) -> str | None:
    """Point each export site's ``ShapeEnv`` global at ``factory``.  Returns why it could
    not (nothing is changed then), or None."""
    stock = stock_shape_env()
    modules = []
    for name in sites:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            return f"cannot import {name} ({exc})"
        current = getattr(module, "ShapeEnv", None)
        if not _is_shape_env_global(current, stock):
            return f"{name}.ShapeEnv is {current!r}, not torch's ShapeEnv class"
        modules.append(module)
    for module in modules:
        module.ShapeEnv = mark_factory(factory)  # type: ignore[attr-defined]
    return None


def source_name(source: Any) -> str:
    """A Dynamo source's name: a method on some torch releases, a property on others."""
    name = source.name
    return name() if callable(name) else str(name)


@functools.cache
def _resolved(dotted: str) -> Any:
    """:func:`resolve` once per name, for module-level objects that never move (Dynamo's
    thread-local holder, Inductor's ``V``): each lookup would otherwise retry imports."""
    return resolve(dotted)


def optional(dotted: str) -> Any:
    """The object at ``dotted``, or None where this torch lacks it (for optional features
    whose absence only loses what they add)."""
    obj = _resolved(dotted)
    return None if obj is _MISSING else obj


def spec_keyword() -> str | None:
    """The keyword this torch's ``torch.compile`` takes a shapes spec by (2.13's
    ``shapes_spec``, 2.14's ``dynamic_shapes``: ``torch_names.SPEC_KEYWORDS``), read off its
    signature (torch's own where ``verishape.enable()`` wraps it); None where it takes none."""
    import torch

    compile_ = getattr(torch.compile, "_verishape_original", torch.compile)
    params = inspect.signature(compile_).parameters
    return next((k for k in SPEC_KEYWORDS if k in params), None)


def torch_spec() -> Any:
    """The spec ``torch.compile``'s spec keyword set for the frames compiling now (its config,
    under this release's name: ``torch_names.SHAPES_SPEC_CONFIGS``), or None."""
    for module, name in SHAPES_SPEC_CONFIGS:
        config = optional(module)
        spec = getattr(config, name, None) if config is not None else None
        if spec is not None:
            return spec
    return None


def current_tx() -> Any:
    """The instruction translator Dynamo is running on this thread, or None outside a trace."""
    return getattr(_resolved(DYNAMO_TLS), "current_tx", None)


@dataclasses.dataclass(frozen=True)
class FrameInputs:
    """The frame Dynamo started tracing: its code, globals and the locals it was entered
    with (the real argument values; a resumed frame's are the values it resumes with)."""

    code: Any
    f_globals: dict[str, Any]
    f_locals: dict[str, Any]


def traced_frame_inputs() -> FrameInputs | None:
    """The root frame of the trace running on this thread (None outside a Dynamo trace, or
    when the translator lacks the attributes read here)."""
    tx = current_tx()
    root = getattr(getattr(tx, "output", None), "root_tx", None)
    try:
        return FrameInputs(root.f_code, root.f_globals, dict(root.f_locals))
    except (AttributeError, TypeError):
        return None


@dataclasses.dataclass(frozen=True)
class GuardBuildSite:
    """The frame whose guards Dynamo is building: its code object and output graph."""

    code: Any
    output_graph: Any


def guard_build_site() -> GuardBuildSite | None:
    """The frame whose guards Dynamo is building on this thread (a ``guard_filter_fn`` is
    called inside ``CheckFunctionManager.__init__``), read from that call's arguments; None
    outside one.  Raises :class:`UnsupportedTorch` where this torch's builder lacks them."""
    init = _guard_builder_init()
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is init:
            local = frame.f_locals
            return GuardBuildSite(local["f_code"], local["output_graph"])
        frame = frame.f_back
    return None


@functools.lru_cache(maxsize=1)
def _guard_builder_init() -> Any:
    builder = resolve(GUARD_BUILDER)
    init = getattr(getattr(builder, "__init__", None), "__code__", None)
    params = init.co_varnames[:init.co_argcount + init.co_kwonlyargcount] if init is not None else ()
    missing = [f"{GUARD_BUILDER}.__init__({p}=...)" for p in GUARD_BUILDER_PARAMS if p not in params]
    if builder is _MISSING or missing:
        import torch

        raise UnsupportedTorch(f"verishape.proved_guard_filter cannot run on torch {torch.__version__}: missing "
                               f"{', '.join(missing) if builder is not _MISSING else GUARD_BUILDER}")
    return init


def inductor_graph() -> Any:
    """The graph Inductor is lowering on this thread (``V.graph``)."""
    return _resolved(INDUCTOR_VIRTUALIZED).graph


def inductor_wrapper_class() -> Any:
    return resolve(INDUCTOR_WRAPPER)


def cache_entries(code: Any) -> list[Any]:
    """Dynamo's cache entries for a code object (the audit replays the audited one)."""
    return resolve(CACHE_ENTRIES)(code)


@dataclasses.dataclass(frozen=True)
class Recompile:
    compile_id: str
    guard: str


def recompiles(co_name: str) -> list[Recompile]:
    """Dynamo's recompiles of frames named ``co_name``, oldest first, each with the text
    of the guard that failed.  Dynamo's reason reads ``"<n>/<m>: <guard>  # <where>"``:
    the guard is what sits between the first ``": "`` and the comment."""
    out = []
    for m in resolve(COMPILATION_METRICS)():
        if m.co_name == co_name and m.recompile_reason:
            guard = m.recompile_reason.split("#")[0].strip()
            out.append(Recompile(str(m.compile_id), guard.split(": ", 1)[-1]))
    return out
