"""Strict export (Dynamo traces): the AUTO dim becomes even-only; a branch narrows it."""
import torch
from torch.export import Dim


class Pairs(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 2).sum(1)


ep = torch.export.export(Pairs(), (torch.randn(12),), dynamic_shapes={"x": {0: Dim.AUTO}}, strict=True)
print(ep.range_constraints)
