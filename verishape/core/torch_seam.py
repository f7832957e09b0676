"""The one seam between verishape and torch's private internals.

verishape replaces or reads a handful of private torch names (ShapeEnv methods, the
class Dynamo's ``OutputGraph`` builds, export's ShapeEnv sites, two FX passes, Inductor's
backend wrapper, the cache-entry list of a code object, Dynamo's compilation metrics).
Every such name is listed here, once, and this module is also the probe of item 1 of
issue 14: instead of trusting a version string, :func:`probe` checks each name, signature
and construction site verishape relies on, so a torch that moved one of them is refused in
one line naming what is missing, never compiled silently with the stock ShapeEnv.

Why one module (and not a probe in one place and the patches elsewhere): the probe is
only as good as its list, and the list stays right only when the code that patches a name
and the check that the name is there sit side by side.

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
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .errors import VerishapeError

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


# ---------------------------------------------------------------------------- the names

SHAPE_ENV = "torch.fx.experimental.symbolic_shapes.ShapeEnv"
SOURCE = "torch._guards.Source"
OUTPUT_GRAPH_MODULE = "torch._dynamo.output_graph"
OUTPUT_GRAPH = OUTPUT_GRAPH_MODULE + ".OutputGraph"
#: Modules of ``torch.export`` that build a ShapeEnv from their module global ``ShapeEnv``.
EXPORT_SITES = ("torch._export.non_strict_utils", "torch.export._trace")
#: Modules that bound ``insert_deferred_runtime_asserts`` at import time (Dynamo's output
#: graph, export's final pass, ``run_decompositions``) and, first, its defining module.
ASSERT_PASS_MODULES = ("torch.fx.passes.runtime_assert", "torch._dynamo.output_graph", "torch._export.utils",
                       "torch.export.exported_program")
DEDUPE_SYMINTS = "torch._inductor.fx_passes.dedupe_symint_uses.dedupe_symints"
INDUCTOR_WRAPPER = "torch._TorchCompileInductorWrapper"
CACHE_ENTRIES = "torch._dynamo.eval_frame._debug_get_cache_entry_list"
COMPILATION_METRICS = "torch._dynamo.utils.get_compilation_metrics"
#: compiler/backend.py wraps it to carry the cache tag into the backward compile; it reads
#: ``bw_compiler`` by keyword, as Dynamo's AOT backends pass it.
AOT_MODULE_SIMPLIFIED = "torch._dynamo.backends.common.aot_module_simplified"
#: AOTAutograd's cache key function (module, name): a generic compile's widening record is
#: stored under the key its artifact is cached under (compiler/widen/record.py); wrapped
#: when widening first records a compile, optional (without it no record is kept)
AOT_CACHE_KEY = ("torch._functorch._aot_autograd.autograd_cache", "autograd_cache_key")
#: torch's switches for its AOTAutograd and FX-graph remote caches (a record follows them
#: into Redis); optional
REMOTE_CACHE_SWITCHES = ("torch._functorch._aot_autograd.autograd_cache.should_use_remote_autograd_cache",
                         "torch._inductor.utils.should_use_remote_fx_graph_cache")
#: torch's mega-cache (save_cache_artifacts / load_cache_artifacts): a record is an artifact
#: of its own type there; optional (without it records do not travel in saved artifacts)
CACHE_ARTIFACT_MANAGER = "torch.compiler._cache.CacheArtifactManager"
#: Read, not patched: backend lookup (compiler/backend.py, demo), the tracing and compile
#: contexts (locations.py, audit/capture.py), Dynamo's thread-local current translator
#: (the frame being traced: compiler/backend.py, and the inputs of a frame whose trace
#: stops on a data-dependent question, for the proved check of compiler/export/compile_dde.py).
DYNAMO_TLS = "torch._dynamo.symbolic_convert.tls"
READ_NAMES = ("torch._dynamo.backends.registry.lookup_backend", "torch._guards.TracingContext",
              "torch._guards.CompileContext", DYNAMO_TLS)
#: Wrapped while ``verishape verify-guards`` runs a script (verishape/audit/exports.py): every
#: export reaches it, so each is captured with the ShapeEnvs it builds.
EXPORT_ENTRY = "torch.export._trace._export"
#: The private vocabulary the layers read as data: the sympy functions and numbers of shape
#: expressions, symbol kinds, input sources, the assert ops, FX and AOT helpers widening
#: traces with, the recording decorator VeriShapeEnv's replays rely on, and the config flags
#: switched for a compile.  Probed like every name above, so a torch that renamed one is
#: refused in one line instead of failing deep inside a compile.
VOCABULARY = ("torch.utils._sympy.functions.FloorDiv", "torch.utils._sympy.functions.Mod",
              "torch.utils._sympy.numbers.int_oo", "torch.utils._sympy.numbers.IntInfinity",
              "torch.utils._sympy.numbers.NegativeIntInfinity", "torch.utils._sympy.printers.PythonPrinter",
              "torch.utils._sympy.symbol.SymT", "torch.utils._sympy.symbol.symbol_is_type",
              "torch.utils._pytree.tree_leaves", "torch.utils._pytree.SequenceKey",
              "torch._dynamo.source.TensorProperty", "torch._dynamo.source.TensorPropertySource",
              "torch._dynamo.exc.TorchDynamoException", "torch._ops.HigherOrderOperator", "torch._ops.OpOverload",
              "torch._ops.OpOverloadPacket", "torch._subclasses.fake_tensor.FakeTensorMode",
              "torch._subclasses.fake_tensor.unset_fake_temporarily",
              "torch._functorch._aot_autograd.schemas.SerializableAOTDispatchCompiler",
              "torch._functorch.aot_autograd.aot_module_simplified", "torch._functorch.config.enable_autograd_cache",
              "torch._dynamo.config.capture_scalar_outputs", "torch._dynamo.config.capture_dynamic_output_shape_ops",
              "torch.fx.experimental.recording.ShapeEnvEvent", "torch.fx.experimental.recording.record_shapeenv_event",
              "torch.export.dynamic_shapes._combine_args", "torch.export.dynamic_shapes._DimHint")

#: Every Inductor (and Triton-codegen) function that widening wraps while it lowers a generic
#: compile (compiler/widen/recompute.py), or recognises on the stack of a question
#: (compiler/widen/questions.py): the interception registry of issue 37, one row each.
#: A row's ``paths`` may name the same role under the names of several torch releases (2.11 reads
#: guarding hints through ``size_hint``/``size_hint_or_throw``/``symbolic_hint``; 2.13 through
#: ``guarding_hint_or_throw``/``replace_backed_symbols_with_hints``): every one that exists is
#: wrapped.  ``required``: without one of the row's names widening would be unsound (a hint
#: read or a range read it cannot see), so widening is refused on that torch, in one line
#: (:func:`widening_missing`); an optional row's absence only loses reuse (answers asked in
#: it are not tied to a recomputation: refused).  Probed when widening first lowers a
#: generic compile, not at ``import verishape``: probing imports Inductor (about 2 s), which
#: a user of ``verishape.export`` or ``verify-guards`` should not pay.
@dataclasses.dataclass(frozen=True)
class Interception:
    """One row of :data:`WIDENING_REGISTRY`."""

    module: str
    #: attribute paths in ``module`` (``Class.method``); at least one must exist
    paths: tuple[str, ...]
    #: "wrap": replaced while a generic compile is lowered; "frame": a function whose frame
    #: on a question's stack decides how its answer is read
    kind: str
    why: str
    required: bool = False

    def present(self, lookup: Callable[[str], Any]) -> list[str]:
        return [p for p in self.paths if lookup(f"{self.module}.{p}") is not _MISSING]


WIDENING_REGISTRY: tuple[Interception, ...] = (
    # layout computations recomputed at 1 (compiler/widen/recompute.py)
    Interception("torch._subclasses.fake_impls", ("_compute_stride",), "wrap", "a view's strides, recomputed at 1"),
    Interception("torch._inductor.kernel.conv", ("conv_layout",), "wrap", "a convolution's layout, recomputed at 1"),
    Interception("torch._inductor.ir", ("Layout.is_stride_ordered",), "wrap", "a stride-order check, recomputed at 1"),
    Interception("torch._inductor.ir", ("ExternKernel.process_kernel",), "wrap",
                 "an extern kernel's output layouts, recomputed at 1"),
    Interception("torch._prims_common", ("is_non_overlapping_and_dense_or_false",), "wrap",
                 "a dense-layout check, recomputed at 1"),
    # size hints: heuristics, or answers that must hold at 1
    Interception("torch._inductor.sizevars", ("SizeVarAllocator.optimization_hint",), "wrap",
                 "optimization hints (heuristics, counted)", required=True),
    Interception("torch._inductor.sizevars", ("SizeVarAllocator.guarding_hint_or_throw",
                                              "SizeVarAllocator.replace_backed_symbols_with_hints",
                                              "SizeVarAllocator.size_hint", "SizeVarAllocator.size_hint_or_throw",
                                              "SizeVarAllocator.symbolic_hint"), "wrap",
                 "guarding hints (answers at the hint, proved at 1)", required=True),
    # the sizes the generated code computes with, read after code generation
    Interception("torch._inductor.scheduler", ("Scheduler.codegen",), "wrap",
                 "the scheduled nodes' sizes, read after code generation", required=True),
    # questions read by how their caller uses the answer (compiler/widen/questions.py)
    Interception("torch._inductor.sizevars", ("statically_known_true", "SizeVarAllocator.statically_known_true"),
                 "frame", "a no-guard query: only a True answer acts"),
    Interception("torch._inductor.sizevars", ("SizeVarAllocator._simplify_with_ranges",), "frame",
                 "its statically_known: only a True answer acts"),
    Interception("torch._inductor.sizevars", ("SizeVarAllocator.guard_or_false", "SizeVarAllocator.guard_or_true"),
                 "frame", "backed-size-oblivious guard_or_*: the fallback acts where unknown"),
    Interception("torch.fx.experimental.symbolic_shapes", ("statically_known_true", "statically_known_false"),
                 "frame", "no-guard queries on SymBools"),
    Interception("torch._inductor.utils", ("expr_fits_within_32bit",), "frame",
                 "32-bit indexing: the hint read stands for index <= INT32_MAX"),
)
#: Inductor reads value ranges directly through ``bound_sympy`` (imported by name into its
#: modules; its ranges default to the tracing context's ShapeEnv): index bounds, int32
#: indexing, bounds checks of indirect loads, reduction heuristics.  Required: a range read
#: widening cannot widen would hold only for sizes >= 2.
RANGE_READER = ("torch.utils._sympy.value_ranges", "bound_sympy")
#: (module, path) of every "wrap" row's names, in registry order (what recompute wraps)
WIDENING_HOOKS = tuple((row.module, path) for row in WIDENING_REGISTRY if row.kind == "wrap" for path in row.paths)


def wrap(module_name: str, path: str, make: Callable[[Any], Any]) -> Callable[[], None] | None:
    """Replace ``module_name.path`` (a function, method, classmethod or staticmethod) by
    ``make(original)`` and return the undo, or None where the module or name is absent.
    ``original`` is torch's own function even when a wrapper is already installed (the
    ``_verishape_original`` attribute each wrapper carries), so wrappers never stack."""
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
    wrapped = make(getattr(fn, "_verishape_original", fn))
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


#: The graph Inductor is lowering (its ``sizevars`` hold the ShapeEnv), read after its
#: scheduler generated code (compiler/widen/questions.py); not probed at import, which would
#: import Inductor for every user: a torch without it fails that lowering loudly.
INDUCTOR_VIRTUALIZED = "torch._inductor.virtualized.V"

#: The arguments of ``ShapeEnv._maybe_evaluate_static`` whose meaning VeriShapeEnv honours.
REQUIRED_STATIC_PARAMS = frozenset({"expr", "unbacked_only", "compute_hint", "size_oblivious", "axioms", "var_to_range"})
#: ShapeEnv members VeriShapeEnv reads or overrides.
REQUIRED_MEMBERS = ("evaluate_expr", "guard_or_defer_runtime_assert", "produce_guards_verbose", "replace",
                    "_get_sloc", "_set_replacement", "check_equal", "_log_suppressed_dde")
#: ``OutputGraph.__init__`` arguments frames.py reads by name.
OUTPUT_GRAPH_PARAMS = ("code_options", "compiler_fn", "f_code", "local_scope", "global_scope")

_MISSING = object()


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
