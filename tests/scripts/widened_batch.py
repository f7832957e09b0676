"""A batch dimension whose 0/1 specialization ``verishape.compile`` widens on a proof of
specialization equivalence: the size-1 trace of ``f`` equals its generic graph."""
import sys

import torch

import verishape

WIDEN = "--no-widen" not in sys.argv  # the control: the same compile, not widened


def f(x):
    return x * 2 + 1


x = torch.randn(4, 3)

verishape.compile(f, backend="eager", dynamic=True, widen_specializations=WIDEN)(x)
