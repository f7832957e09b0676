"""Realistic dynamic-shape programs for the guard benchmark, each with a fixed sweep of
input shapes (the first shape compiles; the rest exercise the dynamic graph)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    fn: Callable[..., torch.Tensor]
    shapes: list[tuple[int, ...]]
    dtype: torch.dtype = torch.float32

    def inputs(self, shape: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        g = torch.Generator().manual_seed(hash(shape) % (2**31))
        if self.dtype == torch.long:
            return (torch.randint(0, 100, shape, generator=g),)
        return (torch.randn(shape, generator=g),)


def head_split(x):
    b, t, d = x.shape
    return x.view(b, t, 4, d // 4).transpose(1, 2).reshape(b * 4, t, d // 4)


def head_merge(x):
    bh, t, d = x.shape
    return x.view(bh // 4, 4, t, d).transpose(1, 2).reshape(bh // 4, t, 4 * d)


def pixel_shuffle(x):
    return F.pixel_shuffle(x, 2)


def window_partition(x):
    b, h, w, c = x.shape
    x = x.view(b, h // 4, 4, w // 4, 4, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, 4, 4, c)


def view_chain(x):
    a, b = x.shape
    return x.reshape(a * b).view(-1, 2).reshape(a, b).t().contiguous().view(-1)


def split_chunk(x):
    parts = x.chunk(4, dim=1)
    return torch.cat([p * (i + 1) for i, p in enumerate(parts)], dim=1)


_conv = nn.Conv2d(3, 8, 3, padding=1).eval()


def conv_pool(x):
    with torch.no_grad():
        return F.max_pool2d(F.relu(_conv(x)), 2)


def pad_unfold(x):
    return F.pad(x, (1, 1)).unfold(1, 4, 2).sum(-1)


def narrow_offset(x):
    n = x.shape[0]
    return x.narrow(0, n // 4, n // 2) * 2


_emb = nn.Embedding(100, 32)
_ln = nn.LayerNorm(32)


def embed_norm(ids):
    with torch.no_grad():
        return _ln(_emb(ids))


def interpolate(x):
    return F.interpolate(x, scale_factor=2, mode="nearest")


_mlp = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)).eval()


def mlp(x):
    with torch.no_grad():
        return _mlp(x)


_w = torch.randn(32, 32)


def matmul_chain(x):
    y = x @ _w
    return (y @ y.transpose(-1, -2)) @ x


PROGRAMS = [
    Program("head_split", head_split, [(2, 6 + i, 16 * (1 + i % 3)) for i in range(10)]),
    Program("head_merge", head_merge, [(4 * (2 + i % 3), 5 + i, 8) for i in range(10)]),
    Program("pixel_shuffle", pixel_shuffle, [(2 + i % 2, 4 * (1 + i % 3), 4 + i, 4 + i) for i in range(10)]),
    Program("window_partition", window_partition, [(2 + i % 2, 8 + 4 * (i % 3), 8 + 4 * (i % 4), 3) for i in range(10)]),
    Program("view_chain", view_chain, [(4 + i, 6 + 2 * i) for i in range(10)]),
    Program("split_chunk", split_chunk, [(3 + i, 8 + 4 * i) for i in range(10)]),
    Program("conv_pool", conv_pool, [(2, 3, 8 + 2 * i, 10 + 2 * i) for i in range(10)]),
    Program("pad_unfold", pad_unfold, [(3 + i, 10 + 2 * i) for i in range(10)]),
    Program("narrow_offset", narrow_offset, [(8 + 4 * i, 5) for i in range(10)]),
    Program("embed_norm", embed_norm, [(2 + i % 3, 5 + i) for i in range(10)], dtype=torch.long),
    Program("interpolate", interpolate, [(2, 3, 5 + i, 6 + i) for i in range(10)]),
    Program("mlp", mlp, [(2 + 3 * i, 16) for i in range(10)]),
    Program("matmul_chain", matmul_chain, [(2 + i % 3, 3 + i, 32) for i in range(10)]),
]
