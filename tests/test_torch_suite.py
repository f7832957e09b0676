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
    import time
    import torch
    from torch._dynamo.test_case import TestCase, run_tests
    from torch.fx.experimental.symbolic_shapes import ShapeEnv  # stock's: imported before any swap

    class T(TestCase):
        def test_env_is_stock(self):
            envs = []
            def backend(gm, example):
                envs.append(torch._guards.detect_fake_mode(example).shape_env)
                return gm
            torch.compile(lambda x: x * 2, backend=backend, dynamic=True)(torch.ones(3))
            self.assertEqual(type(envs[0]).__name__, "ShapeEnv")

        def test_slow_with_verishape(self):
            envs = []
            def backend(gm, example):
                envs.append(torch._guards.detect_fake_mode(example).shape_env)
                return gm
            torch.compile(lambda x: x + 1, backend=backend, dynamic=True)(torch.ones(4))
            if type(envs[0]).__name__ == "VeriShapeEnv":
                time.sleep(1.0)

        def test_no_shape_env(self):
            self.assertEqual(1 + 1, 2)

        def test_a_stock_env_the_test_builds(self):
            from torch._dynamo.source import ConstantSource
            env = ShapeEnv(should_record_events=False)
            size = env.create_symbolic_sizes_strides_storage_offset(torch.randn(3, 2), ConstantSource("x"))[0]
            self.assertTrue(bool(size[0] == 3))

    if __name__ == "__main__":
        run_tests()
''')


def test_each_side_runs_its_env_and_differences_and_slowdowns_are_named(tmp_path):
    """The verishape side builds VeriShapeEnvs (a test that checks for stock's fails there, and is
    listed), a test that builds none is counted apart, a stock env a test builds itself passes
    torch's checks, and a test slower only under verishape is a candidate that stays slower when
    rerun alone."""
    path = tmp_path / "test_fake_pytorch.py"
    path.write_text(TESTS)
    out = tmp_path / "report.json"
    assert torch_suite.main([str(path), "--recheck", "1", "--slower-s", "0.5", "--json", str(out)]) == 0
    result = json.loads(out.read_text())["files"][path.name]
    # the stock env a test builds itself passes torch's own checks on the verishape side too
    assert result["tests"] == 4 and result["touched"] == 2 and result["untouched"] == 2
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
