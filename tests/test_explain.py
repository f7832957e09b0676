"""verishape.explain and `verishape explain`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import verishape


def heads(x):
    b, t, d = x.shape
    return x.view(b, t, 4, d // 4).transpose(1, 2).reshape(b * 4, t, d // 4)


def test_explain_compiled_function():
    torch._dynamo.reset()
    cf = verishape.compile(heads, backend="eager", dynamic=True)
    assert "no frame compiled" in verishape.explain(cf)
    cf(torch.randn(2, 6, 16))
    cf(torch.randn(1, 6, 16))  # 0/1 specialization: a recompile
    text = verishape.explain(cf)
    assert text.startswith("heads: 2 frame(s) compiled with verishape")
    assert "guard_avoided" in text and "L['x'].size()[2]" in text  # symbols named by their sources
    assert "recompiled because the guard" in text
    torch._dynamo.reset()


def test_explain_a_compiled_module_finds_its_own_frames():
    """A compiled module runs through Dynamo's shared wrapper frame (one code object for every
    compiled module): explain finds the frames of this module, not another's (issue 39)."""
    torch._dynamo.reset()
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    other = torch.nn.Linear(4, 4)
    compiled, compiled_other = verishape.compile(mlp, backend="aot_eager"), verishape.compile(other, backend="aot_eager")
    assert "no frame compiled" in verishape.explain(compiled)
    with torch.no_grad():  # an inference graph: kept, and batch 1 runs it
        for b in (4, 6, 1):
            compiled(torch.randn(b, 4))
    text = verishape.explain(compiled)
    assert text.startswith("Sequential.forward: 3 frame(s) compiled with verishape"), text
    assert "widened to admit 1" in text  # batch 1 ran the generic artifact, and says so
    assert "no frame compiled" in verishape.explain(compiled_other)
    compiled_other(torch.randn(2, 4))
    assert verishape.explain(compiled_other).startswith("Linear.forward: 1 frame(s)")
    torch._dynamo.reset()


def test_explain_rejects_non_functions():
    with pytest.raises(TypeError, match="expected a compiled function"):
        verishape.explain(3)


def test_explain_command(tmp_path):
    script = Path(__file__).parent / "scripts" / "deploy_skip_guards.py"
    out = subprocess.run([sys.executable, "-m", "verishape", "explain", str(script)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "f (deploy_skip_guards.py:5): 1 frame(s) compiled with verishape" in out.stdout
    assert "guards:" in out.stdout


# ------------------------------------------------------------------ issue 10, item 10

SCRIPTS = Path(__file__).parent / "scripts"


def _explain(script):
    return subprocess.run([sys.executable, "-m", "verishape", "explain", str(SCRIPTS / script)],
                          capture_output=True, text=True, timeout=300)


def test_explain_exits_nonzero_when_a_compile_error_stops_the_script():
    out = _explain("even_view.py")  # mark_dynamic(min=2) but the view needs an even size
    assert out.returncode == 1, out.stdout + out.stderr
    assert "f (even_view.py:4)" in out.stdout  # what compiled is still explained
    errors = [line for line in out.stderr.splitlines() if "compile error" in line]
    assert len(errors) == 1 and "ConstraintViolationError" in errors[0] and "Traceback" not in out.stderr


def test_explain_script_that_raises_is_one_line_exit_2():
    out = _explain("raises.py")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "raised ValueError" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_explain_decisions_point_at_user_code():
    out = _explain("aot_decisions.py")  # aot_eager: AOTAutograd asks too, after Dynamo's trace
    assert out.returncode == 0, out.stderr
    decided = [line for line in out.stdout.splitlines() if line.strip().startswith("decided")]
    assert len(decided) >= 5
    for line in decided:
        where = line.rsplit("[", 1)[-1]
        assert "aot_decisions.py:" in where and "verishape/" not in where and "torch/" not in where, line


def test_frames_of_different_functions_get_different_numbers():
    out = _explain("two_functions.py")
    assert out.returncode == 0, out.stderr
    frames = [line.split(":")[0] for line in out.stdout.splitlines() if line.startswith("frame ")]
    assert frames == ["frame 0", "frame 1"], out.stdout
    assert "g (two_functions.py:4): 1 frame(s)" in out.stdout and "h (two_functions.py:10): 1 frame(s)" in out.stdout
