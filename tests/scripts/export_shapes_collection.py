"""A non-strict export whose sizes are declared with a ShapesCollection (keyed by tensor)."""
import torch
from torch.export import Dim, ShapesCollection


class Rows(torch.nn.Module):
    def forward(self, x):
        return x.mean(0)


x = torch.randn(4, 3)
shapes = ShapesCollection()
shapes[x] = {0: Dim("rows", min=3, max=16)}
ep = torch.export.export(Rows(), (x,), dynamic_shapes=shapes)
print(ep.module()(torch.randn(5, 3)).shape)
