"""Two inputs that share the batch symbol (duck sizing): ``x`` is declared from batch 1 (by
``--assume``), ``mask`` is not.  A batch-1 counterexample must resize both."""
import torch


def f(x, mask):
    return (x * mask).sum(1)


x, mask = torch.randn(4, 3), torch.ones(4, 3)
torch.compile(f, backend="eager", dynamic=True)(x, mask)
