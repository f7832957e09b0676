import torch


def f(x, y):
    return (x * 2).sum(0) + y


x = torch.randn(8, 4)
torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
print(torch.compile(f, backend="eager")(x, torch.ones(4)).shape)
