"""torch's own ``shapes_spec`` (unbacked symbols) with every guard dropped, as a server would
write it with stock ``torch.compile`` (issue 50): the audit reads the spec as the declared
space and replays the size-1 choice at an input size."""
import inspect

import torch
from torch.fx.experimental.dynamic_spec import ShapeVar, TensorSpec


def step(x):
    return (x * 2).sum(1) - x.shape[0]


batch = ShapeVar("batch", min=1, max=64)
# torch.compile's keyword for the spec: shapes_spec in torch 2.13, dynamic_shapes from 2.14
keyword = "shapes_spec" if "shapes_spec" in inspect.signature(torch.compile).parameters else "dynamic_shapes"
served = torch.compile(step, backend="eager", **{keyword: {"x": TensorSpec([batch, None])}},
                       options={"guard_filter_fn": torch.compiler.skip_all_guards_unsafe})
for n in (20, 24):
    served(torch.randn(n, 3))
