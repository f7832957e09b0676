import torch
import torch.fx.experimental._config as fx_config

# Backed sizes range over [0, oo) here, although torch still declares them positive.
fx_config.backed_size_oblivious = True


def f(x):
    blocks = (x.shape[0] + 3) // 4
    if blocks > 0:
        return x.sum() + blocks
    return x.sum() - 1


print(torch.compile(f, backend="eager", dynamic=True)(torch.ones(10)))
