import torch


def g(x):
    if x.shape[0] > 4:
        return x.view(-1, 2) * 2
    return x + 1


def h(y):
    return y.reshape(y.shape[0] // 2, 2).sum(1)


a = torch.randn(8)
torch._dynamo.mark_dynamic(a, 0)
print(torch.compile(g, backend="eager")(a).shape)
b = torch.randn(10)
torch._dynamo.mark_dynamic(b, 0)
print(torch.compile(h, backend="eager")(b).shape)
