"""``fuzz-meta --repro-dir``: standalone repro files (torch only, no verishape import) that
reproduce in a fresh process, exit 1 while the difference is there and 0 once it is fixed;
and ``--import`` finding modules as ``python -m`` does, in the repro subprocesses too.

The custom ops live in module files written to ``tmp_path`` (each test its own namespace),
so a fresh process finds them exactly as a user's would: from the current folder.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from verishape.cli.main import main
from verishape.fuzz import repro
from verishape.fuzz.report import CLASSES

#: An op module: ``grow`` (wrong fake unless FIXED) and ``rows`` (fake accepts any rank).
OPS = '''
import torch

FIXED = {fixed}


@torch.library.custom_op("{ns}::grow", mutates_args=())
def grow(x: torch.Tensor) -> torch.Tensor:
    flat = x.reshape(-1)
    return torch.cat([flat, flat[:1]]) if flat.numel() >= 2 else flat.clone()


@grow.register_fake
def _grow_fake(x):
    if FIXED:
        n = x.numel()
        return x.new_empty(n + 1 if n >= 2 else n)
    return x.new_empty(x.numel())


@torch.library.custom_op("{ns}::rows", mutates_args=())
def rows(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2:
        raise RuntimeError(f"rows: expected a 2-D tensor, got {{x.dim()}}-D")
    return x.sum(1)


@rows.register_fake
def _rows_fake(x):
    return x.new_empty(x.shape[0])
'''


def _write_ops(folder, module, ns, fixed=False):
    (folder / f"{module}.py").write_text(OPS.format(ns=ns, fixed=fixed))


def _run_file(path, cwd):
    return subprocess.run([sys.executable, str(path)], check=False, capture_output=True, text=True, cwd=cwd, timeout=300)


def _fuzz_in_process(tmp_path, monkeypatch, module, ops, mode, examples="5"):
    monkeypatch.chdir(tmp_path)
    rc = main(["fuzz-meta", "--import", module, "--ops", ops, "--mode", mode, "--max-examples", examples,
               "--repro-dir", "repros", "--json", "r.json"])
    return rc, json.loads((tmp_path / "r.json").read_text())


def _assert_standalone(text):
    imports = [line.split()[1] for line in text.splitlines() if line.startswith(("import ", "from "))]
    assert "torch" in imports and not [m for m in imports if m.startswith("verishape")], imports


def test_wrong_fake_gives_a_repro_that_fails_and_passes_once_fixed(tmp_path, monkeypatch, capsys):
    _write_ops(tmp_path, "vsr_ops_a", "vsr_a")
    rc, report = _fuzz_in_process(tmp_path, monkeypatch, "vsr_ops_a", "vsr_a::grow", "backed")
    assert rc == 1
    assert "repros: 1 written to repros" in capsys.readouterr().out
    assert report["summary"]["repros"]["written"] == 1 and report["summary"]["repros"]["not_reproduced"] == 0
    path = tmp_path / "repros" / "vsr_a_grow-backed-shape_mismatch.py"
    text = path.read_text()
    _assert_standalone(text)
    assert "import vsr_ops_a" in text and "kind:     shape_mismatch" in text and "--seed 0" in text
    out = _run_file(path, tmp_path)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "REPRODUCES: output 0: shape" in out.stdout and "in eager" in out.stdout
    assert "eager at" in out.stdout and "fake  at" in out.stdout
    _write_ops(tmp_path, "vsr_ops_a", "vsr_a", fixed=True)
    fixed = _run_file(path, tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr[-2000:]
    assert "does not reproduce" in fixed.stdout


@pytest.mark.slow
def test_meta_accepts_what_eager_rejects_family(tmp_path, monkeypatch):
    _write_ops(tmp_path, "vsr_ops_b", "vsr_b")
    rc, report = _fuzz_in_process(tmp_path, monkeypatch, "vsr_ops_b", "vsr_b::rows", "backed")
    assert rc == 1 and report["summary"]["repros"]["written"] == 1
    out = _run_file(tmp_path / "repros" / "vsr_b_rows-backed-meta_accepts_eager_rejects.py", tmp_path)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "REPRODUCES: eager raises RuntimeError: rows: expected a 2-D tensor" in out.stdout


@pytest.mark.slow
def test_unbacked_family(tmp_path, monkeypatch):
    _write_ops(tmp_path, "vsr_ops_c", "vsr_c")
    rc, report = _fuzz_in_process(tmp_path, monkeypatch, "vsr_ops_c", "vsr_c::grow,vsr_c::rows", "unbacked")
    assert rc == 1 and report["summary"]["repros"]["written"] == 2, report["summary"]["repros"]
    silent = _run_file(tmp_path / "repros" / "vsr_c_grow-unbacked-unbacked_silent_shape_mismatch.py", tmp_path)
    assert silent.returncode == 1 and "REPRODUCES: output 0: shape" in silent.stdout, silent.stderr[-2000:]
    assert "all hold at" in silent.stdout   # no runtime assert would catch it
    unchecked = _run_file(tmp_path / "repros" / "vsr_c_rows-unbacked-unbacked_unchecked_error.py", tmp_path)
    assert unchecked.returncode == 1 and "eager raises RuntimeError: rows" in unchecked.stdout


def test_unwritable_repro_dir_is_one_line_exit_2_before_fuzzing(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    assert main(["fuzz-meta", "--ops", "no_such_op", "--repro-dir", str(tmp_path / "a_file" / "sub")]) == 2
    err = capsys.readouterr().err.strip()
    # refused before the op name is even looked up (that would say "unknown op")
    assert "--repro-dir" in err and "cannot write there" in err and len(err.splitlines()) == 1, err


def test_repro_dir_is_created_if_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["fuzz-meta", "--ops", "abs", "--mode", "backed", "--max-examples", "1",
                 "--repro-dir", "new/deeper"]) == 0
    assert (tmp_path / "new" / "deeper").is_dir() and not list((tmp_path / "new" / "deeper").iterdir())


def _record(op, kind, mode, case, fn_source, point=None, imports=(), pyd=False):
    return {"op": op, "variant": "", "kind": kind, "class": CLASSES.get(kind, "other"), "mode": mode,
            "python_dispatcher": pyd, "where": "trace_point", "message": "recorded message", "case": case,
            "point": point, "fn_source": fn_source, "imports": list(imports), "eager_error": "", "meta_error": ""}


def test_a_kind_without_a_generator_is_an_internal_bug_and_writes_nothing(tmp_path):
    report = {"findings": [_record("abs", "made_up_kind", "backed", "Case(args=(T((2,), torch.float32),), kwargs={})",
                                   "torch.abs")], "summary": {}}
    with pytest.raises(repro.ReproBug, match="bug.*made_up_kind"):
        repro.write_repros(report, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_every_reported_kind_has_a_generator():
    assert set(CLASSES) <= set(repro.FAMILIES)


def test_a_repro_that_does_not_reproduce_is_not_written_and_is_reported(tmp_path):
    # abs's meta is right: a record claiming otherwise must not turn into a file
    record = _record("abs", "shape_mismatch", "backed", "Case(args=(T((2, 3), torch.float32),), kwargs={})", "torch.abs")
    report = {"findings": [record], "summary": {"config": {"seed": 3}}}
    assert repro.write_repros(report, str(tmp_path)) == []
    summary = report["summary"]["repros"]
    assert summary["written"] == 0 and summary["not_reproduced"] == 1
    assert "does not reproduce" in summary["failures"][0]["why"]
    assert [p.name for p in tmp_path.iterdir()] == []


def test_opinfo_callables_get_their_public_name():
    from verishape.fuzz.ops import resolve

    (target,) = resolve(["index_select"])
    assert repro.public_expr(target.fn) == "torch.index_select"
    assert repro.public_expr(torch.Tensor.expand) == "torch.Tensor.expand"
    assert repro.public_expr(lambda x: x) is None


NEW_KIND_OPS = '''
import torch


@torch.library.custom_op("vsr_d::nofake", mutates_args=())
def nofake(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@nofake.register_fake
def _nofake(x):
    raise RuntimeError("nofake: this fake kernel rejects every input")


@torch.library.custom_op("vsr_d::nosym", mutates_args=())
def nosym(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@nosym.register_fake
def _nosym(x):
    if isinstance(x.shape[0], torch.SymInt):
        raise RuntimeError("nosym: symbolic sizes are not supported")
    return x.new_empty(x.shape)
'''


@pytest.mark.slow
def test_records_of_every_other_family_give_repros_that_reproduce(tmp_path, monkeypatch):
    """From JSON records alone (as for a saved campaign): the compiled kinds end to end with
    torch.compile / torch.export, shape-determined permissiveness, and fake-rejects kinds."""
    (tmp_path / "vsr_ops_d.py").write_text(NEW_KIND_OPS)
    monkeypatch.chdir(tmp_path)
    expand = "Case(args=(T((3, 4), torch.float32), 3, 4), kwargs={})"
    custom = "Case(args=(T((3, 2), torch.float32, perm=(1, 0), stride='pad'),), kwargs={})"
    records = [
        # expand of an unbacked size to a constant asserts it equals 3; eager broadcasts size 1
        _record("expand", "compiled_rejects_unbacked_assert", "unbacked", expand, "torch.Tensor.expand", [[1, 4]], pyd=True),
        # the same expand pins a dynamic size to 3: torch.export refuses the declared Dim
        _record("expand", "compiled_rejects_specialization", "backed", expand, "torch.Tensor.expand", [[1, 4]]),
        # a source dimension of size 0 leaves no valid index, whatever the index values
        _record("index_select", "shape_determined_permissive", "backed",
                "Case(args=(T((0, 3), torch.float32), 0, T((2,), torch.int64, pool=(0,))), kwargs={})",
                "next(o for o in op_db if o.name == 'index_select' and o.variant_test_name == '').op",
                imports=["from torch.testing._internal.common_methods_invocations import op_db"]),
        _record("vsr_d::nofake", "meta_rejects_eager_accepts", "backed", custom, "torch.ops.vsr_d.nofake.default",
                imports=["import vsr_ops_d"]),
        _record("vsr_d::nosym", "symbolic_trace_error", "backed", custom, "torch.ops.vsr_d.nosym.default",
                imports=["import vsr_ops_d"]),
    ]
    report = {"findings": records, "summary": {"config": {"seed": 0}}}
    paths = repro.write_repros(report, str(tmp_path / "out"))
    assert report["summary"]["repros"]["failures"] == [] and len(paths) == 5
    texts = {os.path.basename(p): Path(p).read_text() for p in paths}
    assert "op_db" not in texts["index_select-backed-shape_determined_permissive.py"]
    assert "sizes.tolist()" in texts["expand-unbacked-compiled_rejects_unbacked_assert.py"]
    assert "torch.export.Dim" in texts["expand-backed-compiled_rejects_specialization.py"]
    # the exact claimed error of each compiled kind, never a look-alike (a Dynamo-internal
    # assertion, a range guard)
    claims = {"expand-unbacked-compiled_rejects_unbacked_assert.py": "Runtime assertion failed for expression",
              "expand-backed-compiled_rejects_specialization.py": "specialized it to be a constant"}
    for name, text in texts.items():
        _assert_standalone(text)
        out = _run_file(tmp_path / "out" / name, tmp_path)
        assert out.returncode == 1 and "REPRODUCES:" in out.stdout, (name, out.stdout, out.stderr[-1500:])
        assert claims.get(name, "REPRODUCES:") in out.stdout.splitlines()[-1], out.stdout
        assert "fake at static sizes" in out.stdout or "fake, fixed sizes" in out.stdout


# ------------------------------------------------------------------ --import like python -m


def _run_like_console_script(*args, cwd):
    """``python -P``: the current folder is not on sys.path, as with the installed ``verishape``."""
    return subprocess.run([sys.executable, "-P", "-m", "verishape", "fuzz-meta", *args], check=False,
                          capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_import_of_a_package_module_in_the_current_folder_reaches_workers_and_repros(tmp_path):
    pkg = tmp_path / "vsr_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(OPS.format(ns="vsr_e", fixed=False))
    out = _run_like_console_script("--import", "vsr_pkg.ops", "--ops", "vsr_e::grow,vsr_e::rows", "--jobs", "2",
                                   "--mode", "backed", "--max-examples", "5", "--repro-dir", "out", cwd=tmp_path)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "repros: 2 written to out" in out.stdout
    path = tmp_path / "out" / "vsr_e_grow-backed-shape_mismatch.py"
    assert "import vsr_pkg.ops" in path.read_text()
    assert _run_file(path, tmp_path).returncode == 1


@pytest.mark.slow
def test_a_module_in_the_current_folder_shadows_an_installed_one(tmp_path):
    pytest.importorskip("colorama")   # installed, and imported by nothing verishape or torch loads
    (tmp_path / "colorama.py").write_text(
        "import os\nopen(os.path.join(os.path.dirname(__file__), 'local_colorama_imported'), 'w').close()\n")
    out = _run_like_console_script("--import", "colorama", "--ops", "abs", "--mode", "backed", "--max-examples", "1",
                                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "local_colorama_imported").exists()


def test_repro_file_names_are_deterministic():
    record = _record("nn.functional.pad", "shape_mismatch", "backed", "Case(args=(), kwargs={})", "torch.abs")
    record["variant"] = "constant"
    assert repro.file_name(record) == "nn_functional_pad_constant-backed-shape_mismatch.py"
    assert repro.file_name(dict(record, op="ns::op", variant="")) == "ns_op-backed-shape_mismatch.py"


def test_records_saved_without_fn_source_still_name_their_callable():
    """Reports saved before records carried ``fn_source`` (the first campaign's JSON)."""
    record = _record("index_select", "shape_mismatch", "backed", "Case(args=(), kwargs={})", "")
    del record["fn_source"], record["imports"]
    expr, imports = repro._fn_expr(record, [])
    assert expr == "torch.index_select" and imports == []
    custom = dict(record, op="ns::op")
    assert repro._fn_expr(custom, ["import mod"]) == ("torch.ops.ns.op.default", ["import mod"])
