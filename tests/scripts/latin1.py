# -*- coding: latin-1 -*-
"""A script saved in latin-1 (café): python runs it, so the audit must too."""
import torch


def f(x):
    return x * 2  # été


x = torch.randn(8)
torch._dynamo.mark_dynamic(x, 0)
print(torch.compile(f, backend="eager")(x).shape, "café")
