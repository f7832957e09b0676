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
