"""The corpus's higher-order-op group: ``torch.cond`` branches, compared at 1 as graphs of their own.  Dynamo
passes a branch the symbols it reads as operands, and none at 1, where the size is a constant in the branch.
Registered into ``widen_corpus.CASES`` on import."""

from __future__ import annotations

import torch

from widen_corpus_base import case, rows


@case("higher-order op", rows)
def cond_on_values(x):
    return torch.cond(x.sum() > 0, lambda t: t.sin() * t.shape[0], lambda t: t.cos() + 1, (x,))


@case("higher-order op", rows)
def cond_branch_reduces(x):
    return torch.cond(x.sum() > 0, lambda t: t.sum(0, keepdim=True) + t, lambda t: t.mean(0, keepdim=True) - t, (x,))


@case("higher-order op", rows)
def cond_branch_empty_reduction(x):
    # the branch sums t[1:], no rows at 1: Inductor's size rule reads the branch's kernels too
    return torch.cond(x.sum() > -1e9, lambda t: t[1:].sum(0) + t[0], lambda t: t[0] * 2, (x,))


@case("higher-order op", rows)
def cond_branch_squeezes(x):
    # squeeze(0) keeps the batch for sizes from 2 and drops it at 1, where the softmax then runs over the
    # features: the branch's graph at 1 is another, with other values (refused however alike the outer graphs)
    return torch.cond(x.sum() > -1e9, lambda t: t.squeeze(0).softmax(0).reshape(t.shape), lambda t: t * 1, (x,))


@case("higher-order op", rows)
def cond_nested(x):
    # a branch holding a cond: the inner branch reads the batch its outer branch was passed
    def inner(t):
        return torch.cond(t.mean() > 0, lambda u: u * u.shape[0], lambda u: u - 1, (t,))
    return torch.cond(x.sum() > 0, inner, lambda t: t.cos(), (x,))


@case("higher-order op", rows, rows)
def cond_on_two_inputs(x, y):
    return torch.cond(x.sum() > y.sum(), lambda a, b: a + b.sum(0), lambda a, b: a - b.mean(0), (x, y))


@case("higher-order op", rows)
def cond_on_the_batch(x):
    # the predicate is a size: at 1 Dynamo inlines the branch it takes
    return torch.cond(x.shape[0] > 2, lambda t: t + 1, lambda t: t - 1, (x,))
