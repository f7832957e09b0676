"""benchmarks/torch_suite.py: PyTorch-style test files run stock and with VeriShapeEnv swapped in,
compared test by test (a file written here stands in for PyTorch's own)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch_suite  # noqa: E402

TESTS = textwrap.dedent('''
    import sys, time
    import torch
    from torch._dynamo.test_case import TestCase, run_tests

    class T(TestCase):
        def test_env_is_stock(self):
            envs = []
            def backend(gm, example):
                envs.append(torch._guards.detect_fake_mode(example).shape_env)
                return gm
            torch.compile(lambda x: x * 2, backend=backend, dynamic=True)(torch.ones(3))
            self.assertEqual(type(envs[0]).__name__, "ShapeEnv")

        def test_slow_with_verishape(self):
            torch.compile(lambda x: x + 1, backend="eager", dynamic=True)(torch.ones(4))
            if sys.modules["torch._dynamo.output_graph"].ShapeEnv.__name__ == "VeriShapeEnv":
                time.sleep(1.0)

        def test_no_shape_env(self):
            self.assertEqual(1 + 1, 2)

    if __name__ == "__main__":
        run_tests()
''')


def test_each_side_runs_its_env_and_differences_and_slowdowns_are_named(tmp_path):
    """The verishape side builds VeriShapeEnvs (a test that checks for stock's fails there, and is
    listed), a test that builds none is counted apart, and a test slower only under verishape is a
    candidate that stays slower when rerun alone."""
    path = tmp_path / "test_fake_pytorch.py"
    path.write_text(TESTS)
    out = tmp_path / "report.json"
    assert torch_suite.main([str(path), "--recheck", "1", "--slower-s", "0.5", "--json", str(out)]) == 0
    result = json.loads(out.read_text())["files"][path.name]
    assert result["tests"] == 3 and result["touched"] == 2 and result["untouched"] == 1
    assert result["differ"] == [{"test": "test_fake_pytorch.py::T::test_env_is_stock", "stock": "passed",
                                 "verishape": "failed"}]
    (slow,) = result["candidates_slower"]
    assert slow["test"].endswith("test_slow_with_verishape") and slow["verdict"] == "slower"
    assert slow["recheck_s"]["verishape"] > slow["recheck_s"]["stock"] + 0.5


def test_a_missing_or_broken_file_is_one_line_and_exit_2(tmp_path, capsys):
    assert torch_suite.main([str(tmp_path / "test_nothing.py")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no such file" in err
    broken = tmp_path / "test_broken.py"
    broken.write_text("def test_x(:\n    pass\n")
    assert torch_suite.main([str(broken)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "did not run it on the stock side" in err
