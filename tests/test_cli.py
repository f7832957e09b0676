"""The ``verishape`` command's basics."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verishape import __version__
from verishape.core.torch_seam import UnsupportedTorch, parse_version, probe


def _run(*args):
    return subprocess.run([sys.executable, "-m", "verishape", *args], capture_output=True, text=True)


def test_version():
    out = _run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"verishape {__version__}"


def test_help_lists_commands():
    out = _run("--help")
    assert out.returncode == 0 and "demo" in out.stdout


def test_no_command_is_a_usage_error():
    out = _run()
    assert out.returncode == 2


def test_unknown_command_is_one_line_exit_2():
    out = _run("frobnicate")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "invalid choice" in out.stderr


def test_version_parsing_and_floor():
    """No upper bound any more: 2.14/2.15/3.0 are judged by the probe of their internals
    (tests/test_torch_seam.py); below 2.11 is refused by version."""
    assert parse_version("2.13.0+cpu") == (2, 13)
    assert parse_version("2.11.0a0+git1234") == (2, 11)
    from test_torch_seam import fake_torch

    for ok in ("2.11.0", "2.12.1", "2.14.1", "2.15.0", "3.0.0"):
        assert probe(fake_torch(), ok)[1] == []
    with pytest.raises(UnsupportedTorch, match=r"^verishape cannot run on torch 2\.10\.0: missing torch >= 2\.11"):
        from verishape.core.torch_seam import require

        require(fake_torch(), "2.10.0")


def test_feature_probe_on_installed_torch():
    f, missing = probe()
    assert missing == []
    assert {"axioms", "var_to_range", "unbacked_only", "compute_hint", "size_oblivious"} <= f.maybe_evaluate_static_params
    assert f.has_guard_or_defer_runtime_assert


def test_feature_detection_on_fake_torch_internals():
    from test_torch_seam import FakeOldSource, fake_shape_env, fake_torch
    from verishape.core.torch_seam import require

    f = require(fake_torch(), "2.11.0")
    assert f.torch_version == (2, 11) and f.static_eval_knows_size_oblivious and not f.source_name_is_method
    assert require(fake_torch(source=FakeOldSource), "2.12.0").source_name_is_method
    with pytest.raises(UnsupportedTorch, match=r"_maybe_evaluate_static\(size_oblivious=...\)"):
        require(fake_torch(fake_shape_env("expr, *, unbacked_only=False, compute_hint=False, axioms=None, "
                                         "var_to_range=None")), "2.13.0")


# ------------------------------------------------------------------ bad input (issue 10, item 9)

SCRIPTS = Path(__file__).parent / "scripts"

#: Runs the CLI in a fresh interpreter and reports which heavy modules it imported.
_PROBE = ("import sys\nfrom verishape.cli.main import main\nrc = main(sys.argv[1:])\n"
          "print('HEAVY', sorted(m for m in ('torch', 'sympy', 'z3') if m in sys.modules))\nsys.exit(rc)\n")


def _one_error_line(stderr):
    errors = [line for line in stderr.splitlines() if line.startswith("verishape: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0]


def _probe(*args, cwd=None):
    return subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.mark.parametrize("args, needle", [
    (["verify-guards", "missing.py"], "script not found: missing.py"),
    (["explain", "missing.py"], "script not found: missing.py"),
    (["verify-guards", str(SCRIPTS / "clean.py"), "--json", "/nonexistent-dir/r.json"], "--json /nonexistent-dir/r.json"),
    (["verify-guards", str(SCRIPTS / "clean.py"), "--json", str(SCRIPTS)], "--json"),
    (["fuzz-meta", "--ops", "abs", "--time-budget", "-1"], "--time-budget"),
    (["fuzz-meta", "--ops", "abs", "--time-budget", "nan"], "--time-budget"),
    (["fuzz-meta", "--ops", "abs", "--resume", "/nonexistent-dir/progress.jsonl"], "--resume"),
])
def test_bad_arguments_are_refused_before_importing_torch(args, needle):
    out = _probe(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in _one_error_line(out.stderr)
    assert "HEAVY []" in out.stdout, out.stdout  # neither torch, sympy nor z3 was imported


@pytest.mark.slow
def test_latin1_script_is_audited_and_explained(tmp_path):
    script = SCRIPTS / "latin1.py"
    assert b"\xe9" in script.read_bytes()  # really latin-1 bytes, not UTF-8
    report = tmp_path / "r.json"
    out = _run("verify-guards", str(script), "--json", str(report))
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(report.read_text())["summary"]["frames"] == 1
    out = _run("explain", str(script))
    assert out.returncode == 0 and "f (latin1.py:6): 1 frame(s)" in out.stdout, out.stderr[-2000:]


def test_undecodable_script_is_one_line(tmp_path):
    script = tmp_path / "bad_bytes.py"
    script.write_bytes(b"x = '\xff\xfe'\n")  # no coding line: UTF-8, and these bytes are not UTF-8
    out = _probe("verify-guards", str(script))
    assert out.returncode == 2 and "bad_bytes.py" in _one_error_line(out.stderr)


@pytest.mark.slow
def test_the_demo_runs_both_paths_and_says_what_each_did():
    """``./dev.sh demo``, the main job: the data-dependent program compiles where stock
    raises and agrees with eager, and on the default path the batch-1 call runs the batch-N
    artifact (one compile fewer than stock)."""
    out = subprocess.run([sys.executable, "-m", "verishape", "demo"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "stock torch.compile: UserError" in text and text.count("(eager agrees)") == 3
    assert "an input that breaks the user's fact is still rejected" in text
    assert "verishape.compile: 2 compiles;" in text and "batch 1: ran the batch-N artifact (proved)" in text
    assert "stock torch.compile: 3 compiles;" in text and "outputs equal eager: yes" in text


def test_every_error_for_a_user_has_one_base_and_keeps_its_standard_type():
    """One base, one renderer: the command prints any of them as ``verishape: error: ...``;
    each keeps the standard type code written against it catches."""
    import verishape
    from verishape.core.errors import UsageError
    from verishape.compiler.export.checks import UncheckableFact
    from verishape.compiler.registered import BadOption
    from verishape.core.errors import render
    from verishape.fuzz.ops import UnknownOp
    from verishape.fuzz.rootcause import KnownIssuesError

    for cls, standard in ((UnsupportedTorch, ImportError), (UsageError, Exception), (UncheckableFact, ValueError),
                          (BadOption, ValueError), (UnknownOp, LookupError), (KnownIssuesError, ValueError)):
        assert issubclass(cls, verishape.VerishapeError) and issubclass(cls, standard), cls
    assert render(UsageError("script not found: x.py")) == "verishape: error: script not found: x.py"
