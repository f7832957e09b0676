"""The ``verishape`` command's basics."""

import subprocess
import sys

from verishape import __version__
from verishape._compat import UnsupportedTorch, check_supported, parse_version, probe


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


def test_version_parsing_and_range():
    assert parse_version("2.13.0+cpu") == (2, 13)
    assert parse_version("2.11.0a0+git1234") == (2, 11)
    assert check_supported("2.12.1") == (2, 12)
    for bad in ("2.10.0", "2.14.0", "3.0.0"):
        try:
            check_supported(bad)
        except UnsupportedTorch as exc:
            assert "verishape supports torch 2.11 to 2.13" in str(exc) and bad in str(exc)
        else:
            raise AssertionError(bad)


def test_feature_probe_on_installed_torch():
    f = probe()
    assert {"axioms", "var_to_range", "unbacked_only", "compute_hint", "size_oblivious"} <= f.maybe_evaluate_static_params
    assert f.has_guard_or_defer_runtime_assert


class _FakeSource:
    @property
    def name(self):
        return "L['x']"


class _OldSource:
    def name(self):
        return "L['x']"


def _fake_env(params):
    ns = {}
    exec(f"def _maybe_evaluate_static(self, {', '.join(params)}): pass", ns)
    members = {m: (lambda self: None) for m in ("evaluate_expr", "guard_or_defer_runtime_assert",
                                                "produce_guards_verbose", "replace", "_get_sloc")}
    return type("FakeShapeEnv", (), {"_maybe_evaluate_static": ns["_maybe_evaluate_static"], **members})


def test_feature_detection_on_fake_torch_internals():
    import pytest

    from verishape._compat import require

    full = _fake_env(["expr", "*", "unbacked_only=False", "compute_hint=False", "size_oblivious=False",
                      "axioms=None", "var_to_range=None"])
    f = require(full, _FakeSource, "2.11.0")
    assert f.torch_version == (2, 11) and f.static_eval_knows_size_oblivious and not f.source_name_is_method
    assert require(full, _OldSource, "2.12.0").source_name_is_method
    lacking = _fake_env(["expr", "*", "unbacked_only=False", "compute_hint=False", "axioms=None",
                         "var_to_range=None"])
    with pytest.raises(UnsupportedTorch, match=r"_maybe_evaluate_static\(size_oblivious=...\)"):
        require(lacking, _FakeSource, "2.13.0")
    with pytest.raises(UnsupportedTorch, match="torch 2.10.0 is installed"):
        require(full, _FakeSource, "2.10.0")
