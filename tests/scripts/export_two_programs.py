"""A script that compiles one function and exports one module: two frames, two kinds."""
import torch
from torch.export import Dim


def double(x):
    return x * 2


class Halve(torch.nn.Module):
    def forward(self, x):
        return x / 2


x = torch.randn(8)
torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
torch.compile(double, backend="eager")(x)
torch.export.export(Halve(), (x,), dynamic_shapes={"x": {0: Dim("n", min=2, max=64)}}, strict=False)
