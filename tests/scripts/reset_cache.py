"""The script empties Dynamo's cache after compiling: the audited artifact is gone."""
import torch


def f(x):
    if x.shape[0] > 16:
        return x * 2
    return x + 1


x = torch.randn(20)
torch._dynamo.mark_dynamic(x, 0)
torch.compile(f, backend="eager")(x)
torch._dynamo.reset()
