"""A graph break inside a loop: Dynamo gives up on the whole frame and runs it eagerly,
so nothing was compiled (the size branch's guard belongs to an abandoned trace)."""
import torch


def f(x):
    for i in range(2):
        if x.shape[0] > 16:
            x = x * 2
        print("step", i)
    return x


x = torch.randn(20)
torch._dynamo.mark_dynamic(x, 0)
torch.compile(f, backend="eager")(x)
