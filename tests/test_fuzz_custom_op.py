"""``verishape.testing.check_meta`` on custom ops: a wrong fake must be caught with a repro
that fails on its own, a right one must pass.

The ops live at module level so that repros (and ``fuzz-meta --import``) can import them.
"""

import os
import subprocess
import sys

import pytest
import torch

from verishape.testing import check_meta


@torch.library.custom_op("verishape_fuzz_test::grow", mutates_args=())
def grow(x: torch.Tensor) -> torch.Tensor:
    """Eager: one extra element once there are at least two."""
    flat = x.reshape(-1)
    return torch.cat([flat, flat[:1]]) if flat.numel() >= 2 else flat.clone()


@grow.register_fake
def _grow_fake(x):
    return x.new_empty(x.numel())   # deliberately wrong for numel >= 2


@torch.library.custom_op("verishape_fuzz_test::rows", mutates_args=())
def rows(x: torch.Tensor) -> torch.Tensor:
    """Eager rejects anything but a matrix."""
    if x.dim() != 2:
        raise RuntimeError(f"rows: expected a 2-D tensor, got {x.dim()}-D")
    return x.sum(1)


@rows.register_fake
def _rows_fake(x):
    return x.new_empty(x.shape[0])   # deliberately accepts any rank >= 1


@torch.library.custom_op("verishape_fuzz_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    flat = x.reshape(-1)
    return torch.cat([flat, flat])


@twice.register_fake
def _twice_fake(x):
    return x.new_empty(2 * x.numel())   # correct


def _repros(message: str) -> list[str]:
    return [part.split("\n--- ", 1)[0] for part in message.split("--- repro ---\n")[1:]]


def _run_snippet(code: str) -> subprocess.CompletedProcess:
    here = os.path.dirname(__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_wrong_shape_is_caught_with_a_repro_that_reproduces():
    with pytest.raises(AssertionError) as info:
        check_meta(grow, mode="backed", max_examples=10, module="test_fuzz_custom_op")
    message = str(info.value)
    assert "shape_mismatch" in message and "verishape_fuzz_test::grow" in message
    repro = _repros(message)[0]
    assert "import test_fuzz_custom_op" in repro and "replay(" in repro
    out = _run_snippet(repro)
    assert out.returncode != 0 and "AssertionError: shape_mismatch" in out.stderr, out.stderr[-2000:]


def test_accepting_what_eager_rejects_is_caught():
    with pytest.raises(AssertionError) as info:
        check_meta(rows, mode="backed", max_examples=10)
    assert "meta_accepts_eager_rejects" in str(info.value)
    assert "rows: expected a 2-D tensor" in str(info.value)


def test_unbacked_mode_catches_the_silent_shape_difference():
    with pytest.raises(AssertionError) as info:
        check_meta(grow, mode="unbacked", max_examples=10)
    assert "unbacked_silent_shape_mismatch" in str(info.value)


def test_correct_fake_passes_in_all_modes():
    check_meta(twice, max_examples=10)


def test_explicit_samples_seed_the_search():
    check_meta(twice, samples=[(torch.randn(2, 3),), ((torch.randn(4),), {})], max_examples=5, mode="backed")
    with pytest.raises(AssertionError):
        check_meta(grow, samples=[(torch.randn(5),)], max_examples=5, mode="backed")


def test_bad_mode_is_a_value_error():
    with pytest.raises(ValueError, match="mode must be one of"):
        check_meta(twice, mode="sideways")
