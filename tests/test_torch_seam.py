"""The torch seam: the capability probe (issue 14, item 1) on fake internals, and on the
installed torch through the CLI (one line, exit 2, never a stock compile)."""

from __future__ import annotations

import functools
import subprocess
import sys
import types

import pytest
import torch

from verishape.core import torch_names, torch_seam
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
               "_set_replacement", "check_equal", "_log_suppressed_dde", "_update_var_to_range"]
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
        torch_names.SHAPE_ENV: shape_env,
        torch_names.SOURCE: source,
        torch_names.OUTPUT_GRAPH: output_graph,
        torch_names.OUTPUT_GRAPH_MODULE + ".ShapeEnv": shape_env,
        torch_names.DEDUPE_SYMINTS: lambda graph: None,
        torch_names.INDUCTOR_WRAPPER: type("Wrapper", (), {}),
        torch_names.CACHE_ENTRIES: lambda code: [],
        torch_names.COMPILATION_METRICS: list,
        torch_names.AOT_MODULE_SIMPLIFIED: lambda mod, args, fw_compiler, bw_compiler=None: None,
    }
    table.update({name: object() for name in (*torch_names.READ_NAMES, torch_names.EXPORT_ENTRY, *torch_names.VOCABULARY)})
    table.update({site + ".ShapeEnv": shape_env for site in torch_names.EXPORT_SITES})
    table.update({m + ".insert_deferred_runtime_asserts": lambda *a: None for m in torch_names.ASSERT_PASS_MODULES})
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
    (fake_torch(fake_shape_env(drop=("_update_var_to_range",))), "ShapeEnv._update_var_to_range"),
    (fake_torch(fake_shape_env(lru=False)), "ShapeEnv._maybe_evaluate_static.cache_clear (the _lru_cache wrapper)"),
    (fake_torch(fake_shape_env(counter=False)), "ShapeEnv._version_counter"),
    (fake_torch(fake_shape_env("expr, *, unbacked_only=False, compute_hint=False, axioms=None, var_to_range=None")),
     "ShapeEnv._maybe_evaluate_static(size_oblivious=...)"),
    (fake_torch(output_graph=FakeOutputGraphMoved), "the ShapeEnv(...) call in OutputGraph.__init__"),
    (fake_torch(output_graph=type("OG", (), {"__init__": lambda self, code_options, compiler_fn, f_code: None})),
     "OutputGraph.__init__(local_scope=...)"),
    (fake_torch(drop=(torch_names.OUTPUT_GRAPH_MODULE + ".ShapeEnv",)), "torch._dynamo.output_graph.ShapeEnv"),
    (fake_torch(drop=("torch._export.utils.insert_deferred_runtime_asserts",)),
     "torch._export.utils.insert_deferred_runtime_asserts"),
    (fake_torch(drop=(torch_names.DEDUPE_SYMINTS,)), "dedupe_symints"),
    (fake_torch(drop=(torch_names.INDUCTOR_WRAPPER,)), "torch._TorchCompileInductorWrapper"),
    (fake_torch(drop=(torch_names.CACHE_ENTRIES,)), "_debug_get_cache_entry_list"),
    (fake_torch(drop=(torch_names.AOT_MODULE_SIMPLIFIED,)), "aot_module_simplified(bw_compiler=...)"),
    (fake_torch(drop=("torch._guards.TracingContext",)), "torch._guards.TracingContext"),
    (fake_torch(drop=(torch_names.EXPORT_ENTRY,)), "torch.export._trace._export"),
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
    monkeypatch.setitem(sys.modules, torch_names.OUTPUT_GRAPH_MODULE, module)
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


# ---------------------------------------------------------------- private names, all declared

_PACKAGE_FOLDERS = ("verishape", "compiler", "solvers", "proofs")


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split(".")[1:])


def _torch_names_read(path) -> set[str]:
    """The dotted torch names a module reads: ``import``/``from ... import`` of torch
    modules, attribute chains on ``torch`` or on a name bound by such an import, and
    ``(module, name)`` string pairs naming a torch function (what ``wrap_once`` takes)."""
    import ast

    tree = ast.parse(path.read_text())
    alias = {"torch": "torch"}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch":
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
                names.add(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "torch":
                    alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else "torch"
                    names.add(a.name)
        elif (isinstance(node, ast.Tuple) and len(node.elts) == 2
              and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
              and node.elts[0].value.startswith("torch.")):
            names.add(f"{node.elts[0].value}.{node.elts[1].value}")
    def dotted(node):
        parts, base = [], node
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        return ".".join([alias[base.id], *reversed(parts)]) if isinstance(base, ast.Name) and base.id in alias else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (name := dotted(node)):
            names.add(name)
            if name.endswith(".patch"):  # a config's patch(flag=...): the flags are read too
                call = next((c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.func is node), None)
                names.update(f"{name[:-len('.patch')]}.{k.arg}" for k in getattr(call, "keywords", ()) if k.arg)
    return names


def _private_names_outside_the_seam(private_only: bool = True) -> dict[str, set[str]]:
    from pathlib import Path

    root = Path(torch_seam.__file__).resolve().parents[2]
    used: dict[str, set[str]] = {}
    # the package's folders, and the modules installed beside it (the plug-in and the leaf
    # that says where widening records live: verishape_records reads torch's cache folder)
    paths = [p for folder in _PACKAGE_FOLDERS for p in sorted((root / folder).rglob("*.py"))]
    paths += [root / "verishape_autoload.py", root / "verishape_records.py"]
    for path in paths:
        if path.name in ("torch_seam.py", "torch_names.py"):
            continue
        for name in _torch_names_read(path):
            if _is_private(name) or not private_only:
                used.setdefault(name, set()).add(str(path.relative_to(root)))
    # a chain's prefixes are reads of the same thing (torch._guards.CompileContext.current_compile_id
    # reads torch._guards.CompileContext): keep the longest
    return {n: f for n, f in used.items() if not any(m.startswith(n + ".") for m in used)}


def _covered(name: str, declared: frozenset[str]) -> bool:
    """Declared itself, or a member of a declared object that is not a module (an enum's
    value, a class's method, an attribute of ``V``): the probe resolved its owner."""
    if name in declared:
        return True
    parts = name.split(".")
    for cut in range(len(parts) - 1, 1, -1):
        owner = ".".join(parts[:cut])
        if owner in declared:
            return not isinstance(torch_seam.resolve(owner), types.ModuleType)
    return False


def test_every_private_torch_name_outside_the_seam_is_declared_there_and_probed():
    declared = torch_names.declared_names()
    used = _private_names_outside_the_seam()
    undeclared = sorted(f"{n} ({', '.join(sorted(f))})" for n, f in used.items() if not _covered(n, declared))
    assert not undeclared, f"declare these in verishape/core/torch_seam.py: {undeclared}"
    # counted, so a change that reads one more (or one fewer) shows in review: update the
    # number with the declaration
    # (116: a candidate at 1 restarts its trace, compiler/widen/candidate.py; 117: a binding
    # reads a constant storage offset of the new trace, compiler/widen/reuse.py; the plug-in's
    # and the records' leaf's reads are counted too: torch's mega-cache classes; 122: generic
    # recompiles give an int argument a symbol, reading Dynamo's specialize_int)
    assert len(used) == 122, f"{len(used)} private torch names read outside the seam (was 122)"
    # every declared name exists on this torch (the probes would refuse it otherwise), but
    # the registry's alternatives (one role under several releases' names) and optional Triton
    alternatives = {f"{row.module}.{p}" for row in torch_names.WIDENING_REGISTRY if len(row.paths) > 1 for p in row.paths}
    spec_configs = {".".join(pair) for pair in torch_names.SHAPES_SPEC_CONFIGS}
    guard_free = {".".join(torch_names.GUARD_FREE_MODE)}  # (a config 2.11 does not have: off there)
    absent = [n for n in declared - alternatives - spec_configs - guard_free - set(torch_names.TRITON_CPU_VOCABULARY)
              if torch_seam.resolve(n) is torch_names._MISSING]
    assert absent == []
    # the spec's config is there under one release's name wherever torch.compile takes a spec
    if torch_seam.spec_keyword() is not None:
        assert any(torch_seam.resolve(n) is not torch_names._MISSING for n in spec_configs), spec_configs


def test_the_spec_keyword_is_the_one_this_torch_compile_takes():
    """torch 2.14 renamed ``torch.compile``'s ``shapes_spec`` to ``dynamic_shapes`` (and the config
    it sets, ``_shapes_spec`` to ``_dynamic_shapes_spec``): the seam names the one this torch takes,
    under ``verishape.enable()`` too (its wrapper of ``torch.compile`` is read through)."""
    import inspect

    import verishape

    params = inspect.signature(torch.compile).parameters
    want = next((k for k in torch_names.SPEC_KEYWORDS if k in params), None)
    assert torch_seam.spec_keyword() == want
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 14):
        assert want == "dynamic_shapes"
    with verishape.enable():
        assert torch_seam.spec_keyword() == want


def test_no_vocabulary_entry_is_stale():
    used = _private_names_outside_the_seam(private_only=False)
    reads = set(used) | {p for n in used for p in (".".join(n.split(".")[:c]) for c in range(2, n.count(".") + 1))}
    listed = (*torch_names.VOCABULARY, *torch_names.LOWERING_VOCABULARY, *torch_names.FUZZ_VOCABULARY,
              torch_names.OP_DB, *torch_names.TRITON_CPU_VOCABULARY)
    seam_only = {"torch._subclasses.fake_tensor.unset_fake_temporarily"}  # read by the seam's own helpers
    stale = sorted(n for n in listed if n not in reads and n not in seam_only)
    assert not stale, f"listed in the seam's vocabularies but read by no module: {stale}"


def test_names_probed_on_first_use_are_refused_in_one_line():
    with pytest.raises(UnsupportedTorch, match=r"^fuzzing things cannot run on torch \S+: missing torch\._no_such\.name$"):
        torch_seam.require_names(("torch._no_such.name",), "fuzzing things")
    torch_seam.require_names(torch_names.FUZZ_VOCABULARY, "fuzzing")  # present here
    missing = torch_seam.widening_missing({n: object() for n in torch_names.declared_names()
                                           if n not in torch_names.LOWERING_VOCABULARY[:1]})
    assert torch_names.LOWERING_VOCABULARY[0] in missing
