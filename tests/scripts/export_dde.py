"""An undecidable data-dependent branch: export fails, the audit reports it."""
import torch
from torch.export import Dim


class Branch(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 3:
            return x[:3]
        return x[:1]


torch.export.export(Branch(), (torch.randn(8), torch.tensor(5)), dynamic_shapes={"x": {0: Dim("b", min=4, max=64)},
                                                                                 "n": None}, strict=False)
