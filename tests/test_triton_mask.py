"""Proved divisibility reaches Inductor's Triton codegen (issue: constant boundary masks).

For x of shape (s0, C) with only dimension 0 dynamic and ``torch._check(s0 % M == 0)``,
Inductor asks ``statically_known_multiple_of(C*s0, 4096)`` to decide whether the x-mask
of a pointwise kernel can be constant.  Stock structural rules cannot combine the factors;
VeriShapeEnv proves it, and the generated kernel changes.  Runs on CPU: Inductor emits
Triton source with ``cpu_backend="triton"``; we stub the backend hash (the only thing that
needs a driver before codegen) and capture the source at ``define_kernel``.
"""

from __future__ import annotations

import pytest
import torch

import verishape

triton = pytest.importorskip("triton", reason="needs the triton extra: pip install -e .[triton]")


class _Captured(Exception):
    pass


def _program(mod: int):
    def f(x):
        torch._check(x.shape[0] % mod == 0)
        return torch.relu(x) * 2 + 1

    return f


@pytest.fixture
def capture_kernels(tmp_path, monkeypatch):
    import torch.utils._triton as triton_utils
    from torch._inductor import config as inductor_config
    from torch._inductor.codegen.triton import TritonScheduling

    kernels: list[str] = []

    def define_kernel(self, src_code, node_schedule, kernel):
        kernels.append(src_code)
        raise _Captured  # stop before anything needs a GPU driver

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(triton_utils, "triton_hash_with_backend", lambda: "verishape-test")
    monkeypatch.setattr(TritonScheduling, "define_kernel", define_kernel)
    with inductor_config.patch(cpu_backend="triton", fx_graph_cache=False, autotune_local_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        yield kernels
    torch._dynamo.reset()


def _kernel_source(compile_fn, fn, x, kernels) -> str:
    torch._dynamo.reset()
    kernels.clear()
    with pytest.raises(Exception) as info:  # the sentinel, wrapped by Inductor
        compile_fn(fn, backend="inductor", fullgraph=True)(x)
    chain, exc = [], info.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__context__ or exc.__cause__
    assert any(isinstance(e, _Captured) for e in chain), info.value
    assert len(kernels) == 1
    return kernels[0]


def _constant_mask(src: str) -> bool:
    masks = [line.strip() for line in src.splitlines() if line.strip().startswith("xmask =")]
    assert len(masks) == 1, src
    if "xindex < xnumel" in masks[0]:
        return False
    assert "tl.full" in masks[0] and "True" in masks[0], masks[0]
    return True


@pytest.mark.parametrize(
    "cols,mod,rows,provable",
    [
        (32, 128, 256, True),  # 32*s0 is a multiple of 4096 when s0 % 128 == 0
        (64, 64, 128, True),  # 64*s0, s0 % 64
        (32, 64, 192, False),  # negative control: 32*64 = 2048 only
        (32, 64, 128, False),  # negative control, with a hint that is a multiple of 128
    ],
)
def test_proved_divisibility_makes_the_mask_constant(capture_kernels, cols, mod, rows, provable):
    x = torch.randn(rows, cols)
    torch._dynamo.mark_dynamic(x, 0)
    fn = _program(mod)
    stock = _kernel_source(torch.compile, fn, x, capture_kernels)
    proved = _kernel_source(verishape.compile, fn, x, capture_kernels)
    assert not _constant_mask(stock)  # stock keeps the boundary mask in every case
    assert _constant_mask(proved) is provable
    if provable:
        assert "xmask, other" not in proved and "mask=xmask" not in proved  # loads/stores unmasked too
