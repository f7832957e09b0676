import torch


def f(x, y):
    return x.sum() + y.sum() * 2


print(torch.compile(f, backend="eager", dynamic=True)(torch.randn(8), torch.randn(8)))
