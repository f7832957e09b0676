"""A ``torch._check`` that equates a data value with a size keeps its runtime check.

``torch._check(n == x.size(0))`` with ``n`` from ``.item()``/``.tolist()`` makes the
ShapeEnv replace the unbacked ``n`` by the size.  Stock torch then compares the size with
itself (PyTorch issues 141248 and 151127): a bad input, whose data value differs from the
size, returns a value computed with the size where eager raises.  verishape keeps the
comparison of the value actually produced at runtime with the size.

Each program is run on a good input (the result must equal eager's) and on a bad one
(eager raises; verishape must raise; stock is characterized as accepting it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import verishape
from verishape.core import replacement_asserts


def item_producer(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = (y + 0).item()
    torch._check(n == x.size(0))
    return x * 2 + n


def tolist_producer(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a, b = y.tolist()
    torch._check(a == x.size(0))
    return x * 2 + a + b


def sum_item_producer(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = y.sum().item()
    torch._check(n == x.size(0))
    return x * 2 + n


def size_first(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The size on the left; the value also shapes a tensor (needs the replacement)."""
    n = (y + 0).item()
    torch._check(x.size(0) == n)
    return torch.zeros(n) + x


def affine_target(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Replaced by ``s + 1``: stock's assert pass reifies ``s + 1`` as the value itself."""
    n = (y + 0).item()
    torch._check(n == x.size(0) + 1)
    return x * 2 + n


def nonzero_count(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The unbacked symbol is a tensor's size, not a scalar."""
    nz = torch.nonzero(y)
    torch._check(nz.size(0) == x.size(0))
    return x * 2 + nz.size(0)


X = torch.ones(5)
# (program, good y, bad y): in the bad input the data value is not the size of X.
CASES: list[tuple[Callable[..., torch.Tensor], torch.Tensor, torch.Tensor]] = [
    (item_producer, torch.tensor(5), torch.tensor(3)),
    (tolist_producer, torch.tensor([5, 1]), torch.tensor([3, 1])),
    (sum_item_producer, torch.tensor([2, 3]), torch.tensor([1, 3])),
    (size_first, torch.tensor(5), torch.tensor(3)),
    (affine_target, torch.tensor(6), torch.tensor(3)),
    (nonzero_count, torch.tensor([1, 1, 1, 1, 1, 0]), torch.tensor([1, 1, 0, 0, 0, 0])),
]
IDS = [case[0].__name__ for case in CASES]


@pytest.fixture(autouse=True)
def _scalar_outputs() -> Any:
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield
    torch._dynamo.reset()


def _eager_raises(fn: Callable[..., torch.Tensor], y: torch.Tensor) -> None:
    with pytest.raises(RuntimeError):
        fn(X, y)


@pytest.mark.parametrize(("fn", "good", "bad"), CASES, ids=IDS)
def test_verishape_compile_rejects_bad_value(fn: Callable[..., torch.Tensor], good: torch.Tensor,
                                             bad: torch.Tensor) -> None:
    _eager_raises(fn, bad)
    compiled = verishape.compile(fn, backend="aot_eager", fullgraph=True, dynamic=True)
    assert torch.equal(compiled(X, good), fn(X, good))
    with pytest.raises(RuntimeError, match="Runtime assertion failed|Eq\\("):
        compiled(X, bad)
    # the good input still runs the same artifact after the failure
    assert torch.equal(compiled(X, good), fn(X, good))


@pytest.mark.parametrize(("fn", "good", "bad"), CASES, ids=IDS)
def test_stock_compile_accepts_bad_value(fn: Callable[..., torch.Tensor], good: torch.Tensor,
                                         bad: torch.Tensor) -> None:
    """Characterization of the upstream hole (PyTorch 141248/151127) on this torch:
    the stock artifact returns a value computed with the size where eager raises.  If
    a torch release fixes it, this test fails and tells us to drop the characterization."""
    replacement_asserts.install()  # the hooks are installed, and change nothing for stock envs
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=True)
    assert torch.equal(compiled(X, good), fn(X, good))
    got = compiled(X, bad)
    assert got.shape == X.shape  # a value, where eager raises


def test_mark_dynamic_and_error_names_the_check() -> None:
    """mark_dynamic on the one varying dimension: the failure names the equality."""
    compiled = verishape.compile(item_producer, backend="aot_eager", fullgraph=True)
    x = torch.ones(6)
    torch._dynamo.mark_dynamic(x, 0)
    assert torch.equal(compiled(x, torch.tensor(6)), item_producer(x, torch.tensor(6)))
    with pytest.raises(RuntimeError, match=r"Eq\(u\d+, s\d+\)"):
        compiled(x, torch.tensor(4))


def test_value_used_as_size_keeps_stock_results() -> None:
    """Keeping the producer in the graph changes nothing for good inputs of other sizes."""
    compiled = verishape.compile(size_first, backend="aot_eager", fullgraph=True, dynamic=True)
    for size in (3, 7, 11):
        x = torch.arange(size, dtype=torch.float32)
        assert torch.equal(compiled(x, torch.tensor(size)), size_first(x, torch.tensor(size)))


@pytest.mark.slow
@pytest.mark.parametrize(("fn", "good", "bad"), [CASES[0], CASES[3]], ids=[IDS[0], IDS[3]])
def test_inductor_rejects_bad_value(fn: Callable[..., torch.Tensor], good: torch.Tensor,
                                    bad: torch.Tensor) -> None:
    compiled = verishape.compile(fn, fullgraph=True, dynamic=True)
    assert torch.equal(compiled(X, good), fn(X, good))
    with pytest.raises(RuntimeError):
        compiled(X, bad)


# ---------------------------------------------------------------------------- export

class _Wrap(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fn(x, y)


def _export(fn: Callable[..., torch.Tensor], good: torch.Tensor) -> Any:
    dims = {"x": {0: torch.export.Dim("n")}, "y": None}
    return torch.export.export(_Wrap(fn), (X, good), dynamic_shapes=dims, strict=False).module()


@pytest.mark.parametrize(("fn", "good", "bad"), [CASES[0], CASES[4]], ids=[IDS[0], IDS[4]])
def test_export_non_strict_with_verishape_env_rejects_bad_value(monkeypatch: pytest.MonkeyPatch,
                                                                fn: Callable[..., torch.Tensor],
                                                                good: torch.Tensor, bad: torch.Tensor) -> None:
    """Non-strict export builds its ShapeEnv in ``torch._export.non_strict_utils``; with
    VeriShapeEnv there, the exported program keeps the comparison too."""
    import torch._export.non_strict_utils as non_strict_utils

    monkeypatch.setattr(non_strict_utils, "ShapeEnv", verishape.VeriShapeEnv)
    module = _export(fn, good)
    assert torch.equal(module(X, good), fn(X, good))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        module(X, bad)


def test_export_non_strict_stock_accepts_affine_bad_value() -> None:
    """Characterization: stock export compares ``n`` with itself when ``n`` was replaced by
    ``s + 1`` (its assert pass reifies ``s + 1`` as the value node)."""
    replacement_asserts.install()  # the hooks are installed, and change nothing for stock envs
    module = _export(affine_target, torch.tensor(6))
    assert module(X, torch.tensor(3)).shape == X.shape
