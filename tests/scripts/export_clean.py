"""A non-strict export whose range constraints are exactly the declared Dim range."""
import torch
from torch.export import Dim


class Scale(torch.nn.Module):
    def forward(self, x, y):
        return (x * 2).sum(1) + y


batch = Dim("batch", min=2, max=64)
ep = torch.export.export(Scale(), (torch.randn(8, 3), torch.randn(8)),
                         dynamic_shapes={"x": {0: batch}, "y": {0: batch}}, strict=False)
print(ep.module()(torch.randn(5, 3), torch.randn(5)).shape)
