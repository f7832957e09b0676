"""How a new trace binds a kept compile's symbols (``compiler/widen/binding.py``, issue 48):
the same symbols by source, a size the new trace has as a constant (a static cache's length),
sizes it makes one symbol (duck sizing), and the bindings refused."""

from __future__ import annotations

import dataclasses

import pytest
import sympy
import torch

from verishape.compiler.widen import binding
from verishape.compiler.widen.canon import NotWidened


@dataclasses.dataclass(frozen=True)
class _Source:
    name: str


@dataclasses.dataclass(frozen=True)
class _Guard:
    expr: sympy.Basic


def _env(sizes, guards=()):
    """A shape env's bindings in small: ``{symbol name: [source names]}``."""
    from types import SimpleNamespace

    symbols = {name: sympy.Symbol(name, integer=True, positive=True) for name in sizes}
    env = SimpleNamespace(var_to_sources={symbols[n]: [_Source(s) for s in srcs] for n, srcs in sizes.items()},
                          replacements={}, guards=[_Guard(g(symbols)) for g in guards], deferred_runtime_asserts={})
    return env, symbols


B, L, C, K = "L['ids'].size()[0]", "L['ids'].size()[1]", "L['cache'].size()[2]", "L['keys'].size()[2]"


def test_the_same_symbols_by_source_rename_alike_and_the_group_goes_to_one():
    generic, g = _env({"s0": [B], "s1": [L]})
    nested, n = _env({"s7": [L]})
    b = binding.bind(generic, (g["s0"],), nested, lambda src: None)
    assert b.point(generic) == {g["s0"]: 1} and not b.fixed
    assert b.generic_rename(generic)(g["s1"]) == b.nested_rename(nested)(n["s7"]) == sympy.Symbol(L, integer=True)
    assert b.generic_rename(generic)(g["s0"]) == 1


def test_a_size_the_new_trace_has_as_a_constant_is_fixed_at_that_constant():
    """A static cache fixes its length: symbolic in the generic trace (generic recompiles),
    a constant in the new one; the generic symbol is proved (guards, ranges) at that value."""
    generic, g = _env({"s0": [B], "s1": [L], "s2": [C]})
    nested, n = _env({"s7": [L]})
    sizes = {C: 64}
    b = binding.bind(generic, (g["s0"],), nested, lambda src: sizes.get(src.name))
    assert b.point(generic) == {g["s0"]: 1, g["s2"]: 64}
    assert b.generic_rename(generic)(g["s2"]) == 64
    # not a constant there (an unknown size): refused
    with pytest.raises(NotWidened, match="binds other input sizes"):
        binding.bind(generic, (g["s0"],), nested, lambda src: None)


def test_sizes_the_new_trace_makes_one_symbol_are_one_generic_symbol_at_the_point():
    """The new trace duck-sized the cache length with the keys' length (equal at its call;
    its guard checks that): the generic symbol of the keys is the cache's at the point."""
    generic, g = _env({"s0": [B], "s2": [C], "s3": [K]})
    nested, n = _env({"s9": [C, K]})
    b = binding.bind(generic, (g["s0"],), nested, lambda src: None)
    assert b.fixed == {g["s3"]: g["s2"]}
    assert b.point(generic) == {g["s0"]: 1, g["s3"]: g["s2"]}
    name = sympy.Symbol(C, integer=True)
    assert b.generic_rename(generic)(g["s3"]) == b.generic_rename(generic)(g["s2"]) == name
    assert b.nested_rename(nested)(n["s9"]) == name


def test_bindings_that_cannot_be_taken_are_refused():
    generic, g = _env({"s0": [B], "s2": [C, K]})
    # a size the new trace keeps symbolic where the generic one has a constant
    nested, _ = _env({"s9": [C, K], "s5": [L]})
    with pytest.raises(NotWidened, match="keeps symbolic sizes"):
        binding.bind(generic, (g["s0"],), nested, lambda src: None)
    # a new symbol that takes part of a generic symbol's sources with another's
    generic2, g2 = _env({"s0": [B], "s2": [C, K], "s4": [L]})
    nested2, _ = _env({"s9": [C, L], "s8": [K]})
    with pytest.raises(NotWidened, match="keeps apart, in part"):
        binding.bind(generic2, (g2["s0"],), nested2, lambda src: None)
    # one generic symbol whose sources take different constants
    generic3, g3 = _env({"s0": [B], "s2": [C, K]})
    nested3, _ = _env({})
    with pytest.raises(NotWidened, match="binds other input sizes"):
        binding.bind(generic3, (g3["s0"],), nested3, lambda src: {C: 4, K: 5}.get(src.name))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_merge_at_the_call_is_proved_at_that_point(fresh_frames, backend):
    """End to end: a generic compile with the two lengths apart (symbols of their own), then
    batch 1 where the lengths are equal: the new trace makes them one symbol (duck sizing,
    its guard checks it), and the reuse is proved at that point.  Where the generic trace
    guarded the lengths apart (``Ne``), the same call is refused: the guard is false there."""
    import verishape
    from torch._dynamo.utils import counters

    def apart(x, y):
        return x.sum(1) * 2 + y.amax(1)

    def related(x, y):
        return (x[:, : y.size(1)] * 2 + y).sum(1)

    for fn, reuses in ((apart, 1), (related, 0)):
        torch._dynamo.reset()
        counters.clear()
        compiled = verishape.compile(fn, backend=backend, dynamic=None)
        for b, lx, ly in ((2, 9, 5), (3, 11, 7), (1, 6, 6), (1, 8, 8)):
            x, y = torch.randn(b, lx), torch.randn(b, ly)
            torch.testing.assert_close(compiled(x, y), fn(x, y))
        assert counters["verishape"]["reused_at_size_1"] == reuses, fn.__name__


H = "L['keys'].size()[1]"


def test_a_size_the_generic_trace_pinned_to_a_number_is_a_constant_there():
    """Generic recompiles give a head count a symbol and the weights pin it back
    (``s3 -> 2``): a new trace that has it as a constant (a trace at 1 that took stock's
    choices) binds, at that very number; another number is refused, and so is a trace
    that keeps it symbolic (the artifact was compiled for 2 only).  (A stride pinned so is
    left to the layout's checks: an input in another layout is copied.)"""
    from torch._dynamo.source import TensorProperty

    generic, g = _env({"s0": [B], "s1": [L], "s3": [H]})
    generic.replacements[g["s3"]] = sympy.Integer(2)
    size = dataclasses.make_dataclass("_SizeSource", [("name", str), ("prop", object)], frozen=True)
    generic.var_to_sources[g["s3"]] = [size(H, TensorProperty.SIZE)]
    nested, n = _env({"s7": [L]})
    b = binding.bind(generic, (g["s0"],), nested, lambda src: {H: 2}.get(src.name))
    assert b.point(generic) == {g["s0"]: 1}
    with pytest.raises(NotWidened, match="pinned it to 2"):
        binding.bind(generic, (g["s0"],), nested, lambda src: {H: 3}.get(src.name))
    symbolic, _ = _env({"s7": [L], "s8": [H]})
    with pytest.raises(NotWidened, match="keeps symbolic sizes the generic trace has as constants"):
        binding.bind(generic, (g["s0"],), symbolic, lambda src: None)
    # pinned in the new trace as well: a constant on both sides
    pinned, p = _env({"s7": [L], "s8": [H]})
    pinned.replacements[p["s8"]] = sympy.Integer(2)
    pinned.var_to_sources[p["s8"]] = [size(H, TensorProperty.SIZE)]
    assert binding.bind(generic, (g["s0"],), pinned, lambda src: {H: 2}.get(src.name)).point(generic) == {g["s0"]: 1}
