"""A server's pattern (vLLM's): one compile over a declared batch, every guard dropped, so
the graph traced at 20 serves every batch the server sends (issue 50)."""
import torch
import verishape
from torch.fx.experimental.dynamic_spec import ShapeVar, TensorSpec


def step(x):
    if x.shape[0] > 16:
        return x * 2
    return x - 1


batch = ShapeVar("batch", min=1, max=64)
served = verishape.compile(step, shapes_spec={"x": TensorSpec([batch, None])},
                           options={"guard_filter_fn": torch.compiler.skip_all_guards_unsafe})
for n in (20, 24):
    served(torch.randn(n, 3))
