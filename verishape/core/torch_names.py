"""Every private torch name verishape reads or patches, listed once.

:mod:`verishape.core.torch_seam` probes them (at import, or on first use for the groups
that would import Inductor's lowering or PyTorch's test database) and patches the few it
replaces; ``tests/test_torch_seam.py`` reads every module of the package and fails on a
private torch name that is not declared here, and on a vocabulary entry nothing reads.
Data only: nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

#: what a lookup returns for a name this torch lacks
_MISSING = object()


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
#: the mega-cache's artifact base class and type registry: the widening record's type is
#: registered at ``import torch`` by verishape's plug-in (verishape_records.py, outside the
#: package: it imports nothing of verishape, so it reads them by import, ImportError meaning absent)
CACHE_ARTIFACT_TYPES = ("torch.compiler._cache.CacheArtifact", "torch.compiler._cache.CacheArtifactFactory")
#: Wrapped on first use, optional (without it the feature behaves as stock, with a warning):
#: Dynamo's automatic-dynamic choice per input size, where generic recompiles give shared
#: sizes a symbol (compiler/widen/generic_recompile.py), and its wrapping of an int argument,
#: where they give such an int a symbol too; the count of a frame's cache entries the
#: recompile limit reads, where proved reuses are counted apart (compiler/widen/limit.py).
AUTOMATIC_DYNAMIC = ("torch._dynamo.variables.builder", "_automatic_dynamic")
WRAP_INT = ("torch._dynamo.variables.builder", "VariableBuilder.wrap_symint")
CACHE_SIZE_COUNTER = ("torch._dynamo.convert_frame", "compute_cache_size")
#: one trace of a frame by Dynamo (the root translator's run; inlined calls run it too): a
#: candidate attempt always ends in a restart (compiler/widen/candidate.py)
TRACE_ATTEMPT = ("torch._dynamo.symbolic_convert", "InstructionTranslatorBase.run")
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
              "torch._dynamo.exc.TorchDynamoException", "torch._dynamo.exc.RestartAnalysis",
              "torch._dynamo.exc.TensorifyScalarRestartAnalysis", "torch._ops.HigherOrderOperator", "torch._ops.OpOverload",
              "torch._ops.OpOverloadPacket", "torch._subclasses.fake_tensor.FakeTensorMode",
              "torch._subclasses.fake_tensor.unset_fake_temporarily",
              "torch._functorch._aot_autograd.schemas.SerializableAOTDispatchCompiler",
              "torch._functorch.aot_autograd.aot_module_simplified", "torch._functorch.config.enable_autograd_cache",
              "torch._dynamo.config.capture_scalar_outputs", "torch._dynamo.config.capture_dynamic_output_shape_ops",
              "torch.fx.experimental.recording.ShapeEnvEvent", "torch.fx.experimental.recording.record_shapeenv_event",
              "torch.export.dynamic_shapes._combine_args", "torch.export.dynamic_shapes._DimHint",
              # shape expressions: the rest of torch's sympy functions the translation and the
              # printers name, and the range type
              *(f"torch.utils._sympy.functions.{f}" for f in (
                  "BitwiseFn_bitwise_and", "BitwiseFn_bitwise_or", "BitwiseFn_bitwise_xor", "CeilToInt", "CleanDiv",
                  "FloatPow", "FloatTrueDiv", "FloorToInt", "Identity", "IntTrueDiv", "LShift", "Max", "Min",
                  "ModularIndexing", "PowByNatural", "PythonMod", "RShift", "RoundDecimal", "RoundToInt", "ToFloat",
                  "TruncToFloat", "TruncToInt", "Where")),
              "torch.utils._sympy.value_ranges.ValueRanges",
              "torch.fx.experimental.symbolic_shapes.ShapeEnv._maybe_evaluate_static",
              # pytrees of inputs and outputs (export's declared shapes, records of arguments)
              *(f"torch.utils._pytree.{f}" for f in (
                  "tree_flatten", "tree_flatten_with_path", "tree_map", "tree_map_with_path", "tree_unflatten",
                  "treespec_dumps", "treespec_loads")),
              # Dynamo: sources, the compile and tracing contexts, counters, the policy flags
              # generic recompiles and the limit read, its reset
              "torch._dynamo.source.LocalSource", "torch._dynamo.source.ConstantSource", "torch._dynamo.utils.counters",
              "torch._dynamo.config.assume_static_by_default", "torch._dynamo.config.automatic_dynamic_shapes",
              "torch._dynamo.config.specialize_int",
              "torch._dynamo.config.recompile_limit", "torch._dynamo.reset", "torch._guards.detect_fake_mode",
              "torch._guards.tracing", "torch._subclasses.FakeTensor", "torch._subclasses.fake_tensor.FakeTensor",
              "torch._functorch.config.patch", "torch._inductor.config.patch", "torch._inductor.config.fx_graph_cache",
              # what a size-1 AOT comparison's verdict is filed under (compiler/widen/verdict.py)
              "torch._functorch.config.save_config_portable", "torch._inductor.config.save_config_portable",
              "torch._inductor.runtime.cache_dir_utils.cache_dir",
              # the assert ops the graph checks look for, and torch._check (documented, underscored)
              "torch.ops.aten._assert_scalar.default", "torch.ops.aten._assert_async.msg", "torch._check")
#: Inductor's IR and scheduler classes widening reads while it lowers a generic compile
#: (compiler/widen/lowered_sizes.py, recompute.py): probed with :data:`WIDENING_REGISTRY`
#: (:func:`widening_missing`), not at import, which would import Inductor's lowering.
LOWERING_VOCABULARY = ("torch._inductor.ir.FixedLayout", "torch._inductor.ir.FlexibleLayout.contiguous_strides",
                       "torch._inductor.ir.IRNode", "torch._inductor.ir.is_storage_and_layout",
                       "torch._inductor.scheduler.ExternKernelSchedulerNode",
                       "torch._inductor.scheduler.NopKernelSchedulerNode", "torch._inductor.scheduler.SchedulerNode",
                       "torch._inductor.sizevars.SizeVarAllocator")
#: What fuzzing meta functions reads (verishape/fuzz/): the meta and decomposition tables,
#: the dispatcher modes it traces under, the fake implementations; probed when
#: ``verishape.fuzz`` traces its first op (:func:`require_names`).
FUZZ_VOCABULARY = ("torch._decomp.decomposition_table", "torch._decomp.meta_table", "torch._meta_registrations",
                   "torch._dispatch.python.enable_python_dispatcher", "torch.utils._python_dispatch.TorchDispatchMode",
                   "torch._subclasses.fake_impls.op_implementations_dict", "torch._C.TensorBase",
                   "torch._inductor.config.cpu_backend", "torch._inductor.config.compile_threads")
#: PyTorch's OpInfo database (imports for seconds): probed where fuzzing first loads it.
OP_DB = "torch.testing._internal.common_methods_invocations.op_db"
#: Triton's code generation run on the CPU by the fuzzer's Triton check: optional (without
#: Triton that check is skipped with its reason, verishape/fuzz/triton_cpu.py).
TRITON_CPU_VOCABULARY = ("torch._inductor.runtime.triton_helpers.libdevice",
                         "torch._inductor.runtime.triton_helpers.max2", "torch.utils._triton.triton_hash_with_backend")

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
    Interception("torch", ("_debug_has_internal_overlap",), "wrap",
                 "copy_'s internal-overlap check (2.15's reinplacing pass), recomputed at 1"),
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
#: torch's dense-layout check on sizes and strides (not a tensor): a recorded dense check whose
#: sizes stay symbolic at a widened point runs again over their ranges (compiler/widen/recompute.py);
#: optional (without it such a check is not recomputed: refused)
DENSE_CHECK_ON_SIZES = ("torch._prims_common", "_is_non_overlapping_and_dense_or_false")
#: torch's internal-overlap check of one tensor (``copy_``'s meta function raises on "yes"),
#: wrapped while a generic compile is lowered and rerun at 1 (compiler/widen/recompute.py)
OVERLAP_CHECK = ("torch", "_debug_has_internal_overlap")
#: Inductor reads value ranges directly through ``bound_sympy`` (imported by name into its
#: modules; its ranges default to the tracing context's ShapeEnv): index bounds, int32
#: indexing, bounds checks of indirect loads, reduction heuristics.  Required: a range read
#: widening cannot widen would hold only for sizes >= 2.
RANGE_READER = ("torch.utils._sympy.value_ranges", "bound_sympy")
#: ShapeEnv's memos of results made from static answers (an ``lru_cache`` on each method, 2.11 to 2.15):
#: ``evaluate_expr``'s answers, and ``simplify``'s (``Max(1, b)`` is ``b`` where ``b >= 1`` is static).  One made
#: before a lowering's question log was installed comes back unseen, so the log clears them first
#: (compiler/widen/questions.py; a torch without them keeps nothing for size 1)
ANSWER_MEMOS = ("torch.fx.experimental.symbolic_shapes.ShapeEnv._inner_evaluate_expr",
                "torch.fx.experimental.symbolic_shapes.ShapeEnv.simplify")
#: the ShapeEnv's own cache of fake-tensor results on symbolic inputs (``FakeTensorMode``'s dispatch cache keeps such
#: a result on the env: a meta function's answers come back with it unasked), cleared with the memos above
FAKE_TENSOR_CACHE = "fake_tensor_cache"
#: torch's aggressive guard-free semantics (2.15's config; absent from 2.11), off (0) by default: on, ``evaluate_expr``
#: answers a comparison from the ranges alone before the static evaluation widening observes, so a compile under it
#: keeps nothing for size 1 (compiler/widen/kept.py)
GUARD_FREE_MODE = ("torch.fx.experimental._config", "aggressive_guard_free_semantics")
#: (module, path) of every "wrap" row's names, in registry order (what recompute wraps)
WIDENING_HOOKS = tuple((row.module, path) for row in WIDENING_REGISTRY if row.kind == "wrap" for path in row.paths)

#: The graph Inductor is lowering (its ``sizevars`` hold the ShapeEnv), read after its
#: scheduler generated code (compiler/widen/questions.py); not probed at import, which would
#: import Inductor for every user: a torch without it fails that lowering loudly.
INDUCTOR_VIRTUALIZED = "torch._inductor.virtualized.V"
#: Dynamo's guard builder: a ``guard_filter_fn`` is called inside its ``__init__``, whose
#: arguments ``f_code`` and ``output_graph`` say which frame's guards are filtered
#: (``torch_seam.guard_build_site``, read by ``compiler/guard_filter.py``); probed on first use
GUARD_BUILDER = "torch._dynamo.guards.CheckFunctionManager"
GUARD_BUILDER_PARAMS = ("f_code", "output_graph")
#: ``torch.compile``'s keyword for a shapes spec (:mod:`torch.fx.experimental.dynamic_spec`):
#: ``shapes_spec`` in torch 2.13, renamed ``dynamic_shapes`` in 2.14 (public names, read off
#: ``torch.compile``'s signature by ``torch_seam.spec_keyword``); none before 2.13
SPEC_KEYWORDS = ("shapes_spec", "dynamic_shapes")
#: the config that keyword sets while its frames compile, under each release's name (2.13's
#: ``_shapes_spec``, 2.14's ``_dynamic_shapes_spec``; one role, either may be missing): the
#: audit reads it as a frame's declared space (``compiler/declared.of_torch_compile``)
SHAPES_SPEC_CONFIGS = (("torch._dynamo.config", "_shapes_spec"), ("torch._dynamo.config", "_dynamic_shapes_spec"))


def declared_names() -> frozenset[str]:
    """Every private torch name declared above, dotted.  ``tests/test_torch_seam.py`` reads
    every module of the package and fails on a private torch name it uses that is not here
    (and on a vocabulary entry no module uses), so the probes stay the list of what is read."""
    joined = lambda pairs: (".".join(p) for p in pairs)  # noqa: E731
    return frozenset((
        SHAPE_ENV, SOURCE, OUTPUT_GRAPH_MODULE, OUTPUT_GRAPH, *EXPORT_SITES, *ASSERT_PASS_MODULES,
        *(f"{m}.insert_deferred_runtime_asserts" for m in ASSERT_PASS_MODULES), DEDUPE_SYMINTS, INDUCTOR_WRAPPER,
        CACHE_ENTRIES, COMPILATION_METRICS, AOT_MODULE_SIMPLIFIED, ".".join(AOT_CACHE_KEY), *REMOTE_CACHE_SWITCHES,
        CACHE_ARTIFACT_MANAGER, *CACHE_ARTIFACT_TYPES, ".".join(AUTOMATIC_DYNAMIC), ".".join(WRAP_INT), ".".join(CACHE_SIZE_COUNTER), ".".join(TRACE_ATTEMPT),
        DYNAMO_TLS, *READ_NAMES,
        EXPORT_ENTRY, *VOCABULARY, *LOWERING_VOCABULARY, *FUZZ_VOCABULARY, OP_DB, *TRITON_CPU_VOCABULARY,
        *joined((row.module, path) for row in WIDENING_REGISTRY for path in row.paths), ".".join(RANGE_READER),
        ".".join(DENSE_CHECK_ON_SIZES), ".".join(GUARD_FREE_MODE), *ANSWER_MEMOS,
        INDUCTOR_VIRTUALIZED, GUARD_BUILDER, *joined(SHAPES_SPEC_CONFIGS),
    ))

#: The arguments of ``ShapeEnv._maybe_evaluate_static`` whose meaning VeriShapeEnv honours.
REQUIRED_STATIC_PARAMS = frozenset({"expr", "unbacked_only", "compute_hint", "size_oblivious", "axioms", "var_to_range"})
#: ShapeEnv members VeriShapeEnv reads or overrides.
REQUIRED_MEMBERS = ("evaluate_expr", "guard_or_defer_runtime_assert", "produce_guards_verbose", "replace",
                    "_get_sloc", "_set_replacement", "check_equal", "_log_suppressed_dde", "_update_var_to_range")
#: ``OutputGraph.__init__`` arguments frames.py reads by name.
OUTPUT_GRAPH_PARAMS = ("code_options", "compiler_fn", "f_code", "local_scope", "global_scope")


__all__ = sorted([name for name in dir() if name.isupper()] + ["Interception", "declared_names"])
