"""The corpus's building blocks (``tests/widen_corpus.py`` and its groups in other files):
a case, its inputs at size n, and the registry the groups add to."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

SWEEP = (3, 4, 1, 5, 1)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    group: str
    fn: Callable[..., Any]
    #: shapes of the inputs at size n (float tensors, seeded by n), or a full maker
    make: Callable[[int], list[Any]]
    sweep: tuple[int, ...] = SWEEP


def _randn(*shapes: Callable[[int], tuple[int, ...]]) -> Callable[[int], list[Any]]:
    def make(n: int) -> list[Any]:
        g = torch.Generator().manual_seed(100 + n)
        return [torch.randn(*s(n), generator=g) for s in shapes]
    return make


def rows(n: int) -> tuple[int, ...]:
    return (n, 4)


def seq(n: int) -> tuple[int, ...]:
    return (2, n, 4)


def cube(n: int) -> tuple[int, ...]:
    return (n, 3, 4)


def image(n: int) -> tuple[int, ...]:
    return (n, 3, 6, 6)


CASES: list[Case] = []


def case(group: str, *shapes: Callable[[int], tuple[int, ...]], sweep: tuple[int, ...] = SWEEP,
         make: Callable[[int], list[Any]] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        CASES.append(Case(fn.__name__, group, fn, make or _randn(*shapes), sweep))
        return fn
    return register
