"""Dim.AUTO lets export narrow the batch size to what the program saw: > 16."""
import torch
from torch.export import Dim


class Head(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 16:
            return x[:16].sum(0)
        return x.sum(0)


ep = torch.export.export(Head(), (torch.randn(20, 4),), dynamic_shapes={"x": {0: Dim.AUTO}}, strict=False)
print(ep.range_constraints)
