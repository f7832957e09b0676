"""``torch.compile(model, backend="verishape")``: the named backend found through the
``torch_dynamo_backends`` entry point, with verishape's behaviour and one-line refusals of
bad options."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

import verishape
from verishape.compiler import frames, registered
from verishape.core import torch_seam
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



def test_a_spec_given_to_torch_with_the_named_backend_is_said_to_be_torchs(caplog):
    """``torch.compile(backend="verishape", shapes_spec=...)`` outside ``verishape.enable()``:
    torch has applied its own reading of the spec before any backend is called, so one line
    (once per process) says whose reading it is and what gives verishape's.  Outputs are
    torch's own."""
    keyword = torch_seam.spec_keyword()  # shapes_spec in torch 2.13, dynamic_shapes from 2.14
    if keyword is None:
        pytest.skip(f"torch {torch.__version__}'s torch.compile takes no spec (torch 2.13 added it)")
    from torch.fx.experimental.dynamic_spec import ShapeVar, TensorSpec

    def double(x):
        return x * 2

    spec = {"x": TensorSpec([ShapeVar("batch", min=1, max=8), None])}
    compiled = torch.compile(double, backend="verishape", options={"backend": "aot_eager"}, **{keyword: spec})
    registered._said_torch_reads_the_spec = False
    with caplog.at_level("WARNING", logger="verishape"):
        for b in (2, 3, 5):
            x = torch.randn(b, 4)
            torch.testing.assert_close(compiled(x), double(x))
    said = [r.getMessage() for r in caplog.records if keyword in r.getMessage()]
    assert len(said) == 1 and "torch's own reading" in said[0] and f"verishape.compile(fn, {keyword}=...)" in said[0]
    assert "\n" not in said[0]
