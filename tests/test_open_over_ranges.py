"""Note [A comparison over unrelated ranges is open] (``solvers/box.py``): a linear comparison
whose symbols no premise mentions is shown open from their ranges, exactly, and no prover is
asked; PyTorch's aliasing analysis over many views of one tensor costs what stock costs."""

from __future__ import annotations

import itertools
import math

import sympy
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.value_ranges import ValueRanges

from verishape import VeriShapeEnv
from verishape.core.premises import Premises, use_prover
from verishape.proofs.kinds import Decision
from verishape.solvers import box
from verishape.solvers.prover import Prover

X, Y, Z = sympy.symbols("x y z", integer=True)
RELATIONS = (sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge, sympy.Eq, sympy.Ne)


@st.composite
def _questions(draw):
    """A linear comparison over up to three symbols, each in a small box or unbounded on a side."""
    symbols = draw(st.lists(st.sampled_from((X, Y, Z)), min_size=1, max_size=3, unique=True))
    bounds = {}
    for s in symbols:
        lo = draw(st.integers(-4, 4))
        bounds[s] = (lo, lo + draw(st.integers(0, 4)))
    unit = draw(st.booleans())
    form = sum(draw(st.sampled_from((-1, 1)) if unit else st.integers(-5, 5).filter(bool)) * s for s in symbols)
    form += draw(st.integers(-10, 10))
    goal = draw(st.sampled_from(RELATIONS))(form, draw(st.integers(-10, 10)))
    return goal, bounds


@given(_questions())
def test_both_answers_occur_exactly_where_some_box_point_makes_each(question):
    """Against every integer point of a finite box: open means a point makes the goal true and
    another false; for an order comparison, and an equality with unit coefficients, exactly then
    (an equality with other coefficients is never shown open)."""
    goal, bounds = question
    if goal in (sympy.true, sympy.false):
        return
    symbols = sorted(bounds, key=str)
    values = [goal.xreplace(dict(zip(symbols, point))) for point in
              itertools.product(*(range(bounds[s][0], bounds[s][1] + 1) for s in symbols))]
    both = sympy.true in values and sympy.false in values
    unit = all(abs(c) == 1 for t, c in (goal.lhs - goal.rhs).as_coefficients_dict().items() if t is not sympy.S.One)
    if isinstance(goal, (sympy.Eq, sympy.Ne)) and not unit:
        assert not box.both_occur(goal, bounds)
    else:
        assert box.both_occur(goal, bounds) == both


@given(_questions(), st.sampled_from(("lower", "upper")))
def test_an_open_question_is_open_to_the_provers_too(question, side):
    """Where the box says open, the provers (bounds, refutation, Z3) prove neither answer
    from the same range facts; one end made infinite too."""
    goal, bounds = question
    if goal in (sympy.true, sympy.false):
        return
    s = sorted(bounds, key=str)[0]
    bounds[s] = (-math.inf, bounds[s][1]) if side == "lower" else (bounds[s][0], math.inf)
    if not box.both_occur(goal, bounds):
        return
    facts = [f for t, (lo, hi) in bounds.items()
             for f in ((sympy.Le(lo, t),) if lo != -math.inf else ()) + ((sympy.Le(t, hi),) if hi != math.inf else ())]
    premises = Premises.gather(goal, facts, {}, connected=False)
    prover = Prover(store=None)
    for target in (goal, sympy.Not(goal)):
        assert premises.ask(target, Decision.GUARD_AVOIDED, prover=prover) is None


def test_what_the_box_leaves_to_the_provers():
    """Equalities with a coefficient other than 1 or -1, products, floor division, rational
    coefficients, a symbol without bounds, an empty range and a non-integer symbol are not shown
    open here."""
    bounds = {X: (0, 10), Y: (0, 10)}
    f = sympy.Symbol("f", real=True)
    for goal in (sympy.Eq(2 * X, Y), sympy.Ne(X, 3 * Y), X * Y > 3, X // 2 > Y, X / 2 > Y, X + Z > 1, f > 1):
        assert not box.both_occur(goal, {**bounds, f: (0, 10)}), goal
    assert not box.both_occur(X > Y, {X: (5, 4), Y: (0, 10)})
    assert box.both_occur(4 * X > 4 * Y, bounds) and not box.both_occur(X + Y >= 0, bounds)
    assert box.both_occur(sympy.Eq(X, Y), bounds) and not box.both_occur(sympy.Eq(X + Y, -1), bounds)
    # test_recursion_depth_guards' question: a sum of unbounded ints equal to 0
    ints = sympy.symbols("i0:50", integer=True)
    assert box.both_occur(sympy.Ne(sum(ints), 0), dict.fromkeys(ints, (-math.inf, math.inf)))


def _env_with_offsets(n: int) -> tuple[VeriShapeEnv, list[sympy.Symbol]]:
    env = VeriShapeEnv()
    symbols = [env.create_unbacked_symint().node.expr for _ in range(n)]
    for s in symbols:
        env.var_to_range[s] = ValueRanges(0, 2**40)
    return env, symbols


def test_the_env_asks_no_prover_where_no_premise_mentions_the_symbols():
    env, (a, b, c, d) = _env_with_offsets(4)
    prover = Prover(store=None)
    with use_prover(prover):
        assert env._maybe_evaluate_static(sympy.Gt(4 * a, 4 * b)) is None
        assert prover.stats.queries == 0 and env.verishape_log.undecided == 1
        # a runtime assert that mentions ``a`` makes it a premise: the provers decide, and prove
        env.guard_or_defer_runtime_assert(sympy.Gt(a, b + 5), "a past b")
        assert env._maybe_evaluate_static(sympy.Gt(4 * a, 4 * b)) is sympy.true
        assert prover.stats.queries >= 1
        # an assert on ``c`` (a product: no range of ``c`` narrows), then ``c`` replaced by ``d``: the
        # assert, replaced, is a premise over ``d``, which shows ``d`` past 0
        env.guard_or_defer_runtime_assert(sympy.Gt(c * b, 100), "c times b past 100")
        env._set_replacement(c, d, "test")
        assert env.var_to_range[d].lower == 0
        assert env._maybe_evaluate_static(sympy.Gt(d, 0)) is sympy.true


def test_many_aliased_views_compile_with_stock_s_guards_and_no_prover():
    """PyTorch's ``test_many_overlapping_inputs_does_not_explode_guards`` in small: 30 views
    of one tensor, ``dynamic=True``: AOTAutograd asks about every pair of storage offsets.
    Stock's guards, every question open without a prover call."""
    envs: dict[str, list] = {"stock": [], "verishape": []}

    def capture(side):
        def backend(gm, example_inputs):
            envs[side].append(torch._guards.TracingContext.try_get().fake_mode.shape_env)
            return gm
        return torch._dynamo.backends.common.aot_autograd(fw_compiler=backend)

    def f(*args):
        for x in args:
            x.add_(1)

    import torch._dynamo.output_graph as output_graph

    from verishape.compiler import frames

    frames.install()  # first: what is put back below is then verishape's own per-frame chooser
    saved = output_graph.ShapeEnv
    outputs = {}
    prover = Prover(store=None)
    for side in ("stock", "verishape"):
        torch._dynamo.reset()
        x = torch.ones(300, requires_grad=True)
        output_graph.ShapeEnv = VeriShapeEnv if side == "verishape" else ShapeEnv
        try:
            with torch.no_grad(), use_prover(prover):
                torch.compile(f, backend=capture(side), dynamic=True)(*x.split(10))
        finally:
            output_graph.ShapeEnv = saved
        outputs[side] = x.detach().clone()
    (stock,), (ours,) = envs["stock"], envs["verishape"]
    assert type(stock) is ShapeEnv and type(ours) is VeriShapeEnv
    assert [str(g.expr) for g in ours.guards] == [str(g.expr) for g in stock.guards]
    assert ours.verishape_log.undecided > 400 and prover.stats.queries == 0
    assert torch.equal(outputs["stock"], outputs["verishape"])
