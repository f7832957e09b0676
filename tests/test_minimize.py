"""Guard minimization: fewer installed guards, proved equivalent, recompiles preserved."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy import functions as tf
from torch.utils._sympy.value_ranges import ValueRanges

import solvers
import verishape
from verishape.minimize import minimize

s0, s1 = (sympy.Symbol(f"s{i}", integer=True, positive=True) for i in range(2))
RANGES = {s0: ValueRanges(2, sympy.oo), s1: ValueRanges(2, sympy.oo)}


def test_implied_guards_are_dropped_and_equivalence_proved():
    guards = [sympy.Eq(tf.Mod(s0, 4), 0), sympy.Eq(tf.Mod(s0, 2), 0), sympy.Ne(s0, 2), sympy.Ge(s0 * s1, s1)]
    m = minimize(guards, RANGES, solvers.Prover())
    assert m.applied
    assert sympy.Eq(tf.Mod(s0, 4), 0) in m.kept
    assert sympy.Eq(tf.Mod(s0, 2), 0) not in m.kept and sympy.Ne(s0, 2) not in m.kept
    assert sympy.Ge(s0 * s1, s1) not in m.kept  # implied by the ranges alone
    assert all(r.result.status == "proved" for r in m.dropped)
    assert m.equivalence.result.status == "proved"


def test_nothing_implied_keeps_everything():
    guards = [sympy.Eq(tf.Mod(s0, 4), 0), sympy.Gt(s1, 7)]
    m = minimize(guards, RANGES, solvers.Prover())
    assert m.kept == guards and not m.dropped and m.equivalence is None


def test_guards_protecting_a_divisor_stay():
    # (s0 // 4) may be zero: the guard that keeps it nonzero must stay in front.
    guards = [sympy.Ge(s0, 4), sympy.Eq(tf.Mod(s1, tf.FloorDiv(s0, 4)), 0), sympy.Ge(s0, 3)]
    m = minimize(guards, RANGES, solvers.Prover())
    assert sympy.Ge(s0, 4) in m.kept and sympy.Ge(s0, 3) in m.kept


def test_failed_equivalence_installs_stock(monkeypatch):
    class Flaky(solvers.Prover):
        def prove(self, goal, assumptions=(), **kw):
            if isinstance(goal, sympy.And):
                return solvers.SolveResult("unknown", reason="injected")
            return super().prove(goal, assumptions, **kw)

    guards = [sympy.Eq(tf.Mod(s0, 4), 0), sympy.Eq(tf.Mod(s0, 2), 0)]
    m = minimize(guards, RANGES, Flaky())
    assert not m.applied and m.kept == guards


def heads(x):
    b, t, d = x.shape
    return x.view(b, t, 4, d // 4).transpose(1, 2).reshape(b * 4, t, d // 4)


def chain(x):
    a, b = x.shape
    return x.reshape(a * b).view(-1, 2).reshape(a, b)


@pytest.fixture
def installed(monkeypatch):
    """The python guard code each ShapeEnv installs, per class."""
    seen: list[tuple[str, list[str]]] = []
    orig = ShapeEnv.produce_guards_verbose

    def spy(self, *a, **k):
        out = orig(self, *a, **k)
        seen.append((type(self).__name__, list(out[0].exprs)))
        return out

    monkeypatch.setattr(ShapeEnv, "produce_guards_verbose", spy)
    yield seen
    torch._dynamo.reset()


@pytest.mark.parametrize("fn,shapes", [(heads, [(2, 6, 16), (2, 6, 18), (1, 6, 16), (3, 5, 20)]),
                                       (chain, [(4, 6), (3, 5), (1, 6), (5, 2)])], ids=["heads", "chain"])
def test_fewer_guards_same_recompiles_same_results(installed, fn, shapes):
    counts = {}
    for name, compile_fn in (("stock", torch.compile), ("verishape", verishape.compile)):
        torch._dynamo.reset()
        frames = []

        def backend(gm, example_inputs, frames=frames):
            frames.append(1)
            return gm.forward

        cf = compile_fn(fn, backend=backend, dynamic=True)
        for s in shapes:
            x = torch.randn(s)
            try:
                want = fn(x)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    cf(x)
                continue
            assert torch.equal(cf(x), want)
        counts[name] = (len(frames), len(installed[0][1]))
        assert len(frames) >= 2  # the size-1 input recompiles
        installed.clear()
    assert counts["verishape"][0] == counts["stock"][0]  # the same recompiles
    assert counts["verishape"][1] < counts["stock"][1], counts  # fewer installed guards
