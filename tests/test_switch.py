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


def test_enable_refuses_a_flag_that_is_not_a_bool():
    import pytest

    with pytest.raises(TypeError, match=r"^verishape.enable: widen_specializations='yes' must be True or False$"):
        verishape.enable(widen_specializations="yes")
    assert not verishape.compiler.switch.is_enabled()


def test_enable_twice_and_disable_are_idempotent():
    verishape.enable()
    verishape.enable()
    verishape.disable()
    verishape.disable()
    assert not verishape.compiler.switch.is_enabled() and not frames._everywhere


def _scaled(x):
    return (x * x.shape[0]).sin().sum(0)


def test_a_plain_torch_compile_is_widened_while_enabled():
    """The default backend named by a plain ``torch.compile`` runs inside verishape's: the
    batch-1 call after a generic compile runs that artifact, proved, and computes what eager
    does; with widening off it compiles at 1 as stock."""
    from torch._dynamo.utils import counters

    for widen, reused in ((True, 1), (False, 0)):
        torch._dynamo.reset()
        counters.clear()
        with verishape.enable(widen_specializations=widen):
            compiled = torch.compile(_scaled)  # what users run: Inductor
            for n in (4, 6, 1):
                x = torch.randn(n, 3)
                torch.testing.assert_close(compiled(x), _scaled(x))
            tag = torch.compiler.config.cache_key_tag
        assert counters["verishape"]["reused_at_size_1"] == reused
        assert tag.count("verishape-") == 1
    torch._dynamo.reset()


def test_a_verishape_frame_inside_enable_carries_one_verishape_tag():
    seen = []

    def spy(gm, inputs):
        seen.append(torch.compiler.config.cache_key_tag)
        return gm.forward

    torch._dynamo.reset()
    with torch.compiler.config.patch(cache_key_tag="mine"), verishape.enable():
        verishape.compile(lambda x: x + 1, backend=spy)(torch.ones(2))
        torch.compile(lambda x: x * 2, backend=spy)(torch.ones(2))
    assert seen == [f"mine+{backend.CACHE_TAG}"] * 2
    torch._dynamo.reset()
