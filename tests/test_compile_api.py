"""verishape.compile: a drop-in for torch.compile, with per-frame ShapeEnv selection."""

from __future__ import annotations

import threading

import pytest
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import verishape
from compile_helpers import capturing, is_dde
from verishape.compiler import CACHE_TAG, is_verishape_backend
from verishape.core.shape_env import VeriShapeEnv


@pytest.fixture(autouse=True)
def _dynamo_config():
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield
    torch._dynamo.reset()


def needs_proof(x):
    a, b = x[0].item(), x[1].item()
    torch._check(a >= 0)
    torch._check(b >= 1)
    if a * b >= a:
        return torch.ones(a) * b
    return torch.zeros(1)


def test_bare_decorator_and_arguments():
    @verishape.compile
    def f(x):
        return x * 2

    @verishape.compile(backend="eager", dynamic=True)
    def g(x):
        return x + 1

    x = torch.arange(4.0)
    assert torch.equal(f(x), x * 2) and torch.equal(g(x), x + 1)


def test_module_and_disable():
    m = torch.nn.Linear(3, 2)
    cm = verishape.compile(m, backend="eager")
    x = torch.ones(2, 3)
    assert torch.allclose(cm(x), m(x))
    off = verishape.compile(needs_proof, disable=True)
    assert torch.equal(off(torch.tensor([2, 3])), needs_proof(torch.tensor([2, 3])))


def test_compiler_config_is_stocks():
    """``get_compiler_config()`` (torch's public API on what ``torch.compile`` returns) answers
    the Inductor config, mode and options included, as stock's does: a drop-in."""
    def f(x):
        return x + 1

    module = torch.nn.Linear(2, 2)
    for kwargs in ({}, {"mode": "max-autotune-no-cudagraphs"}, {"options": {"max_autotune": True}}):
        for model in (f, module):
            theirs = torch.compile(model, **kwargs).get_compiler_config()
            ours = verishape.compile(model, **kwargs).get_compiler_config()
            assert isinstance(theirs, dict) and ours == theirs
    assert verishape.compile(f, backend="aot_eager").get_compiler_config() is None  # as stock's


def test_bad_model_is_a_clear_error():
    with pytest.raises(TypeError, match="must be a function or nn.Module"):
        verishape.compile(42)


def test_same_function_both_ways_alternately():
    stock_envs, vs_envs = [], []
    plain = torch.compile(needs_proof, backend=capturing(stock_envs), fullgraph=True, dynamic=True)
    proved = verishape.compile(needs_proof, backend=capturing(vs_envs), fullgraph=True, dynamic=True)
    for v in ([3, 2], [5, 1], [0, 4]):
        x = torch.tensor(v)
        with pytest.raises(Exception) as info:
            plain(x)
        assert is_dde(info.value)
        assert torch.equal(proved(x), needs_proof(x))
    assert vs_envs and all(type(e) is VeriShapeEnv for e in vs_envs)
    # The stock frames never reached the backend (they failed while tracing); check the
    # class with a stock program that does compile.
    ok = torch.compile(lambda x: x * 2, backend=capturing(stock_envs), dynamic=True)
    ok(torch.ones(3))
    assert stock_envs and all(type(e) is ShapeEnv for e in stock_envs)


def test_graph_break_into_plain_torch_compile_keeps_stock_shape_env():
    inner_envs, outer_envs = [], []

    @torch.compile(backend=capturing(inner_envs), dynamic=True)
    def inner(x):
        return x.sum() + x.shape[0]

    @verishape.compile(backend=capturing(outer_envs), dynamic=True)
    def outer(x):
        y = x * 2
        torch._dynamo.graph_break()
        return inner(y) + 1

    x = torch.arange(5.0)
    assert torch.equal(outer(x), inner(x * 2) + 1)
    assert inner_envs and all(type(e) is ShapeEnv for e in inner_envs)
    assert outer_envs and all(type(e) is VeriShapeEnv for e in outer_envs)


@pytest.fixture
def restore_dynamo_config():
    """Concurrent compiles with ``dynamic=True`` enter and leave Dynamo's config patches out
    of order; on torch 2.11 that can leave ``assume_static_by_default`` flipped for every
    later test (a torch quirk).  Put back every entry this test changed."""
    config = torch._dynamo.config
    before = config.get_config_copy()
    yield
    after = config.get_config_copy()
    for key, value in before.items():
        if after.get(key) != value:
            setattr(config, key, value)


def test_other_threads_keep_stock_shape_env(restore_dynamo_config):
    plain_envs, vs_envs = [], []
    plain = torch.compile(lambda x: x.cos() * x.shape[0], backend=capturing(plain_envs), dynamic=True)
    proved = verishape.compile(lambda x: x.sin() * x.shape[0], backend=capturing(vs_envs), dynamic=True)
    errors: list[BaseException] = []

    def worker():
        try:
            for n in range(3, 6):
                plain(torch.ones(n))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    th = threading.Thread(target=worker)
    th.start()
    for n in range(3, 6):
        proved(torch.ones(n))
    th.join()
    assert not errors
    assert plain_envs and all(type(e) is ShapeEnv for e in plain_envs)
    assert vs_envs and all(type(e) is VeriShapeEnv for e in vs_envs)


def test_backend_chain_detection():
    seen = {}

    def spy(gm, inputs):
        seen["tag"] = torch.compiler.config.cache_key_tag
        return gm.forward

    verishape.compile(lambda x: x + 1, backend=spy)(torch.ones(2))
    assert seen["tag"] == CACHE_TAG  # set while the backend compiles: caches stay apart
    torch._dynamo.reset()
    torch.compile(lambda x: x + 1, backend=spy)(torch.ones(2))
    assert seen["tag"] == ""
    assert not is_verishape_backend(spy) and not is_verishape_backend(None)
    # another setting of the compile's own: other keys (the settings' digest is in the tag)
    tags = set()
    for flags in ({"widen_specializations": False}, {"generic_recompiles": False}):
        torch._dynamo.reset()
        verishape.compile(lambda x: x + 1, backend=spy, **flags)(torch.ones(2))
        assert seen["tag"].startswith(CACHE_TAG + "-settings-")
        tags.add(seen["tag"])
    assert len(tags) == 2
    torch._dynamo.reset()


@pytest.mark.slow
def test_inductor_caches_never_cross(tmp_path, monkeypatch):
    """A stock Inductor artifact is not served to verishape (and vice versa), while
    each side still hits its own cache."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    from torch._inductor import config as inductor_config

    def f(x):
        return (x * 3).relu() + x.shape[0]

    x = torch.randn(8)

    def compile_and_count(compile_fn):
        torch._dynamo.reset()
        counters.clear()
        with inductor_config.patch(fx_graph_cache=True, fx_graph_remote_cache=False):
            out = compile_fn(f, dynamic=True)(x)
        return out, counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]

    _, hit, miss = compile_and_count(torch.compile)
    assert miss == 1 and hit == 0
    out, hit, miss = compile_and_count(verishape.compile)
    assert (hit, miss) == (0, 1)  # the stock entry was not served
    assert torch.allclose(out, f(x))
    _, hit, miss = compile_and_count(verishape.compile)
    assert (hit, miss) == (1, 0)
    _, hit, miss = compile_and_count(torch.compile)
    assert (hit, miss) == (1, 0)
