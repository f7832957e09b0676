"""Guard minimization: fewer installed guards, proved equivalent, recompiles preserved."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy import functions as tf
from torch.utils._sympy.value_ranges import ValueRanges

from verishape import solvers
import verishape
from verishape.core.minimize import minimize

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


def test_declared_positivity_is_not_a_premise_when_the_range_admits_zero():
    # Size symbols are declared positive, yet under backed_size_oblivious the installed
    # range check is "0 <= s": an input with s0 == 0 reaches the guards, so a guard that
    # only positivity implies stays.
    implied_by_positivity = sympy.Ge(s0 * s1, s1)
    guards = [implied_by_positivity, sympy.Ne(s1, 7)]
    m = minimize(guards, {s0: ValueRanges(0, sympy.oo), s1: ValueRanges(0, sympy.oo)}, solvers.Prover())
    assert implied_by_positivity in m.kept
    m = minimize(guards, RANGES, solvers.Prover())  # with "2 <= s0" checked, it may go
    assert implied_by_positivity not in m.kept and m.applied


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


def _compiled_counting_frames(compile_fn, fn):
    """``fn`` compiled (dynamic, no codegen) and the list that grows by one per frame."""
    torch._dynamo.reset()
    frames = []

    def backend(gm, example_inputs):
        frames.append(1)
        return gm.forward

    return compile_fn(fn, backend=backend, dynamic=True), frames


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
        cf, frames = _compiled_counting_frames(compile_fn, fn)
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


# ---------------------------------------------------------------- range tightening

from hypothesis import given, strategies as st  # noqa: E402

from verishape.solvers import concrete  # noqa: E402
from verishape.core.minimize import tighten  # noqa: E402


def test_guards_folded_into_a_lower_bound():
    m = minimize([sympy.Ne(tf.FloorDiv(s0, 2), 1), sympy.Gt(s1, 7)], RANGES, solvers.Prover(), tighten_ranges=True)
    assert m.applied and m.kept == []
    bounds = {(t.symbol, t.lower, t.upper) for t in m.tightened}
    assert bounds == {(s0, 4, None), (s1, 8, None)}
    assert all(t.proof.result.status == "proved" for t in m.tightened)
    assert m.equivalence.result.status == "proved"


def test_divisibility_and_quotient_fold_to_one_value():
    guards = [sympy.Eq(tf.Mod(s0, 4), 0), sympy.Eq(tf.FloorDiv(s0, 4), 1), sympy.Eq(s1, s0)]
    m = minimize(guards, RANGES, solvers.Prover(), tighten_ranges=True)
    assert m.kept == [sympy.Eq(s1, s0)]
    assert [(t.symbol, t.lower, t.upper) for t in m.tightened] == [(s0, 4, 4)]


@pytest.mark.parametrize("guard", [sympy.Ne(s0, 4), sympy.Ne(tf.FloorDiv(s0, 4), 1), sympy.Eq(tf.Mod(s0, 4), 0)],
                         ids=["hole", "hole-of-four", "every-fourth"])
def test_guards_with_holes_stay(guard):
    kept, tightened, _ = tighten([guard], RANGES, solvers.Prover())
    assert kept == [guard] and tightened == []


def test_divisor_symbols_are_not_tightened():
    kept, tightened, _ = tighten([sympy.Ge(s0, 4)], RANGES, solvers.Prover(), protectors={s0})
    assert kept == [sympy.Ge(s0, 4)] and tightened == []


def test_failed_range_proof_leaves_the_symbol(monkeypatch):
    class Unsure(solvers.Prover):
        def prove(self, goal, assumptions=(), **kw):
            if any("_t" in s.name for s in goal.free_symbols):
                return solvers.SolveResult("unknown", reason="injected")
            return super().prove(goal, assumptions, **kw)

    m = minimize([sympy.Ne(tf.FloorDiv(s0, 2), 1)], RANGES, Unsure(), tighten_ranges=True)
    assert m.tightened == [] and m.kept == [sympy.Ne(tf.FloorDiv(s0, 2), 1)]


_ATOMS = st.one_of(
    st.builds(lambda k, c: sympy.Ne(tf.FloorDiv(s0, k), c), st.integers(1, 6), st.integers(0, 4)),
    st.builds(lambda k, c: sympy.Eq(tf.FloorDiv(s0, k), c), st.integers(1, 6), st.integers(0, 4)),
    st.builds(lambda k, c: sympy.Eq(tf.Mod(s0, k), c), st.integers(1, 6), st.integers(0, 2)),
    st.builds(lambda c: sympy.Ge(s0, c), st.integers(0, 12)),
    st.builds(lambda c: sympy.Le(s0, c), st.integers(2, 40)),
    st.builds(lambda c: sympy.Ne(s0, c), st.integers(0, 12)),
)


@given(st.lists(_ATOMS, min_size=1, max_size=3), st.integers(0, 4), st.one_of(st.none(), st.integers(4, 30)))
def test_tightened_range_accepts_exactly_what_stock_accepted(group, lower, upper):
    group = [g for g in group if g not in (sympy.true, sympy.false) and g.free_symbols == {s0}]
    if not group:
        return
    ranges = {s0: ValueRanges(lower, sympy.oo if upper is None else upper)}
    kept, tightened, _ = tighten(group, ranges, solvers.Prover())
    (t,) = tightened or [None]
    for v in range(0, 80):
        def ok(e):
            try:
                return concrete.evaluate(e, {s0: v}) is True
            except concrete.Undefined:
                return False
        stock = lower <= v and (upper is None or v <= upper) and all(ok(g) for g in group)
        new_lo, new_hi = (t.lower, t.upper) if t else (lower, upper)
        ours = new_lo <= v and (new_hi is None or v <= new_hi) and all(ok(g) for g in kept)
        assert stock == ours, (group, lower, upper, v, t)


def halves(x):
    n = x.shape[0]
    return x.narrow(0, n // 4, n // 2) * 2


def test_range_tightening_end_to_end(installed):
    shapes = [(8, 3), (13, 5), (2, 3), (3, 4), (20, 2)]
    frames_by = {}
    for name, compile_fn in (("stock", torch.compile), ("verishape", verishape.compile)):
        installed.clear()
        cf, frames = _compiled_counting_frames(compile_fn, halves)
        for s in shapes:
            x = torch.randn(s)
            assert torch.equal(cf(x), halves(x))
        frames_by[name] = len(frames)
        first = installed[0][1]
        if name == "stock":
            assert any("// 2) != 1" in line for line in first), first
        else:
            assert not any("// 2) != 1" in line for line in first), first
            assert any(line.startswith("4 <= L['x'].size()[0]") for line in first), first
    assert frames_by["verishape"] == frames_by["stock"] >= 2  # sizes 2 and 3 still recompile


def test_a_caches_guard_expression_is_stocks():
    """Note [A cache's guards are stock's]: what torch's FX/AOT caches keep is read back as
    guards by a restarted process, so it is neither folded into a range nor minimized, while
    the shape guard Dynamo installs is."""
    from torch._dynamo.source import LocalSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    from verishape.core.shape_env import VeriShapeEnv

    envs = []
    for cls in (ShapeEnv, VeriShapeEnv):
        env = cls()
        s = env.create_symbol(13, LocalSource("n"), dynamic_dim=DimDynamic.DYNAMIC)
        n = env.create_symintnode(s, hint=13)
        assert (n // 2) != 1  # guarded: 2 <= n and n // 2 != 1 is 4 <= n
        envs.append((env, n))
    (stock, n_stock), (ours, n_ours) = envs
    assert ours.produce_guards_expression([n_ours]) == stock.produce_guards_expression([n_stock])
    assert "!= 1" in ours.produce_guards_expression([n_ours])
    assert any(line.startswith("4 <= ") for line in ours.produce_guards([n_ours], [LocalSource("n")]))


# ---------------------------------------------------------------- cheaper equivalents

from hypothesis import settings  # noqa: E402

from verishape.core.minimize import cancel  # noqa: E402

s2 = sympy.Symbol("s2", integer=True, positive=True)


def test_common_nonzero_factors_cancel():
    g = sympy.Eq(s0 * s1 * s2, 4 * s0 * s1 * tf.FloorDiv(s2, 4))
    ranges = {**RANGES, s2: ValueRanges(2, sympy.oo)}
    assert cancel(g, ranges) == sympy.Eq(s2, 4 * tf.FloorDiv(s2, 4))
    # a factor whose range admits 0 may not be cancelled: at 0 both sides agree anyway
    assert cancel(g, {s0: ValueRanges(0, sympy.oo), s1: ValueRanges(0, sympy.oo), s2: ranges[s2]}) is None


def test_rewrite_is_proved_and_reported_in_stock_symbols():
    ranges = {**RANGES, s2: ValueRanges(2, sympy.oo)}
    g = sympy.Eq(s0 * s1 * s2, 4 * s0 * s1 * tf.FloorDiv(s2, 4))
    m = minimize([g, sympy.Ne(s2, 4)], ranges, solvers.Prover(), tighten_ranges=True)
    assert m.applied and m.rewritten == {g: sympy.Eq(s2, 4 * tf.FloorDiv(s2, 4))}
    assert m.kept == [sympy.Eq(s2, 4 * tf.FloorDiv(s2, 4))]
    assert [(t.symbol, t.lower, t.upper, t.folded) for t in m.tightened] == [(s2, 8, None, (sympy.Ne(s2, 4),))]
    assert len(m.rewrites) == 2  # both directions, each re-checkable on its own
    assert all(r.result.status == "proved" and solvers.recheck(r).status == "proved" for r in m.rewrites)


def test_a_rewritten_guard_can_still_be_dropped():
    # s0*s1 == 4*s0*(s1//4) becomes s1 == 4*(s1//4), which s1 % 8 == 0 implies.
    g = sympy.Eq(s0 * s1, 4 * s0 * tf.FloorDiv(s1, 4))
    m = minimize([g, sympy.Eq(tf.Mod(s1, 8), 0)], RANGES, solvers.Prover())
    assert m.applied and m.kept == [sympy.Eq(tf.Mod(s1, 8), 0)]
    assert [str(r.obligation.goal) for r in m.dropped] == [str(sympy.Eq(s1, 4 * tf.FloorDiv(s1, 4)))]


_PAIR = st.sampled_from([s0, s1])
_TERM = st.one_of(
    _PAIR,
    st.builds(lambda a, k: tf.FloorDiv(a, k), _PAIR, st.integers(1, 4)),
    st.builds(lambda a, k: tf.Mod(a, k), _PAIR, st.integers(1, 4)),
    st.integers(0, 6).map(sympy.Integer),
)
_PRODUCT = st.builds(lambda c, ts: c * sympy.Mul(*ts), st.integers(1, 4), st.lists(_TERM, min_size=1, max_size=3))
_GUARD = st.builds(lambda rel, a, b: rel(a, b), st.sampled_from([sympy.Eq, sympy.Ne, sympy.Le, sympy.Lt]),
                   _PRODUCT, _PRODUCT)


@settings(max_examples=25)
@given(st.lists(_GUARD, min_size=1, max_size=4), st.integers(0, 2), st.integers(0, 2))
def test_installed_set_accepts_exactly_what_stock_accepts(guards, low0, low1):
    # The whole pipeline (rewrites, drops, range tightening) against concrete evaluation,
    # on a grid that includes sizes below the ranges (the range checks must reject them).
    guards = [g for g in guards if g not in (sympy.true, sympy.false)]
    if not guards:
        return
    ranges = {s0: ValueRanges(low0, sympy.oo), s1: ValueRanges(low1, sympy.oo)}
    m = minimize(guards, ranges, solvers.Prover(), tighten_ranges=True)
    new = {s: (low0 if s is s0 else low1, None) for s in (s0, s1)}
    for t in m.tightened:
        new[t.symbol] = (t.lower, t.upper)
    installed = m.kept if m.applied else guards

    def passes(exprs, bounds, env):
        if any(env[s] < lo or (hi is not None and env[s] > hi) for s, (lo, hi) in bounds.items()):
            return False
        try:
            return all(concrete.evaluate(e, env) is True for e in exprs)
        except concrete.Undefined:
            return False

    stock_bounds = {s0: (low0, None), s1: (low1, None)}
    for a in range(0, 14):
        for b in range(0, 14):
            env = {s0: a, s1: b}
            assert passes(guards, stock_bounds, env) == passes(installed, new, env), (guards, m, env)
