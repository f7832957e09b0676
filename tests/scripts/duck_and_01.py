import torch


def f(x, y):
    return x.sum() + y.sum() * 2


x, y = torch.randn(8), torch.randn(8)
torch._dynamo.mark_dynamic(x, 0, min=0, max=64)
torch._dynamo.mark_dynamic(y, 0, min=2, max=64)
print(torch.compile(f, backend="eager")(x, y))
