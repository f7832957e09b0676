"""``verishape.enable()``: every torch.compile of the process reasons with VeriShapeEnv,
whatever backend it names; caches are keyed apart while it holds; off again after."""

from __future__ import annotations

import torch

import verishape
from verishape.compiler import backend, frames
from verishape.core.shape_env import VeriShapeEnv


def _checked(x, n):
    k = n.item()
    torch._check(k >= 1)
    torch._check(k <= x.shape[0])
    return x[:k].sum(0)


def test_a_plain_torch_compile_reasons_with_verishape_while_enabled():
    torch._dynamo.reset()
    tag = torch.compiler.config.cache_key_tag
    with verishape.enable():
        assert verishape.compiler.switch.is_enabled()
        assert backend._is_ours(torch.compiler.config.cache_key_tag)
        compiled = torch.compile(_checked, backend="aot_eager", fullgraph=True)
        x = torch.randn(5, 3)
        torch.testing.assert_close(compiled(x, torch.tensor(3)), _checked(x, torch.tensor(3)))
        envs = frames.envs_for(_checked.__code__)
        assert envs and all(isinstance(e, VeriShapeEnv) for e in envs)
    assert torch.compiler.config.cache_key_tag == tag and not verishape.compiler.switch.is_enabled()
    torch._dynamo.reset()
    before = len(frames.envs_for(_checked.__code__))
    torch.compile(_checked, backend="aot_eager", fullgraph=True)(torch.randn(5, 3), torch.tensor(2))
    assert len(frames.envs_for(_checked.__code__)) == before  # stock again: no VeriShapeEnv built


def test_enable_twice_and_disable_are_idempotent():
    verishape.enable()
    verishape.enable()
    verishape.disable()
    verishape.disable()
    assert not verishape.compiler.switch.is_enabled() and not frames._everywhere
