"""Random small programs that try to break batch-1 widening, drawn with hypothesis.

A program is Python source: a function of one or two tensor inputs whose size along one
dimension (the *swept* size ``B``) varies over a sweep such as 3, 4, 1, 5, 1.  Its body is
drawn from a grammar of the places where a size of 1 (or a size derived from it that
becomes 0 or 1) changes what an op does: slices with size-derived bounds, reductions with
and without an identity, broadcasts, views, reshapes, transposes, ``contiguous``,
cat/stack/split, matmul, norms (batch norm in training mode too), attention with masks,
gather and index, in-place updates of intermediates and of inputs, Python branches on
sizes, graph breaks, and returned sizes and views.  Each value's shape is tracked as an
expression of ``B`` so that the ops drawn fit; a program that eager rejects at a generic
size is not used (the check runs eager first).

The programs are run by :func:`verishape.fuzz.widen_check.run_sweep` on both backends; the
CI test draws a few, derandomized, and ``benchmarks/widen_fuzz.py`` runs a campaign.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import sympy
from hypothesis import strategies as st

B = sympy.Symbol("B", integer=True, positive=True)

#: sizes the swept dimension takes before size 1 arrives (two distinct ones: the first
#: call compiles static, the second dynamic, as automatic dynamic does)
GENERIC = (2, 3, 4, 5, 6)


@dataclasses.dataclass(frozen=True)
class Value:
    name: str
    shape: tuple[sympy.Expr, ...]
    kind: str = "f"  # "f" float, "i" int64, "b" bool

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclasses.dataclass
class Program:
    """Source of ``def program(...)`` plus how to build its inputs at a size."""

    inputs: list[tuple[str, tuple[sympy.Expr, ...]]]
    lines: list[str]
    returns: list[str]
    sweep: list[int]
    constants: list[str] = dataclasses.field(default_factory=list)

    @property
    def source(self) -> str:
        args = ", ".join(name for name, _ in self.inputs)
        body = "\n".join(f"    {line}" for line in self.lines)
        ret = ", ".join(self.returns)
        consts = "".join(f"{c}\n" for c in self.constants)
        return (f"import torch\nimport torch.nn.functional as F\n{consts}\n"
                f"def program({args}):\n{body}\n    return {ret}\n")

    def function(self) -> Callable[..., Any]:
        scope: dict[str, Any] = {}
        exec(compile(self.source, "<widen-fuzz program>", "exec"), scope)  # noqa: S102 - our own generated source
        return scope["program"]

    def make_args(self, n: int) -> list[Any]:
        import torch

        g = torch.Generator().manual_seed(1000 + n)
        return [torch.randn(*[int(d.subs(B, n)) for d in shape], generator=g) for _, shape in self.inputs]


def relaid(args: list[Any]) -> list[Any]:
    """``args`` with every tensor of rank 2 or more in the reversed dimension order (a fresh
    tensor, not a view: as a compiled prefill returns a transposed KV cache)."""
    import torch

    return [torch.empty_permuted(a.shape, tuple(reversed(range(a.dim())))).copy_(a)
            if isinstance(a, torch.Tensor) and a.dim() >= 2 else a for a in args]


def layout_sweep(program: Program) -> tuple[Callable[[int], list[Any]], list[int]]:
    """The program's sweep with layout changes (issue 38): a size ``-n`` is size ``n`` with
    its inputs :func:`relaid`.  Generic sizes first, then the second one relaid (a layout
    miss on the generic compile), a later size relaid, 1, and 1 relaid."""
    first, second, _, later, _ = program.sweep

    def make_args(n: int) -> list[Any]:
        return relaid(program.make_args(-n)) if n < 0 else program.make_args(n)

    return make_args, [first, second, -second, -later, 1, -1]


def one_early_sweep(program: Program) -> list[int]:
    """The program's sizes with 1 right after the first (first, 1, later, 1, second): the
    recompile at 1 comes before anything generic, and traces a candidate
    (:mod:`verishape.compiler.widen.candidate`); later sizes are served by it when proved."""
    first, second, _, later, _ = program.sweep
    return [first, 1, later, 1, second]


def phase_sweep(program: Program) -> tuple[Callable[..., Any], Callable[[int], list[Any]], list[int]]:
    """The program called as a served decoder calls its forward (issue 48): one more argument, None in a
    *prefill* and, in a *decode step* (a size ``-n``), a state tensor of the swept size, as a KV cache is.
    The two phases take other tensors, so they compile apart; first, -first, 1, later, -1, second: the
    prefill at 1 after a decode step traces a candidate (:mod:`verishape.compiler.widen.candidate`), which
    serves the later prefill where proved.  The function is made afresh (its own code object: widening's
    records of a frame are by code)."""
    args = ", ".join(name for name, _ in program.inputs)
    scope: dict[str, Any] = {}
    source = (f"{program.source}\n\ndef served({args}, state):\n    out = program({args})\n"
              f"    return out if state is None else (out, state.sum(1))\n")
    exec(compile(source, "<widen-fuzz program, phased>", "exec"), scope)  # noqa: S102 - our own generated source
    first, second, _, later, _ = program.sweep

    def make_args(n: int) -> list[Any]:
        import torch

        if n > 0:
            return [*program.make_args(n), None]
        return [*program.make_args(-n), torch.randn(-n, 3, generator=torch.Generator().manual_seed(2000 - n))]

    return scope["served"], make_args, [first, -first, 1, later, -1, second]


def _at(e: sympy.Expr, n: int) -> int:
    return int(e.subs(B, n))


def _has_b(e: sympy.Expr) -> bool:
    return B in sympy.sympify(e).free_symbols


class _Builder:
    """Draws one program, one op at a time, keeping the live values and their shapes."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.values: list[Value] = []
        self.lines: list[str] = []
        self.constants: list[str] = []
        self.extra_returns: list[str] = []
        self.inputs: list[tuple[str, tuple[sympy.Expr, ...]]] = []
        self._n = 0

    def fresh(self) -> str:
        self._n += 1
        return f"v{self._n}"

    def add(self, expr: str, shape: Sequence[sympy.Expr], kind: str = "f") -> Value:
        v = Value(self.fresh(), tuple(sympy.sympify(d) for d in shape), kind)
        self.lines.append(f"{v.name} = {expr}")
        self.values.append(v)
        return v

    def pick(self, pred: Callable[[Value], bool] = lambda v: True) -> Value | None:
        """A live value, usually the newest that fits (programs are chains, so that what
        an op does at 1 reaches the output), sometimes any."""
        live = [v for v in self.values if pred(v)]
        if not live:
            return None
        if self.draw(st.integers(0, 3)) < 3:
            return live[-1]
        return self.draw(st.sampled_from(live[::-1]))

    def dim(self, v: Value, pred: Callable[[sympy.Expr], bool] = lambda d: True) -> int | None:
        dims = [i for i, d in enumerate(v.shape) if pred(d)]
        return self.draw(st.sampled_from(dims)) if dims else None

    def constant(self, shape: Sequence[int]) -> str:
        name = f"W{len(self.constants) + 1}"
        self.constants.append(f"{name} = torch.randn({', '.join(map(str, shape))}, "
                              f"generator=torch.Generator().manual_seed({len(self.constants) + 7}))")
        return name


def _index(rank: int, d: int, item: str) -> str:
    return "[" + ", ".join([":"] * d + [item]) + "]" if d < rank else "[...]"


# ---------------------------------------------------------------------------- the ops


def op_pointwise(b: _Builder) -> None:
    v = b.pick(lambda v: v.kind == "f")
    if v is None:
        return
    f = b.draw(st.sampled_from(["torch.relu({})", "{}.sin()", "({} * 2 + 1)", "{}.abs()", "torch.sigmoid({})",
                                "{}.clamp(-0.5, 0.5)", "torch.tanh({})", "{}.exp()"]))
    b.add(f.format(v.name), v.shape)


def _broadcast(a: tuple[sympy.Expr, ...], c: tuple[sympy.Expr, ...]) -> tuple[sympy.Expr, ...] | None:
    out = []
    for x, y in zip(((1,) * (len(c) - len(a)) + a)[::-1], ((1,) * (len(a) - len(c)) + c)[::-1]):
        x, y = sympy.sympify(x), sympy.sympify(y)
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out[::-1])


def op_binary(b: _Builder) -> None:
    v = b.pick(lambda v: v.kind == "f")
    if v is None:
        return
    w = b.pick(lambda w: w.kind == "f" and _broadcast(v.shape, w.shape) is not None)
    f = b.draw(st.sampled_from(["{} + {}", "{} * {}", "torch.maximum({}, {})", "{} - {}"]))
    if w is None or b.draw(st.booleans()):
        # against a broadcast constant: a row, a column of ones, or a scalar
        if v.rank == 0:
            return
        last = v.shape[-1]
        if _has_b(last):
            b.add(f.format(v.name, "1.5"), v.shape)
            return
        c = b.constant([_at(last, 2)])
        b.add(f.format(v.name, c), v.shape)
        return
    b.add(f.format(v.name, w.name), _broadcast(v.shape, w.shape))


def op_slice(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank > 0)
    if v is None:
        return
    d = b.dim(v, _has_b) if b.draw(st.integers(0, 4)) else b.dim(v)  # mostly the swept size
    if d is None:
        d = b.dim(v)
    n = v.shape[d]
    # the bounds that make a size 0 at 1 (``s - 1``) come first, and most often
    kind = b.draw(st.sampled_from(["1:", ":-1", "narrow", "1:", ":-1", "::2", "-1:", ":1", "1::2", "half", "2:"]))
    if kind == "narrow":
        expr, size = f"{v.name}.narrow({d}, 0, {v.name}.shape[{d}] - 1)", n - 1
    elif kind == "half":
        expr, size = f"{v.name}{_index(v.rank, d, f':{v.name}.shape[{d}] // 2')}", sympy.floor(n / 2)
    else:
        start, stop, step = {"1:": (1, None, 1), ":-1": (0, -1, 1), "::2": (0, None, 2), "-1:": (-1, None, 1),
                             ":1": (0, 1, 1), "1::2": (1, None, 2), "2:": (2, None, 1)}[kind]
        expr = f"{v.name}{_index(v.rank, d, kind)}"
        if start == -1:
            size = sympy.Min(1, n)
        elif stop == 1:
            size = sympy.Min(1, n)
        else:
            end = n + stop if stop is not None else n
            size = sympy.ceiling(sympy.Max(end - start, 0) / step)
    shape = list(v.shape)
    shape[d] = sympy.simplify(size)
    if any(_at(shape[d], n) < 0 for n in GENERIC):
        return
    b.add(expr, shape, v.kind)


def op_select(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank > 1)
    if v is None:
        return
    d = b.dim(v)
    item = b.draw(st.sampled_from(["-1", "0", f"{v.name}.shape[{d}] - 1"]))
    shape = v.shape[:d] + v.shape[d + 1:]
    b.add(f"{v.name}.select({d}, {item})", shape, v.kind)


_REDUCTIONS = {
    "sum": "{v}.sum({d})", "mean": "{v}.mean({d})", "amax": "{v}.amax({d})", "max": "{v}.max({d}).values",
    "min": "{v}.min({d})[0]", "prod": "{v}.prod({d})", "std": "{v}.std({d})", "var0": "{v}.var({d}, unbiased=False)",
    "logsumexp": "torch.logsumexp({v}, {d})", "norm": "{v}.norm(dim={d})", "argmax": "{v}.argmax({d})",
    "any": "({v} > 0).any({d})", "softmax_sum": "F.softmax({v}, {d}).sum({d})",
}
_FULL = ["{v}.sum()", "{v}.max()", "{v}.mean()", "{v}.min()", "{v}.amax()", "({v} > 0).all()", "{v}.std()"]


def op_reduce(b: _Builder) -> None:
    v = b.pick(lambda v: v.kind == "f")
    if v is None:
        return
    if v.rank == 0 or b.draw(st.integers(0, 3)) == 0:
        full = b.draw(st.sampled_from(["{v}.max()", "{v}.min()", *_FULL]))
        b.add(full.format(v=v.name), (), "b" if "all()" in full else "f")
        return
    d = (b.dim(v, _has_b) if b.draw(st.booleans()) else None)
    d = b.dim(v) if d is None else d
    # reductions with no identity most often: over no element eager raises (max and min
    # first, whose meta functions do not check, so the trace at 1 goes through)
    name = b.draw(st.sampled_from(["max", "min", "max", "min", "amax", "argmax", *sorted(_REDUCTIONS)]))
    keep = b.draw(st.booleans()) and name in ("sum", "mean", "amax", "prod", "logsumexp")
    expr = _REDUCTIONS[name].format(v=v.name, d=d)
    if keep:
        expr = expr.replace(f"({d})", f"({d}, keepdim=True)").replace(f", {d})", f", {d}, keepdim=True)")
    shape = list(v.shape)
    if keep:
        shape[d] = sympy.Integer(1)
    else:
        del shape[d]
    kind = "i" if name == "argmax" else "b" if name == "any" else "f"
    b.add(expr, shape, kind)


def op_view(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank > 0)
    if v is None:
        return
    choice = b.draw(st.sampled_from(["flat", "unsqueeze", "transpose", "contiguous", "clone", "view_first",
                                     "reshape_last", "expand", "permute", "t_contiguous"]))
    numel = sympy.prod(v.shape) if v.shape else sympy.Integer(1)
    if choice == "flat":
        b.add(f"{v.name}.reshape(-1)", (numel,), v.kind)
    elif choice == "unsqueeze":
        d = b.draw(st.integers(0, v.rank))
        b.add(f"{v.name}.unsqueeze({d})", v.shape[:d] + (1,) + v.shape[d:], v.kind)
    elif choice in ("transpose", "t_contiguous") and v.rank >= 2:
        i, j = b.draw(st.sampled_from([(i, j) for i in range(v.rank) for j in range(i + 1, v.rank)]))
        shape = list(v.shape)
        shape[i], shape[j] = shape[j], shape[i]
        suffix = ".contiguous()" if choice == "t_contiguous" else ""
        b.add(f"{v.name}.transpose({i}, {j}){suffix}", shape, v.kind)
    elif choice == "permute" and v.rank >= 2:
        perm = b.draw(st.permutations(range(v.rank)))
        b.add(f"{v.name}.permute({', '.join(map(str, perm))})", tuple(v.shape[p] for p in perm), v.kind)
    elif choice == "contiguous":
        b.add(f"{v.name}.contiguous()", v.shape, v.kind)
    elif choice == "clone":
        b.add(f"{v.name}.clone()", v.shape, v.kind)
    elif choice == "view_first" and v.rank >= 2:
        rest = sympy.prod(v.shape[1:])
        b.add(f"{v.name}.reshape({v.name}.shape[0], -1)", (v.shape[0], rest), v.kind)
    elif choice == "reshape_last" and v.rank >= 2 and not _has_b(v.shape[-1]):
        last = v.shape[-1]
        b.add(f"{v.name}.reshape(-1, {last})", (sympy.simplify(numel / last), last), v.kind)
    elif choice == "expand" and any(d == 1 for d in v.shape):
        d = next(i for i, n in enumerate(v.shape) if n == 1)
        shape = list(v.shape)
        shape[d] = sympy.Integer(3)
        b.add(f"{v.name}.expand({', '.join('3' if i == d else '-1' for i in range(v.rank))})", shape, v.kind)


def op_join(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank > 0 and v.kind == "f")
    if v is None:
        return
    choice = b.draw(st.sampled_from(["cat_self", "cat_slice", "stack", "split", "chunk", "cat_other"]))
    d = b.dim(v)
    shape = list(v.shape)
    if choice == "cat_self":
        shape[d] = 2 * shape[d]
        b.add(f"torch.cat([{v.name}, {v.name} * 2], {d})", shape)
    elif choice == "cat_slice":
        shape[d] = sympy.simplify(2 * shape[d] - 1)
        b.add(f"torch.cat([{v.name}, {v.name}{_index(v.rank, d, '1:')}], {d})", shape)
    elif choice == "stack":
        b.add(f"torch.stack([{v.name}, {v.name}.relu()], {d})", shape[:d] + [2] + shape[d:])
    elif choice == "split":
        shape[d] = sympy.Min(2, shape[d])
        b.add(f"{v.name}.split(2, {d})[0]", shape)
    elif choice == "chunk" and not _has_b(shape[d]):
        shape[d] = sympy.ceiling(shape[d] / 2)
        b.add(f"{v.name}.chunk(2, {d})[0]", shape)
    elif choice == "cat_other":
        w = b.pick(lambda w: w is not v and w.kind == "f" and w.rank == v.rank
                   and all(x == y for i, (x, y) in enumerate(zip(w.shape, v.shape)) if i != d))
        if w is not None:
            shape[d] = sympy.simplify(v.shape[d] + w.shape[d])
            b.add(f"torch.cat([{v.name}, {w.name}], {d})", shape)


def op_matmul(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank >= 1 and v.kind == "f")
    if v is None:
        return
    choice = b.draw(st.sampled_from(["weight", "gram", "bmm"]))
    last = v.shape[-1]
    if choice == "weight" and not _has_b(last):
        w = b.constant([_at(last, 2), 5])
        b.add(f"{v.name} @ {w}", v.shape[:-1] + (5,))
    elif choice == "gram" and v.rank >= 2:
        b.add(f"{v.name} @ {v.name}.transpose(-1, -2)", v.shape[:-1] + (v.shape[-2],))
    elif choice == "bmm" and v.rank == 3:
        b.add(f"torch.bmm({v.name}.transpose(1, 2), {v.name})", (v.shape[0], v.shape[2], v.shape[2]))


def op_norm(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank >= 2 and v.kind == "f")
    if v is None:
        return
    choice = b.draw(st.sampled_from(["layer", "batch_train", "group", "normalize", "softmax", "log_softmax",
                                     "instance"]))
    if choice == "layer" and not _has_b(v.shape[-1]):
        b.add(f"F.layer_norm({v.name}, ({v.shape[-1]},))", v.shape)
    elif choice == "batch_train" and not _has_b(v.shape[1]):
        b.add(f"F.batch_norm({v.name}, None, None, training=True)", v.shape)
    elif choice == "group" and not _has_b(v.shape[1]) and _at(v.shape[1], 2) % 2 == 0:
        b.add(f"F.group_norm({v.name}, 2)", v.shape)
    elif choice == "instance" and v.rank == 3 and not _has_b(v.shape[1]):
        b.add(f"F.instance_norm({v.name})", v.shape)
    elif choice in ("normalize", "softmax", "log_softmax"):
        d = b.dim(v)
        f = {"normalize": "F.normalize({}, dim={})", "softmax": "F.softmax({}, {})",
             "log_softmax": "F.log_softmax({}, {})"}[choice]
        b.add(f.format(v.name, d), v.shape)


def op_attention(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank == 3 and v.kind == "f")
    if v is None:
        return
    L = v.shape[1]
    q = f"{v.name}.unsqueeze(1)"
    choice = b.draw(st.sampled_from(["plain", "causal", "mask_tril", "mask_lengths", "manual"]))
    if choice == "plain":
        b.add(f"F.scaled_dot_product_attention({q}, {q}, {q}).squeeze(1)", v.shape)
    elif choice == "causal":
        b.add(f"F.scaled_dot_product_attention({q}, {q}, {q}, is_causal={v.name}.shape[1] > 1).squeeze(1)",
              v.shape)
    elif choice == "mask_tril":
        b.lines.append(f"m = torch.ones({v.name}.shape[1], {v.name}.shape[1], dtype=torch.bool).tril()")
        b.add(f"F.scaled_dot_product_attention({q}, {q}, {q}, attn_mask=m).squeeze(1)", v.shape)
    elif choice == "mask_lengths":
        b.lines.append(f"m = torch.arange({v.name}.shape[1])[None, :] <= torch.arange({v.name}.shape[1])[:, None]")
        b.add(f"F.scaled_dot_product_attention({q}, {q}, {q}, attn_mask=m).squeeze(1)", v.shape)
    else:
        b.lines.append(f"s = ({v.name} @ {v.name}.transpose(1, 2)) / {v.name}.shape[-1] ** 0.5")
        b.lines.append(f"s = s.masked_fill(torch.ones({v.name}.shape[1], {v.name}.shape[1], "
                       f"dtype=torch.bool).triu(1), float('-inf'))")
        b.add(f"s.softmax(-1) @ {v.name}", (v.shape[0], L, v.shape[2]))


def op_gather(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank >= 1 and v.kind == "f")
    if v is None:
        return
    d = b.dim(v)
    choice = b.draw(st.sampled_from(["gather_argmax", "index_arange", "index_select_tail", "take_last", "flip",
                                     "roll", "cumsum", "sort", "topk1", "pad"]))
    shape = list(v.shape)
    if choice == "gather_argmax":
        shape[d] = 1
        b.add(f"{v.name}.gather({d}, {v.name}.argmax({d}, keepdim=True))", shape)
    elif choice == "index_arange":
        b.add(f"{v.name}.index_select({d}, torch.arange({v.name}.shape[{d}]).flip(0))", shape)
    elif choice == "index_select_tail":
        shape[d] = sympy.simplify(shape[d] - 1)
        b.add(f"{v.name}.index_select({d}, torch.arange(1, {v.name}.shape[{d}]))", shape)
    elif choice == "take_last":
        shape[d] = 1
        b.add(f"{v.name}.index_select({d}, torch.tensor([{v.name}.shape[{d}] - 1]))", shape)
    elif choice == "flip":
        b.add(f"torch.flip({v.name}, [{d}])", shape)
    elif choice == "roll":
        b.add(f"torch.roll({v.name}, 1, {d})", shape)
    elif choice == "cumsum":
        b.add(f"{v.name}.cumsum({d})", shape)
    elif choice == "sort":
        b.add(f"torch.sort({v.name}, {d}).values", shape)
    elif choice == "topk1":
        shape[d] = 1
        b.add(f"torch.topk({v.name}, 1, {d}).values", shape)
    elif choice == "pad" and v.rank >= 1:
        shape[-1] = shape[-1] + 2
        b.add(f"F.pad({v.name}, (1, 1))", shape)


def op_inplace(b: _Builder) -> None:
    v = b.pick(lambda v: v.kind == "f")
    if v is None:
        return
    choice = b.draw(st.sampled_from(["add_", "slice_add", "fill_row", "masked_fill_", "input_mul_"]))
    if choice == "input_mul_":
        name = b.draw(st.sampled_from([n for n, _ in b.inputs]))
        b.lines.append(f"{name}.mul_(2)")
        return
    c = b.add(f"{v.name}.clone()", v.shape)
    if choice == "add_":
        b.lines.append(f"{c.name}.add_(1)")
    elif choice == "slice_add" and c.rank >= 1:
        d = b.dim(c)
        b.lines.append(f"{c.name}{_index(c.rank, d, '1:')} += 1")
    elif choice == "fill_row" and c.rank >= 1:
        b.lines.append(f"{c.name}[0] = 0")
    elif choice == "masked_fill_":
        b.lines.append(f"{c.name}.masked_fill_({c.name} > 0, 0)")


def op_branch(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank >= 1 and v.kind == "f")
    if v is None:
        return
    d = b.dim(v)
    cond = b.draw(st.sampled_from([f"{v.name}.shape[{d}] > 1", f"{v.name}.shape[{d}] == 1",
                                   f"{v.name}.shape[{d}] % 2 == 0"]))
    out = b.fresh()
    b.lines += [f"if {cond}:", f"    {out} = {v.name} * 2", "else:", f"    {out} = {v.name} - 1"]
    b.values.append(Value(out, v.shape))


def op_size_value(b: _Builder) -> None:
    v = b.pick(lambda v: v.rank >= 1 and v.kind == "f")
    if v is None:
        return
    d = b.dim(v)
    choice = b.draw(st.sampled_from(["times_n", "over_n", "arange", "return_size", "return_size_minus_1",
                                     "ones_like_size", "over_n_minus_1"]))
    if choice == "times_n":
        b.add(f"{v.name} * {v.name}.shape[{d}]", v.shape)
    elif choice == "over_n":
        b.add(f"{v.name} / {v.name}.shape[{d}]", v.shape)
    elif choice == "over_n_minus_1":
        b.add(f"{v.name} / ({v.name}.shape[{d}] - 1)", v.shape)
    elif choice == "arange":
        b.add(f"torch.arange({v.name}.shape[{d}], dtype=torch.float32)", (v.shape[d],))
    elif choice == "ones_like_size":
        b.add(f"torch.ones({v.name}.shape[{d}], 3)", (v.shape[d], 3))
    elif choice == "return_size":
        b.extra_returns.append(f"{v.name}.shape[{d}]")
    else:
        b.extra_returns.append(f"{v.name}.shape[{d}] - 1")


def op_graph_break(b: _Builder) -> None:
    b.lines.append("torch._dynamo.graph_break()")


OPS = {f.__name__[3:]: f for f in (op_pointwise, op_binary, op_slice, op_select, op_reduce, op_view, op_join,
                                     op_matmul, op_norm, op_attention, op_gather, op_inplace, op_branch,
                                     op_size_value, op_graph_break)}

#: the ops drawn, slices four times and reductions three times as often as the rest
#: (together they make the sizes that become 0 at 1 matter)
WEIGHTED = sorted(OPS) + ["slice", "slice", "slice", "reduce", "reduce"]

#: input layouts: (shape with the swept size B, which dimension it is)
INPUTS = [((B, 4), 0), ((B, 3, 4), 0), ((2, B, 4), 1), ((B, 6), 0), ((3, B), 1), ((B, 4, 2, 3), 0)]


@st.composite
def programs(draw: st.DrawFn, max_ops: int = 6) -> Program:
    """One program with its sweep (generic sizes first, then 1, then generic and 1 again)."""
    b = _Builder(draw)
    shape, _ = draw(st.sampled_from(INPUTS))
    b.inputs = [("x", tuple(sympy.sympify(d) for d in shape))]
    b.values.append(Value("x", b.inputs[0][1]))
    if draw(st.booleans()):
        other = draw(st.sampled_from([shape, (1,) + tuple(shape[1:]), tuple(shape[-1:])]))
        b.inputs.append(("y", tuple(sympy.sympify(d) for d in other)))
        b.values.append(Value("y", b.inputs[1][1]))
    previous = None
    for _ in range(draw(st.integers(2, max_ops))):
        # a slice is followed by a reduction half the time: a size made 0 at 1 then meets
        # what behaves differently on no element
        name = "reduce" if previous == "slice" and draw(st.booleans()) else draw(st.sampled_from(WEIGHTED))
        OPS[name](b)
        previous = name
    last = b.values[-1]
    returns = [last.name]
    if len(b.values) > 2 and draw(st.booleans()):
        other = draw(st.sampled_from(b.values[:-1]))
        if other.name != last.name:
            returns.append(other.name)
    returns += b.extra_returns
    first, second = draw(st.lists(st.sampled_from(GENERIC), min_size=2, max_size=2, unique=True))
    later = draw(st.sampled_from(GENERIC))
    sweep = [first, second, 1, later, 1]
    return Program(b.inputs, b.lines, returns, sweep, b.constants)


def eager_accepts(program: Program) -> bool:
    """Eager runs the program at every generic size of its sweep (at 1 it may raise:
    that is part of what is compared)."""
    fn = program.function()
    for n in sorted(set(program.sweep) - {1}):
        try:
            fn(*program.make_args(n))
        except Exception:  # noqa: BLE001 - a program eager rejects at a generic size is not used
            return False
    return True
