import torch


def f(x):
    return x.view(-1, 2).sum(1)


x = torch.randn(8)
torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
print(torch.compile(f, backend="eager")(x).shape)
