"""A graph break before the size branch: the branch is compiled in a resume frame."""
import torch


def f(x):
    print("tracing stops here")
    if x.shape[0] > 16:
        return x * 2
    return x + 1


x = torch.randn(30)
torch._dynamo.mark_dynamic(x, 0)
torch.compile(f, backend="eager")(x)
