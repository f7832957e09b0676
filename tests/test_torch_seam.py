"""The torch seam: the capability probe (issue 14, item 1) on fake internals, and on the
installed torch through the CLI (one line, exit 2, never a stock compile)."""

from __future__ import annotations

import functools
import subprocess
import sys
import types

import pytest

from verishape.core import torch_seam
from verishape.core.torch_seam import UnsupportedTorch, probe, require

FULL_STATIC = "expr, *, unbacked_only=False, compute_hint=False, size_oblivious=False, axioms=None, var_to_range=None"


class FakeSource:
    @property
    def name(self):
        return "L['x']"


class FakeOldSource:
    def name(self):
        return "L['x']"


def _lru_cached(fn):
    wrapped = functools.wraps(fn)(lambda *a, **k: fn(*a, **k))
    wrapped.cache_clear = lambda: None
    wrapped.cache_info = lambda: None
    return wrapped


def fake_shape_env(static_params: str = FULL_STATIC, drop: tuple[str, ...] = (), lru: bool = True,
                   counter: bool = True) -> type:
    """A ShapeEnv-like class with exactly the given internals (``_version_counter`` is
    used by its code or not, as asked)."""
    members = ["evaluate_expr", "guard_or_defer_runtime_assert", "produce_guards_verbose", "replace", "_get_sloc",
               "_set_replacement", "check_equal", "_log_suppressed_dde"]
    init = "self._version_counter = 0" if counter else "self.other = 0"
    lines = ["class FakeShapeEnv:", "    def __init__(self):", f"        {init}",
             f"    def _maybe_evaluate_static(self, {static_params}): pass"]
    lines += [f"    def {m}(self): pass" for m in members if m not in drop]
    ns: dict = {}
    code = "\n".join(lines) + "\n"
    exec(code, ns)
    cls = ns["FakeShapeEnv"]
    if lru:
        cls._maybe_evaluate_static = _lru_cached(cls._maybe_evaluate_static)
    return cls


class FakeOutputGraph:
    def __init__(self, code_options, compiler_fn, root_tx, export, export_constraints, frame_state, local_scope,
                 global_scope, f_code, torch_function_mode_stack, package):
        self.shape_env = ShapeEnv()  # noqa: F821 - resolved in the fake module; the probe reads the text


class FakeOutputGraphMoved:
    def __init__(self, code_options, compiler_fn, f_code, local_scope, global_scope):
        self.shape_env = make_env()  # noqa: F821 - built somewhere the global hook never sees


def fake_torch(shape_env: type | None = None, source: type = FakeSource, output_graph: type = FakeOutputGraph,
               drop: tuple[str, ...] = ()) -> dict:
    shape_env = shape_env or fake_shape_env()
    table = {
        torch_seam.SHAPE_ENV: shape_env,
        torch_seam.SOURCE: source,
        torch_seam.OUTPUT_GRAPH: output_graph,
        torch_seam.OUTPUT_GRAPH_MODULE + ".ShapeEnv": shape_env,
        torch_seam.DEDUPE_SYMINTS: lambda graph: None,
        torch_seam.INDUCTOR_WRAPPER: type("Wrapper", (), {}),
        torch_seam.CACHE_ENTRIES: lambda code: [],
        torch_seam.COMPILATION_METRICS: list,
        torch_seam.AOT_MODULE_SIMPLIFIED: lambda mod, args, fw_compiler, bw_compiler=None: None,
    }
    table.update({name: object() for name in (*torch_seam.READ_NAMES, torch_seam.EXPORT_ENTRY, *torch_seam.VOCABULARY)})
    table.update({site + ".ShapeEnv": shape_env for site in torch_seam.EXPORT_SITES})
    table.update({m + ".insert_deferred_runtime_asserts": lambda *a: None for m in torch_seam.ASSERT_PASS_MODULES})
    for name in drop:
        del table[name]
    return table


def test_complete_fake_torch_passes_on_any_version_from_2_11():
    for version in ("2.11.0", "2.13.0", "2.14.1", "2.15.0"):
        features, missing = probe(fake_torch(), version)
        assert missing == [] and features.export_sites_missing is None and features.torch_version >= (2, 11)


@pytest.mark.parametrize("table, needle", [
    (fake_torch(fake_shape_env(drop=("_set_replacement",))), "ShapeEnv._set_replacement"),
    (fake_torch(fake_shape_env(drop=("check_equal",))), "ShapeEnv.check_equal"),
    (fake_torch(fake_shape_env(drop=("_log_suppressed_dde",))), "ShapeEnv._log_suppressed_dde"),
    (fake_torch(fake_shape_env(lru=False)), "ShapeEnv._maybe_evaluate_static.cache_clear (the _lru_cache wrapper)"),
    (fake_torch(fake_shape_env(counter=False)), "ShapeEnv._version_counter"),
    (fake_torch(fake_shape_env("expr, *, unbacked_only=False, compute_hint=False, axioms=None, var_to_range=None")),
     "ShapeEnv._maybe_evaluate_static(size_oblivious=...)"),
    (fake_torch(output_graph=FakeOutputGraphMoved), "the ShapeEnv(...) call in OutputGraph.__init__"),
    (fake_torch(output_graph=type("OG", (), {"__init__": lambda self, code_options, compiler_fn, f_code: None})),
     "OutputGraph.__init__(local_scope=...)"),
    (fake_torch(drop=(torch_seam.OUTPUT_GRAPH_MODULE + ".ShapeEnv",)), "torch._dynamo.output_graph.ShapeEnv"),
    (fake_torch(drop=("torch._export.utils.insert_deferred_runtime_asserts",)),
     "torch._export.utils.insert_deferred_runtime_asserts"),
    (fake_torch(drop=(torch_seam.DEDUPE_SYMINTS,)), "dedupe_symints"),
    (fake_torch(drop=(torch_seam.INDUCTOR_WRAPPER,)), "torch._TorchCompileInductorWrapper"),
    (fake_torch(drop=(torch_seam.CACHE_ENTRIES,)), "_debug_get_cache_entry_list"),
    (fake_torch(drop=(torch_seam.AOT_MODULE_SIMPLIFIED,)), "aot_module_simplified(bw_compiler=...)"),
    (fake_torch(drop=("torch._guards.TracingContext",)), "torch._guards.TracingContext"),
    (fake_torch(drop=(torch_seam.EXPORT_ENTRY,)), "torch.export._trace._export"),
    (fake_torch(drop=("torch.utils._sympy.functions.FloorDiv",)), "torch.utils._sympy.functions.FloorDiv"),
])
def test_a_missing_internal_is_one_line_naming_it_and_the_version(table, needle):
    with pytest.raises(UnsupportedTorch) as info:
        require(table, "2.15.0")
    text = str(info.value)
    assert needle in text and "torch 2.15.0" in text and "\n" not in text


def test_export_sites_are_an_optional_feature():
    """torch.compile does not need export's sites: a torch without them still compiles, and
    the feature says why ``verishape.export`` will refuse."""
    features, missing = probe(fake_torch(drop=("torch.export._trace.ShapeEnv",)), "2.15.0")
    assert missing == [] and features.export_sites_missing == "torch.export._trace.ShapeEnv"


def test_output_graph_hook_binds_arguments_by_name(monkeypatch):
    """frames.py reads compiler_fn/f_code by name: positional or keyword calls alike."""
    seen = []
    module = types.ModuleType("fake_output_graph")

    class OG:
        def __init__(self, code_options, compiler_fn, f_code=None):
            self.built = (code_options, compiler_fn, f_code)

    module.OutputGraph = OG
    monkeypatch.setitem(sys.modules, torch_seam.OUTPUT_GRAPH_MODULE, module)
    torch_seam.hook_output_graph_init(lambda graph, arguments, run: (seen.append(arguments), run()))
    a = OG({}, "fn", f_code="code")
    b = OG(code_options={}, f_code="code", compiler_fn="fn")
    assert a.built == b.built == ({}, "fn", "code")
    assert seen == [{"code_options": {}, "compiler_fn": "fn", "f_code": "code"}] * 2


_BREAK_AND_RUN = ("import sys\nfrom torch.fx.experimental.symbolic_shapes import ShapeEnv\n"
                  "del ShapeEnv._set_replacement\n"
                  "from verishape.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")


@pytest.mark.parametrize("args", [["demo"], ["verify-guards", "tests/scripts/clean.py"]])
def test_cli_refuses_a_torch_missing_an_internal_in_one_line(args):
    out = subprocess.run([sys.executable, "-c", _BREAK_AND_RUN, *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "decision" not in out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("verishape: error:")]
    assert len(errors) == 1 and "ShapeEnv._set_replacement" in errors[0] and "torch 2." in errors[0], out.stderr


def test_version_needs_no_torch_internals():
    code = ("import sys\nsys.modules['torch'] = None\nfrom verishape.cli.main import main\nsys.exit(main(['--version']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("verishape "), out.stderr
