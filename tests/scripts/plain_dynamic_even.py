import torch


def f(x):
    return x.view(-1, 2).sum(1)


x = torch.randn(8)
# dynamic=True and no mark_dynamic: nothing declared, so stock torch's [2, oo) applies.
print(torch.compile(f, backend="eager", dynamic=True)(x).shape)
