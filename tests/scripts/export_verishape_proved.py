"""verishape.export of a program stock export refuses: u0 * s0 == 10 and s0 >= 3 give u0 <= 5."""
import torch
from torch.export import Dim

import verishape


class Take(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k * x.shape[0] == 10)
        if k <= 5:
            return x.sum() + torch.ones(5)[:k]
        return torch.zeros(1)


ep = verishape.export(Take(), (torch.randn(5), torch.tensor(2)),
                      dynamic_shapes={"x": {0: Dim("s", min=3, max=100)}, "n": None})
print(ep.module()(torch.randn(5), torch.tensor(2)))
