"""mark_dynamic without min/max, stored as torch 2.15 stores it: only the dimension's index
in ``_dynamo_dynamic_indices``, no ``_dynamo_dynamic_range`` entry (torch 2.11-2.13 add
one with min=max=None; the entry is dropped here so every torch shows the 2.15 case)."""
import torch


def f(x):
    return (x * 2).sum(0)


x = torch.randn(8, 4)
torch._dynamo.mark_dynamic(x, 0)
if hasattr(x, "_dynamo_dynamic_range"):
    del x._dynamo_dynamic_range
print(torch.compile(f, backend="eager")(x).shape)
