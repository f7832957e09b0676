"""``y`` is one longer than ``x`` (torch replaces its size symbol by ``s0 + 1``): a
counterexample on ``x``'s size must rebuild ``y`` at that size plus one."""
import torch


def f(x, y):
    return x * 2 + y[1:]


x, y = torch.randn(4), torch.randn(5)
torch.compile(f, backend="eager", dynamic=True)(x, y)
