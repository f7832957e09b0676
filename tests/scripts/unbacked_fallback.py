import torch

torch._dynamo.config.capture_scalar_outputs = True


def f(x):
    n = x[0].item()
    torch._check(n >= 0)
    y = torch.ones(n)
    return y.view(-1, 1).sum() + y.shape[0]


print(torch.compile(f, backend="eager", fullgraph=True)(torch.tensor([5])))
