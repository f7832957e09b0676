"""Checks on input sizes kept as runtime asserts (_assert_scalar) instead of guards."""
import torch
from torch.export import Dim


class Even(torch.nn.Module):
    def forward(self, x):
        torch._check(x.shape[0] % 2 == 0)
        return x * 2


ep = torch.export.export(Even(), (torch.randn(8),), dynamic_shapes={"x": {0: Dim("n", min=2, max=64)}},
                         strict=False, prefer_deferred_runtime_asserts_over_guards=True)
print(ep.graph_module.code)
