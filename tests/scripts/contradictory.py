import torch

torch._dynamo.config.capture_scalar_outputs = True


def f(x):
    n = x[0].item()
    torch._check(n > 5)
    torch._check(n < 3)
    return torch.ones(n)


torch.compile(f, backend="eager", fullgraph=True)(torch.tensor([7]))
