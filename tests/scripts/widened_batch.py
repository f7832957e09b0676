"""A batch dimension whose 0/1 specialization ``verishape.compile`` widens on a proof of
specialization equivalence: the call at batch 1 runs the generic artifact of ``f``."""
import sys

import torch

import verishape

WIDEN = "--no-widen" not in sys.argv  # the control: the same compile, not widened


def f(x):
    return x * 2 + 1


compiled = verishape.compile(f, backend="eager", dynamic=True, widen_specializations=WIDEN)
compiled(torch.randn(4, 3))
compiled(torch.randn(1, 3))
