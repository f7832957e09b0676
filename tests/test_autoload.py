"""``VERISHAPE_ENABLE=1``: launchers turn verishape on without editing the program, through
torch's ``torch.backends`` plug-in hook at ``import torch``."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from verishape_autoload import VARIABLE, requested

PROGRAM = """
import torch
from verishape.compiler import frames, switch
def f(x):
    return x.sum() * x.shape[0]
out = torch.compile(f, backend="eager", dynamic=True)(torch.ones(4))
print(switch.is_enabled(), [type(e).__name__ for e in frames.envs_for(f.__code__)], float(out))
"""


def _run(value: str | None, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if value is not None:
        env[VARIABLE] = value
    env.update(extra or {})
    return subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("value,want", [(None, False), ("", False), ("0", False), (" 1 ", True), ("1", True)])
def test_the_variable_reads_one_as_on_and_unset_empty_or_zero_as_off(value, want):
    assert requested({} if value is None else {VARIABLE: value}) is want


@pytest.mark.parametrize("value", ["yes", "true", "2", "on"])
def test_any_other_value_is_refused_naming_the_variable_and_the_settings(value):
    with pytest.raises(ValueError, match=rf"VERISHAPE_ENABLE='{value}' is not a setting: use 1 .* or 0 / unset"):
        requested({VARIABLE: value})


def test_the_hook_is_listed_where_torch_looks_for_plug_ins():
    hooks = {ep.name: ep.value for ep in entry_points(group="torch.backends")}
    assert hooks.get("verishape") == "verishape_autoload:on_torch_import"


@pytest.mark.slow
def test_a_launched_program_compiles_with_verishape_when_the_variable_is_one():
    on = _run("1")
    assert on.returncode == 0, on.stderr
    assert on.stdout.split() == ["True", "['VeriShapeEnv']", "16.0"]
    off = _run(None)
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["False", "[]", "16.0"]  # stock: no VeriShapeEnv built


@pytest.mark.slow
def test_a_bad_value_stops_the_program_at_import_torch_in_one_line():
    bad = _run("yes")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "verishape: VERISHAPE_ENABLE='yes' is not a setting: use 1 (verishape for every torch.compile of the "
        "process) or 0 / unset (off)"]


@pytest.mark.slow
def test_with_torch_plug_ins_off_the_switch_says_it_is_off():
    """torch skips every plug-in under TORCH_DEVICE_BACKEND_AUTOLOAD=0: the program can
    see that verishape is off (switch.is_enabled), as the README says."""
    out = _run("1", {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "False"


@pytest.mark.slow
def test_off_nothing_of_verishape_is_imported_by_import_torch():
    """A program that never asked (one that loads a saved export, say) runs without verishape:
    the plug-in module lives outside the package."""
    import os

    code = ("import sys, torch; print(any(m == 'verishape' or m.startswith('verishape.') for m in sys.modules), "
            "'verishape_autoload' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_a_torch_verishape_cannot_use_stops_the_launch_in_one_line(monkeypatch, capsys):
    import verishape_autoload
    from verishape import UnsupportedTorch
    from verishape.compiler import switch

    def refuse():
        raise UnsupportedTorch("verishape cannot run on this torch: ShapeEnv.check_equal is missing")

    monkeypatch.setenv(VARIABLE, "1")
    monkeypatch.setattr(switch, "enable", refuse)
    with pytest.raises(SystemExit) as stop:
        verishape_autoload.on_torch_import()
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "verishape: VERISHAPE_ENABLE=1 but verishape cannot run on this torch: ShapeEnv.check_equal is missing"]
