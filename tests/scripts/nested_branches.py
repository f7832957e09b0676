"""Two nested branches on one size: ``x > 20`` implies ``x > 10``, so no input breaks
``x > 10`` alone."""
import torch


def f(x):
    if x.shape[0] > 10:
        if x.shape[0] > 20:
            return x * 2
        return x * 3
    return x + 1


x = torch.randn(30)
torch._dynamo.mark_dynamic(x, 0)
torch.compile(f, backend="eager")(x)
