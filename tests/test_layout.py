"""The package layout: everything installs under ``verishape``, imports go one way, and no
module takes part in an import cycle.

The import graph is read from the source (``ast``), not from ``sys.modules``: a lazy import
inside a function is still a dependency, and a cycle through one is still a cycle.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: repository folder -> the package it installs as (pyproject's package-dir)
FOLDERS = {"verishape": "verishape", "solvers": "verishape.solvers", "compiler": "verishape.compiler",
           "proofs": "verishape.proofs"}

#: The layers, lowest first, each one folder of the ``verishape`` package: a module may import
#: its own layer and the layers below it.  Whatever else ``verishape`` holds (the public API
#: in ``verishape/*.py``, ``cli/``, ``audit/``, ``fuzz/``) is a front door, on top.
LAYERS = ("proofs", "solvers", "core", "compiler")
#: Leaves any layer may read: the version string, and where widening records live (a
#: top-level module the plug-in reads too, importing nothing of verishape).
LEAVES = {"verishape._version", "verishape_records"}
#: Top-level modules installed beside the package (pyproject's py-modules): the plug-in that
#: torch runs at import is a front door; ``verishape_records`` is a leaf.
TOP_LEVEL = ("verishape_autoload", "verishape_records")


def layer(module: str) -> tuple[int, str]:
    """A module's layer is the folder it lives in (``verishape.<folder>...``); the leaves
    are below every layer."""
    if module in LEAVES:
        return -1, "leaf"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1]), parts[1]
    return len(LAYERS), "front doors"


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            mods[".".join([package, *parts])] = path
    for name in TOP_LEVEL:
        mods[name] = ROOT / f"{name}.py"
    return mods


def _imports(module: str, source: bytes, is_pkg: bool, known: dict[str, Path]) -> set[str]:
    """Project modules ``module`` (a package's ``__init__`` when ``is_pkg``) imports,
    each resolved to the nearest module we have."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                pkg = ".".join(base + ([node.module] if node.module else []))
            else:
                pkg = node.module or ""
            targets = [f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in known else pkg for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != module:
                found.add(t)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: _imports(m, p.read_bytes(), p.name == "__init__.py", known) for m, p in known.items()}


def test_no_source_imports_a_top_level_solvers_compiler_or_proofs():
    offenders = []
    for folder in ("verishape", "solvers", "compiler", "proofs", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            try:
                tree = ast.parse(path.read_bytes())
            except SyntaxError:
                continue  # a test script that is broken on purpose (bad-input tests)
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                              if n.split(".")[0] in ("solvers", "compiler", "proofs")]
    assert offenders == []


def test_every_folder_is_a_layer_or_a_front_door():
    """The tree says the layer: the core's modules live in ``verishape/core/``, each front
    door in a folder of its own, and ``verishape/`` itself holds only the public API."""
    top = sorted(p.name for p in (ROOT / "verishape").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "_version.py", "explanation.py", "testing.py"]
    folders = sorted(p.name for p in (ROOT / "verishape").iterdir() if (p / "__init__.py").exists())
    assert folders == ["audit", "cli", "core", "fuzz"]
    assert set(FOLDERS.values()) == {"verishape", *(f"verishape.{name}" for name in LAYERS if name != "core")}


def test_no_module_over_600_lines_and_no_function_over_80():
    """Sizes a reader can hold: a longer module or function is split where it has two jobs."""
    too_long = []
    for path in _modules().values():
        source = path.read_text()
        if source.count("\n") > 600:
            too_long.append(f"{path.relative_to(ROOT)}: {source.count(chr(10))} lines")
        too_long += [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
                     for node in ast.walk(ast.parse(source))
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and node.end_lineno - node.lineno + 1 > 80]
    assert too_long == []


def test_no_widening_function_over_50_lines():
    """Widening is where five ways of serving a call met (issue 48): its functions stay short
    enough to see each decision in one screen."""
    long = [f"{path.name}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
            for path in sorted((ROOT / "compiler" / "widen").glob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 50]
    assert long == []


def test_imports_go_down_the_layers(graph):
    upward = sorted(f"{a} ({layer(a)[1]}) imports {b} ({layer(b)[1]})"
                    for a, targets in graph.items() for b in targets
                    if b not in LEAVES and layer(b)[0] > layer(a)[0])
    assert upward == []


def test_no_module_is_part_of_an_import_cycle(graph):
    # Tarjan's strongly connected components, iteratively (no recursion limit to worry about).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert cycles == []


def test_the_plugin_and_the_package_share_a_leaf_not_a_cycle(graph):
    """torch's plug-in imports the package (to turn verishape on) and the records' leaf; the
    package imports the leaf, never the plug-in (the circle issue 48 found: the widening
    record imported the plug-in, which imported the package back); the leaf imports nothing."""
    assert set(TOP_LEVEL) <= graph.keys()
    assert graph["verishape_records"] == set()
    assert "verishape_records" in graph["verishape.compiler.widen.record"]
    assert not [m for m, targets in graph.items() if "verishape_autoload" in targets]
    assert any(t.startswith("verishape.") for t in graph["verishape_autoload"])


def test_the_graph_reader_sees_a_cycle_and_an_upward_import():
    """The two checks above are only as good as the graph: on a made-up pair of modules it
    must report what they do wrong."""
    known = {"verishape.proofs.a": Path("a.py"), "verishape.solvers.b": Path("b.py")}
    a = _imports("verishape.proofs.a", b"from verishape.solvers import b\n", False, known)
    b = _imports("verishape.solvers.b", b"def f():\n    from ..proofs import a\n", False, known)
    assert a == {"verishape.solvers.b"} and b == {"verishape.proofs.a"}
    assert layer("verishape.solvers.b")[0] > layer("verishape.proofs.a")[0]


def test_a_script_next_to_folders_named_like_the_layers_imports_verishape(tmp_path):
    """A user's own ``proofs/``, ``solvers/``, ``compiler/`` (the script's folder is first
    on ``sys.path``) must not shadow verishape's."""
    for name in ("proofs", "solvers", "compiler"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('the user\\'s own package was imported')\n")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        import verishape
        from verishape.proofs import Obligation

        @verishape.compile(backend="eager", dynamic=True)
        def f(x):
            return x * 2
        print(f(torch.ones(3)).sum().item(), type(Obligation).__name__)
        try:
            import proofs  # noqa: F401  (the user's folder: its __init__ raises)
        except ImportError as exc:
            print("own:", exc)
    """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[:2] == ["6.0", "type"], out.stdout
    assert "own: the user's own package was imported" in out.stdout


def test_each_test_gets_torch_global_state_back():
    """The autouse fixture in conftest.py: a config flipped inside is restored, and a frame
    compiled inside is forgotten (so the next test compiles it afresh)."""
    import torch
    from conftest import restored_torch_state

    calls = []

    def counting(gm, example_inputs):
        calls.append(1)
        return gm.forward

    def f(x):
        return x + 1

    compiled = torch.compile(f, backend=counting)
    before = (torch._dynamo.config.assume_static_by_default, torch.fx.experimental._config.backed_size_oblivious)
    with restored_torch_state():
        torch._dynamo.config.assume_static_by_default = not before[0]
        torch.fx.experimental._config.backed_size_oblivious = not before[1]
        compiled(torch.ones(3))
    assert (torch._dynamo.config.assume_static_by_default, torch.fx.experimental._config.backed_size_oblivious) == before
    compiled(torch.ones(3))
    assert len(calls) == 2  # the cache entry made inside did not survive the scope
