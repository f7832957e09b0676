import torch

torch._dynamo.config.capture_scalar_outputs = True


def f(x):
    a, b = x[0].item(), x[1].item()
    torch._check(a >= 0)
    torch._check(b >= 0)
    torch._check(a * b > 100)
    torch._check(a <= 5)
    torch._check(b <= 5)
    return torch.ones(a) * b


compiled = torch.compile(f, backend="eager", fullgraph=True)
try:
    compiled(torch.tensor([6, 20]))
except RuntimeError:
    pass  # the runtime asserts reject every input: that is the point of this script
