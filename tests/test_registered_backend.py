"""``torch.compile(model, backend="verishape")``: the named backend found through the
``torch_dynamo_backends`` entry point, with verishape's behaviour and one-line refusals of
bad options."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

import verishape
from verishape.compiler import frames, registered
from verishape.core.shape_env import VeriShapeEnv


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def test_dynamo_lists_and_finds_it_by_name():
    from torch._dynamo.backends.registry import lookup_backend

    assert "verishape" in torch._dynamo.list_backends()
    assert lookup_backend("verishape") is registered.verishape_backend


@pytest.mark.parametrize("options,named", [({"backend": "tvm"}, "options['backend']='tvm'"),
                                           ({"widen_specializations": "yes"}, "widen_specializations"),
                                           ({"backend": "aot_eager", "max_autotune": True}, "max_autotune")])
def test_a_bad_option_is_refused_in_one_line_naming_it(options, named):
    with pytest.raises(registered.BadOption) as info:
        registered._settings(None, options)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_its_options_choose_the_inner_backend_and_widening():
    b = registered._backend(None, {"backend": "aot_eager", "widen_specializations": False})
    assert b.__name__ == "aot_eager" and b._widen is False
    assert registered._backend(None, {"backend": "aot_eager", "widen_specializations": False}) is b  # built once
    assert registered._backend("max-autotune-no-cudagraphs", None).__name__ == "inductor"


def _rows(x):
    return x * 2 + x.sum(1, keepdim=True)


@pytest.mark.parametrize("options", [{"backend": "aot_eager"}, None])
def test_frames_reason_with_verishape_and_batch_1_reuses(options):
    compiled = torch.compile(_rows, backend="verishape", options=options)
    # A generic graph served from torch's caches (warm from an earlier run of this test on
    # the machine) was lowered out of sight and is, rightly, not reused: compile it here.
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        for b in (2, 3, 1):
            x = torch.randn(b, 4)
            torch.testing.assert_close(compiled(x), _rows(x))
    envs = frames.envs_for(_rows.__code__)
    assert envs and all(isinstance(e, VeriShapeEnv) for e in envs)
    assert counters["verishape"]["reused_at_size_1"] == 1
    assert "frame" in verishape.explain(_rows)


def test_a_bad_option_stops_the_first_compile_with_its_line():
    compiled = torch.compile(_rows, backend="verishape", options={"backend": "tvm"})
    with pytest.raises(Exception, match=r"options\['backend'\]='tvm' is not an inner backend"):
        compiled(torch.randn(2, 4))
