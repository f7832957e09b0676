"""The corpus's input-layout group (issue 38): a size -n is size n with the inputs in
another layout (``relaid``); a served decoder's KV cache is transposed on the first decode
step and contiguous after.  Registered into ``widen_corpus.CASES`` on import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from widen_corpus_base import _randn, case, cube, image

# A size -n is size n with the inputs in another layout (``relaid``): a served decoder's KV
# cache is transposed on the first decode step and contiguous after.  The sweep compiles
# generic, then misses on a layout (-4), serves a later size in it (-5), and size 1 in both.

RELAID_SWEEP = (3, 4, -4, -5, 1, -1)


def _relaid(*shapes: Callable[[int], tuple[int, ...]], order: tuple[int, ...] | None = None
            ) -> Callable[[int], list[Any]]:
    """Inputs at size |n|; at n >= 0 laid out in ``order`` (default: the last two dimensions
    swapped, as a projection viewed per head), at n < 0 contiguous; fresh tensors, not views."""
    def make(n: int) -> list[Any]:
        values = _randn(*shapes)(abs(n))
        if n < 0:
            return values
        out = []
        for v in values:
            o = order or (*range(v.dim() - 2), v.dim() - 1, v.dim() - 2)
            out.append(torch.empty_permuted(v.shape, o).copy_(v) if v.dim() >= 2 else v)
        return out
    return make


def heads(n: int) -> tuple[int, ...]:
    return (n, 2, 5, 4)


def step_token(n: int) -> tuple[int, ...]:
    return (n, 2, 1, 4)


@case("relayout", make=_relaid(heads, step_token, step_token, order=(0, 2, 1, 3)), sweep=RELAID_SWEEP)
def kv_cache_step(cache, new, q):
    keys = torch.cat([cache, new], dim=-2)
    return F.scaled_dot_product_attention(q, keys, keys), keys


@case("relayout", make=_relaid(heads), sweep=RELAID_SWEEP)
def relaid_pointwise(x):
    return x * 2 + 1


@case("relayout", make=_relaid(heads), sweep=RELAID_SWEEP)
def relaid_reduction(x):
    return x.sum(-1) + x.amax(-1) * x.mean(1, keepdim=True).sum(-1)


@case("relayout", make=_relaid(cube, lambda n: (4, 5)), sweep=RELAID_SWEEP)
def relaid_matmul(x, w):
    return x @ w


@case("relayout", make=_relaid(image, order=(0, 2, 3, 1)), sweep=RELAID_SWEEP)
def relaid_channels_last_conv(x):
    return F.conv2d(x, torch.ones(2, 3, 3, 3) / 27, padding=1)


@case("relayout", make=_relaid(heads), sweep=RELAID_SWEEP)
def relaid_flatten(x):
    return x.flatten(1) * 3  # a view of a contiguous input, a copy of a transposed one


@case("relayout", make=_relaid(heads), sweep=RELAID_SWEEP)
def relaid_mutates(x):
    x.mul_(2)  # the caller sees the write: never run on a copy
    return x.sum(-1)


@case("relayout", make=_relaid(heads), sweep=RELAID_SWEEP)
def relaid_returns_view(x):
    return x[:, 0], x.sum()  # the caller gets the input's storage back: never a copy's


@case("relayout", make=_relaid(heads), sweep=RELAID_SWEEP)
def relaid_reads_storage(x):
    return x.as_strided((x.shape[0], 4), (1, 1)) * 2  # storage positions: the layout decides the values
