"""The prover's proving tier (``verishape.solvers.implied``, Note [A bound the premises state]):
what it proves without Z3, what it must leave to Z3, and a differential fuzzer against
concrete evaluation and against Z3 itself."""

from __future__ import annotations

import itertools
import random

import sympy
import torch
import torch.nn.functional as F
from torch.utils._sympy import functions as tf

import verishape

from verishape.proofs.result import BY_BOUNDS, PROVED, REFUTED
from verishape.solvers import concrete
from verishape.solvers.implied import implied
from verishape.solvers.prover import Prover

s, t = sympy.symbols("s t", integer=True, positive=True)
a, b = sympy.symbols("a b", integer=True)
zf = sympy.Symbol("zf", real=True)
# test_unspec_float_precision's size: a float scale times a size, truncated
T = tf.TruncToInt(zf * tf.ToFloat(s))
U = tf.TruncToInt(zf * tf.ToFloat(t))
# test_conv1d_symint_padding's output length
C = tf.CeilToInt(tf.IntTrueDiv(tf.PythonMod(s, 2) + 4, 2))
L = C + tf.FloorDiv(s, 2) - 2
HINTS = {s: 427, t: 640, zf: 1.873536229133606}


def test_what_pytorchs_own_tests_ask_is_proved_without_the_solver():
    proved = [
        (T >= 0, [T >= 0, s >= 2]),  # a premise restated
        (sympy.Ne(T, 0), [T >= 0, T >= 2, s >= 2]),  # a term Z3 would bit-blast, bounded by a premise
        (sympy.Eq(sympy.Max(1, T) * sympy.Max(1, U), T * U), [T >= 2, U >= 2, s >= 2, t >= 2]),  # Max decided
        (sympy.Ne(L, 1), [s <= 20480, L >= 2, s >= 2]),  # a bound on a sum, keyed by the sum
        (L >= 2, [s <= 20480, sympy.Eq(C, 3), s >= 2]),  # an equality substituted, then s // 2 >= 1
        (sympy.And(s >= 2, s <= 20480, sympy.Eq(C, 3), L >= 2), [sympy.Eq(C, 3), s >= 2, s <= 20480]),
        # a range tightened: Eq(C, 3) is false at s = 2, the least value the bounds allow
        (sympy.And(s >= 3, s <= 20480), [s >= 2, s <= 20480, sympy.Eq(C, 3)]),
    ]
    for goal, premises in proved:
        assert implied(goal, premises, HINTS), goal
        prover = Prover(store=None)
        result = prover.prove(goal, premises, witness=HINTS)
        assert (result.status, result.reason) == (PROVED, BY_BOUNDS)
        assert prover.stats.solver_calls == 0 and prover.stats.proved_by_bounds == 1


def test_what_the_bounds_do_not_show_is_left_to_the_solver():
    open_ = [
        (s >= 3, [s >= 2]),
        (sympy.Ne(L, 1), [L >= 1, s >= 2]),
        (sympy.Ne(U, 0), [U >= 0, s >= 2]),
        (s >= 4, [s >= 2, s <= 20480, sympy.Eq(C, 3)]),  # true (s is odd), not by bounds: s = 3 is allowed
        (sympy.Ne(s, 9), [s >= 2, s <= 20480, sympy.Eq(C, 3)]),
        (sympy.Eq(tf.PythonMod(s, 2), 0), [s >= 2]),
        (sympy.Or(s >= 1, t >= 5), [s >= 1]),  # a disjunction: the solver's
        (zf > 0, [zf > 1]),  # floats: the solver's
        (s >= 3, [s >= 2, sympy.Eq(sympy.Function("f")(s), 1)]),  # an opaque premise rules nothing out
    ]
    for goal, premises in open_:
        assert not implied(goal, premises, HINTS), goal


def test_a_term_the_premises_do_not_show_defined_is_never_dropped():
    """``s // (s - 2)`` raises at ``s = 2``: a goal that mentions it is undefined there, even
    where substituting ``C = 3`` would make both sides equal."""
    undefined = tf.FloorDiv(s, s - 2)
    goal = sympy.Eq(undefined + C, undefined + 3)
    assert isinstance(goal, sympy.Eq)
    assert not implied(goal, [sympy.Eq(C, 3), s >= 2], HINTS)
    assert not implied(tf.Mod(a, 4) < 4, [a >= -3], {a: 1})  # torch's Mod: undefined on a negative dividend
    assert implied(tf.Mod(a, 4) < 4, [a >= 0], {a: 1})


def test_premises_no_input_satisfies_prove_nothing_here():
    """A vacuous proof must come from the solver's path, which says it is vacuous."""
    assert not implied(s >= 4, [s >= 5, s <= 3], None)
    result = Prover(store=None).prove(s >= 4, [s >= 5, s <= 3])
    assert result.proved and result.vacuous and result.reason != BY_BOUNDS
    # with no witness, the least point of the premises' bounds shows them consistent
    assert implied(sympy.Ne(s, 1), [s >= 2, s <= 9], None)


def _terms(rng: random.Random, depth: int) -> sympy.Basic:
    leaves = [a, b, s, sympy.Integer(rng.randint(-3, 5))]
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(leaves)
    x, y = _terms(rng, depth - 1), _terms(rng, depth - 1)
    k = sympy.Integer(rng.choice([1, 2, 3, 4, -2]))
    make = rng.choice([
        lambda: x + y, lambda: k * x, lambda: x * y, lambda: sympy.Max(x, y), lambda: sympy.Min(x, y),
        lambda: tf.FloorDiv(x, k), lambda: tf.PythonMod(x, k), lambda: tf.Mod(x, abs(k)),
        lambda: tf.CeilToInt(tf.IntTrueDiv(x, abs(k))), lambda: tf.FloorDiv(x, y),
    ])
    try:
        return make()
    except (AssertionError, ZeroDivisionError, TypeError):  # sympy evaluates constants eagerly
        return x


_OPS = (sympy.Ge, sympy.Gt, sympy.Le, sympy.Lt, sympy.Eq, sympy.Ne)


def _relation(rng: random.Random, depth: int) -> sympy.Basic:
    op = rng.choice(_OPS)
    rhs = sympy.Integer(rng.randint(-3, 6)) if rng.random() < 0.7 else _terms(rng, 1)
    return op(_terms(rng, depth), rhs)


def test_differential_against_every_point_of_a_box_and_against_z3():
    """Random premises and goals over two integers and a positive size, with floor
    division, both moduli, Max, Min and an opaque ceiling: wherever the tier says proved,
    no point of a box that satisfies the premises breaks the goal (or leaves it undefined),
    and Z3 does not refute it."""
    rng = random.Random(0)
    box = [(x, y, z) for x, y, z in itertools.product(range(-4, 7), range(-4, 7), range(1, 7))]
    proved = checked = 0
    prover = Prover(store=None)
    for _ in range(600):
        premises = [r for r in (_relation(rng, 2) for _ in range(rng.randint(1, 3))) if r not in (sympy.true, sympy.false)]
        if not premises:
            continue
        near = rng.choice(premises)  # the premise's own sides, another comparison, a bound one off
        goal = rng.choice([_relation(rng, 2), near, sympy.And(*premises[:2]),
                           rng.choice(_OPS)(near.lhs, near.rhs + rng.choice([-1, 0, 1]))])
        if goal in (sympy.true, sympy.false):
            continue
        witness = None
        for x, y, z in box:
            if concrete.holds(premises, {a: x, b: y, s: z}):
                witness = {a: x, b: y, s: z}
                break
        if not implied(goal, premises, witness):
            continue
        proved += 1
        for x, y, z in box:
            point = {a: x, b: y, s: z}
            if concrete.holds(premises, point):
                checked += 1
                assert concrete.holds([goal], point), (goal, premises, point)
        assert prover._solve(goal, tuple(premises), prover.limits).status != REFUTED, (goal, premises)
    assert proved >= 100 and checked > 0, (proved, checked)  # the fuzzer reaches the tier


def _interpolate_stock(image, scale_factor):
    return F.interpolate(image[None], scale_factor=scale_factor, mode="bilinear", recompute_scale_factor=True,
                         align_corners=False)[0]


def _interpolate_vs(image, scale_factor):  # the same body: a code object of its own, so a cache entry of its own
    return F.interpolate(image[None], scale_factor=scale_factor, mode="bilinear", recompute_scale_factor=True,
                         align_corners=False)[0]


def test_a_float_scaled_size_keeps_only_the_guards_no_bound_implies():
    """PyTorch's ``test_unspec_float_precision`` (an unspecialized float scale factor): stock
    installs 22 guards, among them ``trunc(scale * h) >= 0``, ``!= 0``, ``!= 1``, ``!= -1`` beside
    ``trunc(scale * h) >= 2``, and products and ``max(1, ...)`` of those sizes.  Every one of
    them follows from the two ``>= 2`` guards by bounds; verishape installs 9, and both guard
    sets accept and reject the same inputs (sizes 0 to 9, scales of every sign, NaN, inf)."""
    managers = {}
    with torch._dynamo.config.patch(specialize_float=False, assume_static_by_default=False):
        for fn, compile_fn in ((_interpolate_stock, torch.compile), (_interpolate_vs, verishape.compile)):
            compile_fn(fn, backend="eager")(torch.rand(3, 427, 640), 1.873536229133606)
            [entry] = torch._dynamo.eval_frame._debug_get_cache_entry_list(fn.__code__)
            managers[fn] = entry.guard_manager
    counts = [str(m).count("LAMBDA_GUARD") for m in managers.values()]
    assert counts[1] <= counts[0] - 10, counts  # 22 and 9 on torch 2.13
    rng = random.Random(0)
    accepted = 0
    for _ in range(300):
        image = torch.empty(rng.randint(1, 4), rng.randint(0, 9), rng.randint(0, 9))
        scale = rng.choice([0.0, -1.0, -2.5, 0.1, 0.5, 1.0, 1.5, 1.873536229133606, 3.0, float("nan"), float("inf")])
        stock_ok, vs_ok = (m.check({"image": image, "scale_factor": scale}) for m in managers.values())
        assert stock_ok == vs_ok, (image.shape, scale)
        accepted += stock_ok
    assert 0 < accepted < 300


def test_bounds_past_a_doubles_range_stay_exact():
    """A bound of ``2**1100`` is an exact int: sums, products and ends never turn it into a
    float (which would raise), and the goal is still decided."""
    big = 2**1100
    assert implied(s + t > big, [s > big, t >= 1], {s: big + 1, t: 1})
    assert implied(sympy.Ne(s * t, big), [s > big, t >= 2], {s: big + 1, t: 2})
    assert implied(a - s < 0, [a <= big, s > big], {a: 0, s: big + 1})
    assert not implied(s > big + 1, [s > big], None)
