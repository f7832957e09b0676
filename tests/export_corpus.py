"""Export corpus: small modules written after the patterns of PyTorch's "dynamic shapes" and
"data-dependent" export docs, exportdb-style examples and issue threads (no code copied).

Each program asks shape questions about ``.item()`` / ``.tolist()`` / ``.nonzero()`` values
and input sizes.  ``provable``: the ``torch._check`` facts and the declared ``Dim`` ranges
decide every question (stock export may still fail with a data-dependent error when SymPy
cannot combine them); otherwise an undecidable control, which must fail with stock's
data-dependent error under both exporters.  ``bad`` inputs break one of the user's own
``torch._check`` facts: eager raises, and so must the exported program.

A stock exported program accepts sizes 0 and 1 whatever the ``Dim`` says; a program from
``verishape.export`` checks every declared bound in its graph, so a declared ``min`` of 1 or 2
is a fact there (``sum_below_size_min2``), and a ``Dim.AUTO`` size's traced ``>= 1`` or ``>= 2``
is one once the program checks it (``auto_*``).  ``suggest``: for a control, the
``torch._check`` a user would add (what ``verishape.export``'s error is expected to name).
Shared by ``tests/test_export_corpus.py`` and ``benchmarks/export_corpus.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch.export import Dim


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    module: type[torch.nn.Module]
    inputs: tuple[tuple[Any, ...], ...]
    dynamic_shapes: Any
    facts: str  # the reasoning the questions need
    after: str  # what it was written after
    provable: bool = True
    bad: tuple[tuple[Any, ...], ...] = ()
    #: controls: does the undecided ``if`` only raise on one side (a validation)?
    validation: bool = False


def v(n: int, *more: int) -> torch.Tensor:
    """A float input of size (n, *more) with fixed values."""
    g = torch.Generator().manual_seed(n * 131 + sum(more))
    return torch.randn(n, *more, generator=g)


def i(*values: int) -> torch.Tensor:
    """Integers in one 1-d tensor (read with ``.tolist()``) or a 0-d one (``.item()``)."""
    return torch.tensor(values[0]) if len(values) == 1 else torch.tensor(values)


# ---------------------------------------------------------------- nonlinear facts


class MulEqBound(torch.nn.Module):
    """u0 * s0 == 10 and s0 >= 3 give u0 <= 3 < 5."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k * x.shape[0] == 10)
        if k <= 5:
            return x.sum() + torch.ones(5)[:k]
        return torch.zeros(1)


class MulEqBoundLoose(MulEqBound):
    """Control: with sizes 0 and 1 accepted, u0 can be 10."""


class ProductCap(torch.nn.Module):
    """0 <= a, b <= 8 give a * b <= 64."""

    def forward(self, x, t):
        a, b = t.tolist()
        torch._check(0 <= a)
        torch._check(a <= 8)
        torch._check(0 <= b)
        torch._check(b <= 8)
        if a * b <= 64:
            return x[: a + b] * 2
        return x


class SquareBound(torch.nn.Module):
    """0 <= u0 <= 10 gives u0 * u0 <= 100."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= 10)
        if k * k <= 100:
            return torch.full((k,), 2.0) + x.sum()
        return x


class SquareUnbounded(torch.nn.Module):
    """Control: u0 * u0 <= 100 with only u0 >= 0."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        if k * k <= 100:
            return torch.full((k,), 2.0) + x.sum()
        return x


class ScaledRows(torch.nn.Module):
    """u0 * 4 == s0 makes x.view(u0, 4) valid; u0 >= 1 from s0 >= 4."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k * 4 == x.shape[0])
        if k >= 1:
            return x.view(k, 4).sum(1)
        return x


# ---------------------------------------------------------------- linear facts with sizes


class SumBelowSize(torch.nn.Module):
    """u0 + s_a <= s_b and s_a >= 3 give u0 < s_b."""

    def forward(self, a, b, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k + a.shape[0] <= b.shape[0])
        if k < b.shape[0]:
            return b[:k] + 1
        return b


class SumBelowSizeMin2(SumBelowSize):
    """s_a >= 2 is declared (Dim min=2): a fact once the program checks it, u0 < s_b."""


class AutoProductBound(torch.nn.Module):
    """u0 * s0 <= 10 gives u0 <= 10 once s0 >= 1: with Dim.AUTO, a traced fact the program
    must check to rely on."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k * x.shape[0] <= 10)
        if k <= 10:
            return x * k
        return x


class AutoPairs(torch.nn.Module):
    """u0 * (s0 - 1) <= 8 gives u0 <= 8 once s0 >= 2 (Dim.AUTO's traced bound)."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k * (x.shape[0] - 1) <= 8)
        if k <= 8:
            return x[:1] * k
        return x[:1]


class ValidateCount(torch.nn.Module):
    """Control: a validation (``if ...: raise``) of a count against the input's size."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        if k > x.shape[0]:
            raise ValueError("count larger than the input")
        return x[:k] * 2


class ValidateRange(torch.nn.Module):
    """Control: a validation of a window read from the data."""

    def forward(self, x, t):
        start, stop = t.tolist()
        if start < 0 or stop > x.shape[0] or start > stop:
            raise IndexError("window out of range")
        return x[start:stop].sum()


class OffsetWindow(torch.nn.Module):
    """start + width <= s0 and width >= 3 give start + 2 < s0."""

    def forward(self, x, t):
        start, width = t.tolist()
        torch._check(start >= 0)
        torch._check(width >= 3)
        torch._check(start + width <= x.shape[0])
        if start + 2 < x.shape[0]:
            return x.narrow(0, start, width)
        return x[:1]


class HalfSize(torch.nn.Module):
    """2 * u0 <= s0 gives u0 < s0 for s0 >= 3."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(2 * k <= x.shape[0])
        if k < x.shape[0]:
            return x[:k] * 3
        return x


class PrefixOfTwo(torch.nn.Module):
    """u0 <= s_x and s_x <= s_y (a declared derived size) give u0 <= s_y."""

    def forward(self, x, y, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        torch._check(x.shape[0] <= y.shape[0])
        if k <= y.shape[0]:
            return y[:k] + 1
        return y


# ---------------------------------------------------------------- chains of unbacked values


class Chain3(torch.nn.Module):
    """u0 <= u1 <= u2 gives u0 <= u2."""

    def forward(self, x, t):
        a, b, c = t.tolist()
        torch._check(a >= 0)
        torch._check(a <= b)
        torch._check(b <= c)
        if a <= c:
            return x * a
        return x


class Chain3Gap(torch.nn.Module):
    """Control: a <= b and c >= 0 say nothing of a <= c."""

    def forward(self, x, t):
        a, b, c = t.tolist()
        torch._check(a >= 0)
        torch._check(a <= b)
        torch._check(c >= 0)
        if a <= c:
            return x * a
        return x


class Chain4Strict(torch.nn.Module):
    """a < b < c < d gives d - a >= 3."""

    def forward(self, x, t):
        a, b, c, d = t.tolist()
        torch._check(a < b)
        torch._check(b < c)
        torch._check(c < d)
        if d - a >= 3:
            return x + d - a
        return x


class SumOfParts(torch.nn.Module):
    """z2 + z3 == z1 answers z1 - z2 == z3 (written after a PR thread on _check symmetry)."""

    def forward(self, y, t):
        z1, z2, z3 = t.tolist()
        torch._check(z2 + z3 == z1)
        if z1 - z2 == z3:
            return y * 2
        return y + 3


class TotalPositive(torch.nn.Module):
    """u0 + u1 + u2 > 1 decides that the total is nonzero (after an issue on three symbols)."""

    def forward(self, x, t):
        a, b, c = t.tolist()
        torch._check(a >= 0)
        torch._check(b >= 0)
        torch._check(c >= 0)
        total = a + b + c
        torch._check(total > 1)
        if total != 0:
            return x.sum() * torch.ones(total)
        return x


class TotalUnknown(torch.nn.Module):
    """Control: nothing bounds the total away from 3."""

    def forward(self, x, t):
        a, b, c = t.tolist()
        torch._check(a >= 0)
        torch._check(b >= 0)
        torch._check(c >= 0)
        if a + b + c == 3:
            return x * 3
        return x


# ---------------------------------------------------------------- nonzero, split, slicing


class NonzeroNarrow(torch.nn.Module):
    """The count of nonzero entries is at most the mask length (a stated fact; torch keeps no
    upper bound for the count of a symbolic-size mask): u0 <= s0 answers u0 < s0 + 1."""

    def forward(self, x, mask):
        n = mask.nonzero().shape[0]
        torch._check(n <= mask.shape[0])
        if n < mask.shape[0] + 1:
            return x[:n] * 2
        return x


class NonzeroHalf(torch.nn.Module):
    """At most half the entries are set (a user fact): 2 * u0 <= s0 < 2 * s0."""

    def forward(self, x, mask):
        n = mask.nonzero().shape[0]
        torch._check(2 * n <= x.shape[0])
        if 2 * n < 2 * x.shape[0]:
            return x[:n] + 1
        return x


class SplitTolist(torch.nn.Module):
    """Split by sizes read with tolist that sum to the input's size."""

    def forward(self, x, t):
        a, b = t.tolist()
        torch._check(a >= 0)
        torch._check(b >= 0)
        torch._check(a + b == x.shape[0])
        first, second = x.split([a, b])
        if a <= x.shape[0]:
            return first.sum() + second.sum()
        return x.sum()


class SliceBetween(torch.nn.Module):
    """x[i:j] with 0 <= i <= j <= s0: the slice has j - i rows."""

    def forward(self, x, t):
        lo, hi = t.tolist()
        torch._check(lo >= 0)
        torch._check(lo <= hi)
        torch._check(hi <= x.shape[0])
        part = x[lo:hi]
        if part.shape[0] <= x.shape[0]:
            return part * 2
        return x


class ItemView(torch.nn.Module):
    """A row count k with k * 3 == s0 reshapes x as (k, 3)."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k * 3 == x.shape[0])
        return x.view(k, 3).sum(0)


class ChunkTolist(torch.nn.Module):
    """Three chunk lengths that sum to s0, each at least 1: the last chunk is nonempty."""

    def forward(self, x, t):
        a, b, c = t.tolist()
        torch._check(a >= 1)
        torch._check(b >= 1)
        torch._check(c >= 1)
        torch._check(a + b + c == x.shape[0])
        parts = x.split([a, b, c])
        if parts[2].shape[0] > 0:
            return parts[2] * 2
        return parts[0]


class MaxPosition(torch.nn.Module):
    """A rotary-cache length from positions (after a Phi-3 export thread): the user bounds it."""

    def forward(self, x, pos):
        seq = pos.max().item() + 1
        torch._check(seq >= 1)
        torch._check(seq <= 64)
        if seq > 128:
            return x * 0
        return x[:, :seq].sum(1)


class MaxPositionOpen(torch.nn.Module):
    """Control: no bound on the length, so seq > 128 is open."""

    def forward(self, x, pos):
        seq = pos.max().item() + 1
        torch._check(seq >= 1)
        if seq > 128:
            return x * 0
        return x.sum(1)


class FloorDivBound(torch.nn.Module):
    """u0 <= 4 * s0 gives u0 // 4 <= s0."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= 4 * x.shape[0])
        if k // 4 <= x.shape[0]:
            return x[: k // 4] + 1
        return x


class ModRows(torch.nn.Module):
    """u0 % 8 == 0 and u0 >= 8 give u0 >= 8 > 4 (decided from the remainder fact)."""

    def forward(self, x, n):
        k = n.item()
        torch._check(k % 8 == 0)
        torch._check(k >= 8)
        torch._check(k <= x.shape[0])
        if k > 4:
            return x[:k].view(-1, 8).sum(1)
        return x


class RepeatCounts(torch.nn.Module):
    """repeat_interleave by counts that sum to s0: the output has s0 rows."""

    def forward(self, x, counts):
        total = counts.sum().item()
        torch._check(total == x.shape[0])
        torch._check(counts.shape[0] >= 1)
        out = torch.repeat_interleave(torch.arange(counts.shape[0]), counts, output_size=total)
        if out.shape[0] == x.shape[0]:
            return x + out
        return x


class MaskedCount(torch.nn.Module):
    """The selected count is at most the input's size (a stated fact)."""

    def forward(self, x):
        picked = x[x > 0]
        n = picked.shape[0]
        torch._check(n <= x.shape[0])
        if n <= x.shape[0]:
            return picked.sum() + n
        return x.sum()


def _b(n: int) -> torch.Tensor:
    return torch.tensor([k % 2 == 0 for k in range(n)])


def _half(n: int) -> torch.Tensor:
    return torch.tensor([k % 3 == 0 for k in range(n)])


S3 = Dim("s", min=3, max=256)
S1 = Dim("s1", min=1, max=256)
A3 = Dim("a", min=3, max=64)
A2 = Dim("a2", min=2, max=64)
B = Dim("b", min=3, max=256)

PROGRAMS: tuple[Program, ...] = (
    Program("mul_eq_bound", MulEqBound, ((v(5), i(2)), (v(10), i(1)), (v(5), i(2)), (v(10), i(1))),
            {"x": {0: S3}, "n": None}, "u0*s0 == 10, s0 >= 3 -> u0 <= 5", "data-dependent docs",
            bad=((v(5), i(3)),)),
    Program("mul_eq_bound_loose", MulEqBoundLoose, ((v(5), i(2)), (v(2), i(5))),
            {"x": {0: Dim("s", min=1, max=256)}, "n": None}, "s0 may be 1: u0 up to 10", "data-dependent docs",
            provable=False),
    Program("product_cap", ProductCap, ((v(20), i(2, 3)), (v(20), i(8, 8)), (v(20), i(0, 5))),
            {"x": {0: Dim("s", min=16, max=256)}, "t": None}, "a, b in [0, 8] -> a*b <= 64", "exportdb (cond on item)",
            bad=((v(20), i(9, 1)),)),
    Program("square_bound", SquareBound, ((v(4), i(3)), (v(6), i(10)), (v(4), i(0))),
            {"x": {0: S3}, "n": None}, "0 <= u0 <= 10 -> u0^2 <= 100", "data-dependent docs",
            bad=((v(4), i(11)),)),
    Program("square_unbounded", SquareUnbounded, ((v(4), i(3)), (v(4), i(20))),
            {"x": {0: S3}, "n": None}, "no upper bound", "data-dependent docs", provable=False),
    Program("scaled_rows", ScaledRows, ((v(8), i(2)), (v(12), i(3)), (v(16), i(4))),
            {"x": {0: Dim("s", min=4, max=256)}, "n": None}, "4*u0 == s0, s0 >= 4 -> u0 >= 1",
            "dynamic shapes docs (view)", bad=((v(8), i(3)),)),
    Program("sum_below_size", SumBelowSize, ((v(3), v(10), i(4)), (v(5), v(9), i(4)), (v(3), v(3), i(0))),
            {"a": {0: A3}, "b": {0: B}, "n": None}, "u0 + s_a <= s_b, s_a >= 3 -> u0 < s_b", "issue threads",
            bad=((v(3), v(5), i(4)),)),
    Program("sum_below_size_min2", SumBelowSizeMin2, ((v(3), v(10), i(4)), (v(2), v(6), i(4))),
            {"a": {0: A2}, "b": {0: B}, "n": None}, "u0 + s_a <= s_b, s_a >= 2 (declared, checked) -> u0 < s_b",
            "issue threads", bad=((v(2), v(5), i(4)),)),
    Program("auto_product_bound", AutoProductBound, ((v(5), i(2)), (v(1), i(10)), (v(3), i(0))),
            {"x": {0: Dim.AUTO}, "n": None}, "u0 * s0 <= 10, s0 >= 1 (traced, checked) -> u0 <= 10",
            "data-dependent docs (Dim.AUTO)", bad=((v(5), i(3)),)),
    Program("auto_pairs", AutoPairs, ((v(3), i(4)), (v(2), i(8)), (v(5), i(2))),
            {"x": {0: Dim.AUTO}, "n": None}, "u0 * (s0 - 1) <= 8, s0 >= 2 (traced, checked) -> u0 <= 8",
            "data-dependent docs (Dim.AUTO)", bad=((v(3), i(5)),)),
    Program("validate_count", ValidateCount, ((v(5), i(2)), (v(4), i(4)), (v(6), i(0))),
            {"x": {0: Dim.AUTO}, "n": None}, "u0 > s0 is open (a validation)", "issue threads (validation)",
            provable=False, validation=True),
    Program("validate_range", ValidateRange, ((v(8), i(2, 5)), (v(8), i(0, 8)), (v(4), i(4, 4))),
            {"x": {0: Dim.AUTO}, "t": None}, "start < 0 is open (a validation)", "issue threads (validation)",
            provable=False, validation=True),
    Program("offset_window", OffsetWindow, ((v(10), i(2, 5)), (v(10), i(0, 10)), (v(7), i(4, 3))),
            {"x": {0: S3}, "t": None}, "start + width <= s0, width >= 3 -> start + 2 < s0", "narrow docs",
            bad=((v(7), i(5, 3)),)),
    Program("half_size", HalfSize, ((v(10), i(5)), (v(9), i(0)), (v(4), i(2))),
            {"x": {0: S3}, "n": None}, "2*u0 <= s0 -> u0 < s0", "data-dependent docs", bad=((v(4), i(3)),)),
    # The one provable program verishape does not export: s_x <= s_y is a guard on input sizes, and
    # verishape.export takes only what an exported program checks as premises.
    Program("prefix_of_two", PrefixOfTwo, ((v(4), v(6), i(3)), (v(5), v(5), i(5)), (v(3), v(9), i(0))),
            {"x": {0: S3}, "y": {0: B}, "n": None}, "u0 <= s_x <= s_y", "dynamic shapes docs (relations)",
            bad=((v(5), v(4), i(1)),)),
    Program("chain3", Chain3, ((v(4), i(1, 2, 3)), (v(4), i(0, 0, 0)), (v(4), i(2, 5, 9))),
            {"x": {0: S3}, "t": None}, "u0 <= u1 <= u2", "issue threads (tolist)", bad=((v(4), i(3, 2, 5)),)),
    Program("chain3_gap", Chain3Gap, ((v(4), i(1, 2, 3)), (v(4), i(3, 4, 0))),
            {"x": {0: S3}, "t": None}, "no link between a and c", "issue threads", provable=False),
    Program("chain4_strict", Chain4Strict, ((v(4), i(0, 1, 2, 3)), (v(4), i(-5, 0, 7, 9)), (v(4), i(1, 2, 3, 4))),
            {"x": {0: S3}, "t": None}, "a < b < c < d -> d - a >= 3", "issue threads", bad=((v(4), i(0, 0, 1, 2)),)),
    Program("sum_of_parts", SumOfParts, ((v(4), i(5, 2, 3)), (v(4), i(0, 0, 0)), (v(4), i(-1, 2, -3))),
            {"y": {0: S3}, "t": None}, "z2 + z3 == z1 -> z1 - z2 == z3", "PR thread on _check symmetry",
            bad=((v(4), i(5, 2, 2)),)),
    Program("total_positive", TotalPositive, ((v(3), i(1, 1, 0)), (v(3), i(4, 0, 3)), (v(3), i(0, 0, 2))),
            {"x": {0: S3}, "t": None}, "u0 + u1 + u2 > 1 -> total != 0", "issue on three unbacked symbols",
            bad=((v(3), i(1, 0, 0)),)),
    Program("total_unknown", TotalUnknown, ((v(3), i(1, 1, 1)), (v(3), i(0, 0, 0))),
            {"x": {0: S3}, "t": None}, "total == 3 is open", "issue on three unbacked symbols", provable=False),
    Program("nonzero_narrow", NonzeroNarrow, ((v(6), _b(6)), (v(9), _b(9)), (v(5), torch.zeros(5, dtype=torch.bool))),
            {"x": {0: S3}, "mask": {0: S3}}, "u0 <= s0 -> u0 < s0 + 1", "nonzero docs"),
    Program("nonzero_half", NonzeroHalf, ((v(9), _half(9)), (v(6), _half(6)), (v(12), _half(12))),
            {"x": {0: S3}, "mask": {0: S3}}, "2*u0 <= s0 -> 2*u0 < 2*s0", "nonzero docs",
            bad=((v(4), torch.ones(4, dtype=torch.bool)),)),
    Program("split_tolist", SplitTolist, ((v(7), i(3, 4)), (v(7), i(0, 7)), (v(5), i(5, 0))),
            {"x": {0: S3}, "t": None}, "a + b == s0 -> a <= s0", "split with tolist sizes (issue threads)",
            bad=((v(7), i(3, 3)),)),
    Program("slice_between", SliceBetween, ((v(8), i(2, 5)), (v(8), i(0, 8)), (v(4), i(4, 4))),
            {"x": {0: S3}, "t": None}, "0 <= i <= j <= s0", "slicing docs", bad=((v(4), i(3, 5)),)),
    Program("item_view", ItemView, ((v(6), i(2)), (v(9), i(3)), (v(3), i(1))),
            {"x": {0: S3}, "n": None}, "3*u0 == s0, u0 >= 1", "dynamic shapes docs (view)", bad=((v(6), i(3)),)),
    Program("chunk_tolist", ChunkTolist, ((v(6), i(1, 2, 3)), (v(3), i(1, 1, 1)), (v(9), i(4, 4, 1))),
            {"x": {0: S3}, "t": None}, "parts >= 1, sum == s0", "split docs", bad=((v(6), i(0, 3, 3)),)),
    Program("max_position", MaxPosition, ((v(2, 64), i(3, 7, 1)), (v(2, 64), i(63, 0)), (v(2, 64), i(0, 0, 0))),
            {"x": {0: Dim("b", min=1, max=8)}, "pos": {0: Dim("p", min=2, max=32)}},
            "1 <= seq <= 64 -> not seq > 128", "Phi-3 export thread", bad=((v(2, 64), i(64, 2)),)),
    Program("max_position_open", MaxPositionOpen, ((v(2, 64), i(3, 7, 1)), (v(2, 64), i(200, 0))),
            {"x": {0: Dim("b", min=1, max=8)}, "pos": {0: Dim("p", min=2, max=32)}},
            "no bound on seq", "Phi-3 export thread", provable=False),
    Program("floordiv_bound", FloorDivBound, ((v(5), i(20)), (v(5), i(3)), (v(8), i(17))),
            {"x": {0: S3}, "n": None}, "u0 <= 4*s0 -> u0 // 4 <= s0", "data-dependent docs",
            bad=((v(5), i(21)),)),
    Program("mod_rows", ModRows, ((v(16), i(8)), (v(24), i(16)), (v(8), i(8))),
            {"x": {0: Dim("s", min=8, max=256)}, "n": None}, "u0 % 8 == 0, u0 >= 8", "data-dependent docs",
            bad=((v(16), i(12)),)),
    Program("repeat_counts", RepeatCounts, ((v(6), i(1, 2, 3)), (v(4), torch.tensor([4])), (v(5), i(0, 5, 0))),
            {"x": {0: S3}, "counts": {0: Dim("c", min=1, max=16)}}, "sum(counts) == s0", "repeat_interleave docs",
            bad=((v(6), i(1, 2, 2)),)),
    Program("masked_count", MaskedCount, ((v(6),), (v(9),), (-v(4).abs() - 1,)),
            {"x": {0: S3}}, "selected count <= s0 (stated)", "exportdb (boolean mask)"),
)
