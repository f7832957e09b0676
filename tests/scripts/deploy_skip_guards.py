"""One graph for all shapes: compiled once at size 20, then served without guards."""
import torch


def f(x):
    if x.shape[0] > 16:
        return x * 2
    return x + 1


x = torch.randn(20)
torch._dynamo.mark_dynamic(x, 0)
compiled = torch.compile(f, backend="eager")
compiled(x)
