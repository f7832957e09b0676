"""Data-dependent programs: each branches or reshapes on sizes that come from tensor data
(``item``, ``tolist``, ``nonzero``, ``masked_select``, ``repeat_interleave``), with
``torch._check`` facts that imply the decision (``provable``), or none that do
(``undecidable``: both compilers must raise the data-dependent error).

Shared by the tests and by ``benchmarks/dde_corpus.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    fn: Callable[..., torch.Tensor]
    inputs: tuple[tuple[torch.Tensor, ...], ...]
    facts: str  # what kind of reasoning the decision needs
    provable: bool = True


def t(*values: int) -> tuple[torch.Tensor, ...]:
    """Scalars packed in one 1-d tensor: Dynamo specializes 0-d tensor inputs, but
    ``x[i].item()`` on a 1-d input is a genuinely unbacked (data-dependent) size."""
    return (torch.tensor(values), torch.tensor([0]))


def _ab(x: torch.Tensor, y: torch.Tensor) -> tuple[int, int]:
    return x[0].item(), x[1].item()


# ---------------------------------------------------------------- nonlinear


def mul_ge(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= 1)
    if a * b >= a:
        return torch.ones(a * b)[:a] * 2
    return torch.zeros(1)


def product_bound(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(a <= 8)
    torch._check(b >= 0)
    torch._check(b <= 8)
    if a * b <= 64:
        return torch.arange(a * b)
    return torch.zeros(0)


def square_ge(x, y):
    a, _ = _ab(x, y)
    torch._check(a >= 1)
    if a * a >= a:
        return torch.full((a,), 3.0)
    return torch.zeros(2)


def square_bound(x, y):
    a, _ = _ab(x, y)
    torch._check(a >= 0)
    torch._check(a <= 10)
    if a * a <= 100:
        return torch.ones(a)
    return torch.zeros(1)


def product_monotone(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 2)
    torch._check(b >= 3)
    if a * b > a + b:
        return torch.arange(a + b)
    return torch.zeros(1)


# ---------------------------------------------------------------- div / mod


def mod_multiple(x, y):
    a, _ = _ab(x, y)
    torch._check(a >= 0)
    torch._check(a % 6 == 0)
    if a % 3 == 0:
        return torch.ones(a).view(-1, 3).sum(1)
    return torch.zeros(1)


def mod_sum(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= 0)
    torch._check(a % 4 == 0)
    torch._check(b % 4 == 0)
    if (a + b) % 4 == 0:
        return torch.arange(a + b).view(-1, 4)
    return torch.zeros(1, 4)


def div_of_multiple(x, y):
    a, _ = _ab(x, y)
    torch._check(a >= 0)
    torch._check(a % 8 == 0)
    if (a // 4) % 2 == 0:
        return torch.ones(a // 4)
    return torch.zeros(1)


def mod_below_divisor(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= 1)
    if a % b < b:
        return torch.arange(a % b + 1)
    return torch.zeros(1)


def divmod_identity(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= 1)
    if (a // b) * b + a % b == a:
        return torch.ones(a)
    return torch.zeros(1)


def ceil_div_positive(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 1)
    torch._check(b >= 1)
    if (a + b - 1) // b >= 1:
        return torch.ones((a + b - 1) // b)
    return torch.zeros(1)


def floordiv_monotone(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(a <= b)
    if a // 3 <= b // 3:
        return torch.ones(b // 3 + 1)
    return torch.zeros(1)


def masked_select_view(x, y):
    m = torch.masked_select(x, x > 0)
    n = m.shape[0]
    torch._check(n % 4 == 0)
    if n % 2 == 0:
        return m.view(-1, 2).sum(1)
    return m


# ---------------------------------------------------------------- min / max


def avg_le_max(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= 0)
    if (a + b) // 2 <= max(a, b):
        return torch.ones((a + b) // 2 + 1)
    return torch.zeros(1)


def max_ge_each(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= 0)
    if max(a, b) >= a + 0 * b:
        return torch.ones(max(a, b) + 1)
    return torch.zeros(1)


def min_of_ordered(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= a + 1)
    if min(a, b) < b:
        return torch.ones(b - a)
    return torch.zeros(1)


# ---------------------------------------------------------------- linear / transitive


def transitive(x, y):
    a, b, c = x.tolist()
    torch._check(a >= 0)
    torch._check(a <= b)
    torch._check(b <= c)
    if a <= c:
        return torch.ones(c - a + 1)
    return torch.zeros(1)


def linear_combo(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 2)
    torch._check(b >= 3 * a)
    if b - a >= 4:
        return torch.ones(b - a)
    return torch.zeros(1)


def transitive_strict(x, y):
    a, b, c = x.tolist()
    torch._check(a >= 0)
    torch._check(a < b)
    torch._check(b < c)
    if c - a >= 2:
        return torch.ones(c - a)
    return torch.zeros(1)


def tolist_reshape(x, y):
    a, b = x.tolist()
    torch._check(a >= 1)
    torch._check(b >= 1)
    z = torch.arange(a * b).view(a, b)
    if z.shape[0] * z.shape[1] >= a:
        return z.sum(0)
    return torch.zeros(1, dtype=torch.long)


# ---------------------------------------------------------------- dynamic-output ops


def nonzero_slice(x, y):
    idx = torch.nonzero(x)
    n = idx.shape[0]
    torch._check(n >= 4)
    if n >= 2:
        return idx[:2].sum()
    return idx.sum()


def nonzero_pair(x, y):
    i = torch.nonzero(x).shape[0]
    j = torch.nonzero(y).shape[0]
    torch._check(i <= j)
    if i <= j + 1:
        return torch.ones(j - i + 1)
    return torch.zeros(1)


def repeat_interleave_total(x, y):
    r = torch.repeat_interleave(x)
    n = r.shape[0]
    torch._check(n >= 3)
    if n * n >= 2 * n:
        return r[:3] + 1
    return r


def split_with_sizes(x, y):
    a, b = y.tolist()
    torch._check(a >= 1)
    torch._check(b >= 1)
    torch._check(a + b == x.shape[0])
    p, q = x.split([a, b])
    if p.shape[0] * q.shape[0] >= p.shape[0]:
        return p.sum() + q.sum()
    return p.sum()


def view_of_unbacked(x, y):
    a, _ = _ab(x, y)
    torch._check(a >= 1)
    torch._check(a % 4 == 0)
    z = torch.arange(a * 2).view(-1, 8)
    if z.shape[0] * 4 == a:
        return z.sum(1)
    return z.sum(0)


def masked_select_pair(x, y):
    m = torch.masked_select(x, x > 2)
    n = m.shape[0]
    torch._check(n >= 1)
    torch._check(n <= 16)
    if n * n <= 256:
        return m * 2
    return m


# ---------------------------------------------------------------- undecidable controls


def control_no_facts(x, y):
    a, _ = _ab(x, y)
    if a > 5:
        return torch.ones(a)
    return torch.zeros(1)


def control_product(x, y):
    a, b = _ab(x, y)
    torch._check(a >= 0)
    torch._check(b >= 0)
    if a * b >= 10:
        return torch.ones(a)
    return torch.zeros(1)


def control_parity(x, y):
    a, _ = _ab(x, y)
    torch._check(a >= 0)
    torch._check(a % 3 == 0)
    if a % 2 == 0:
        return torch.ones(a)
    return torch.zeros(1)


PROGRAMS: list[Program] = [
    Program("mul_ge", mul_ge, (t(3, 2), t(0, 5), t(7, 1)), "nonlinear"),
    Program("product_bound", product_bound, (t(8, 8), t(0, 3), t(5, 2)), "nonlinear"),
    Program("square_ge", square_ge, (t(1, 0), t(4, 0), t(9, 0)), "nonlinear"),
    Program("square_bound", square_bound, (t(10, 0), t(0, 0), t(3, 0)), "nonlinear"),
    Program("product_monotone", product_monotone, (t(2, 3), t(5, 7), t(3, 3)), "nonlinear"),
    Program("mod_multiple", mod_multiple, (t(6, 0), t(0, 0), t(18, 0)), "div/mod"),
    Program("mod_sum", mod_sum, (t(4, 8), t(0, 4), t(12, 0)), "div/mod"),
    Program("div_of_multiple", div_of_multiple, (t(8, 0), t(16, 0), t(40, 0)), "div/mod"),
    Program("mod_below_divisor", mod_below_divisor, (t(7, 3), t(0, 1), t(5, 9)), "div/mod"),
    Program("divmod_identity", divmod_identity, (t(7, 3), t(0, 1), t(12, 4)), "div/mod"),
    Program("ceil_div_positive", ceil_div_positive, (t(7, 3), t(1, 1), t(5, 9)), "div/mod"),
    Program("floordiv_monotone", floordiv_monotone, (t(3, 7), t(0, 0), t(5, 5)), "div/mod"),
    Program("masked_select_view", masked_select_view,
            ((torch.tensor([1.0, -1.0, 2.0, 3.0, 4.0]), torch.tensor(0)),
             (torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]), torch.tensor(0)),
             (torch.tensor([-1.0, -2.0]), torch.tensor(0))), "div/mod"),
    Program("avg_le_max", avg_le_max, (t(3, 7), t(0, 0), t(9, 2)), "min/max"),
    Program("max_ge_each", max_ge_each, (t(3, 7), t(0, 0), t(9, 2)), "min/max"),
    Program("min_of_ordered", min_of_ordered, (t(3, 7), t(0, 1), t(2, 9)), "min/max"),
    Program("transitive", transitive, ((torch.tensor([1, 2, 3]), torch.tensor(0)),
                                       (torch.tensor([0, 0, 0]), torch.tensor(0)),
                                       (torch.tensor([2, 5, 9]), torch.tensor(0))), "transitive"),
    Program("linear_combo", linear_combo, (t(2, 6), t(3, 20), t(4, 12)), "linear"),
    Program("transitive_strict", transitive_strict, ((torch.tensor([0, 1, 2]), torch.tensor(0)),
                                                     (torch.tensor([3, 7, 9]), torch.tensor(0)),
                                                     (torch.tensor([1, 2, 8]), torch.tensor(0))), "transitive"),
    Program("tolist_reshape", tolist_reshape, ((torch.tensor([2, 3]), torch.tensor(0)),
                                               (torch.tensor([1, 1]), torch.tensor(0)),
                                               (torch.tensor([4, 2]), torch.tensor(0))), "nonlinear"),
    Program("nonzero_slice", nonzero_slice, ((torch.tensor([1, 0, 2, 3, 4]), torch.tensor(0)),
                                             (torch.tensor([1, 1, 1, 1]), torch.tensor(0)),
                                             (torch.tensor([0, 5, 6, 7, 8, 9]), torch.tensor(0))), "linear"),
    Program("nonzero_pair", nonzero_pair, ((torch.tensor([1, 0, 2]), torch.tensor([1, 1, 1])),
                                           (torch.tensor([0, 0]), torch.tensor([0, 0])),
                                           (torch.tensor([1, 2]), torch.tensor([3, 0, 4]))), "transitive"),
    Program("repeat_interleave_total", repeat_interleave_total,
            ((torch.tensor([1, 2, 0]), torch.tensor(0)), (torch.tensor([3]), torch.tensor(0)),
             (torch.tensor([2, 2, 2]), torch.tensor(0))), "nonlinear"),
    Program("split_with_sizes", split_with_sizes,
            ((torch.arange(5.0), torch.tensor([2, 3])), (torch.arange(2.0), torch.tensor([1, 1])),
             (torch.arange(7.0), torch.tensor([6, 1]))), "nonlinear"),
    Program("view_of_unbacked", view_of_unbacked, (t(4, 0), t(8, 0), t(20, 0)), "div/mod"),
    Program("masked_select_pair", masked_select_pair,
            ((torch.tensor([1.0, 3.0, 4.0]), torch.tensor(0)), (torch.tensor([5.0]), torch.tensor(0)),
             (torch.arange(10.0), torch.tensor(0))), "nonlinear"),
    Program("control_no_facts", control_no_facts, (t(3, 0), t(9, 0), t(0, 0)), "none", provable=False),
    Program("control_product", control_product, (t(3, 4), t(1, 1), t(0, 9)), "none", provable=False),
    Program("control_parity", control_parity, (t(3, 0), t(6, 0), t(0, 0)), "none", provable=False),
]
