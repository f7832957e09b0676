"""Every answer a lowering acts on reaches its question log: a ``guard_or_*`` question read by its fallback, an answer
torch remembered from before the log (``compiler/widen/questions.py``), and a decision only the AOT trace makes."""

from __future__ import annotations

import sys
import types

import pytest
import sympy
import torch
from torch._dynamo.source import LocalSource, TensorProperty, TensorPropertySource
from torch._dynamo.utils import counters
from torch.fx.experimental.symbolic_shapes import DimDynamic, guard_or_false, guard_or_true, statically_known_true

import verishape
from verishape.compiler import frames
from verishape.compiler.widen import kept as kept_
from verishape.compiler.widen import questions, recompute
from verishape.core import torch_names
from verishape.core.shape_env import VeriShapeEnv

pytestmark = pytest.mark.usefixtures("fresh_frames")


def _env_with_size():
    env = VeriShapeEnv()
    s = env.create_symbol(3, source=TensorPropertySource(LocalSource("x"), TensorProperty.SIZE, 0),
                          dynamic_dim=DimDynamic.DYNAMIC)
    return env, s, env.create_symintnode(s, hint=3)


@pytest.mark.parametrize(("ask", "kept"), [
    (lambda b: guard_or_false(b == 1), False),  # False at 2 is the fallback: the branch right at every size
    (lambda b: guard_or_true(b != 1), False),  # True at 2 is the fallback
    (lambda b: guard_or_false(b != 1), True),  # True at 2 is not: unknown at 1, where the fallback is False
    (lambda b: guard_or_true(b == 1), True),
    (lambda b: statically_known_true(b != 1), True),
])
def test_a_guard_or_question_is_kept_unless_its_answer_at_two_is_its_fallback(ask, kept):
    env, s, b = _env_with_size()
    log = questions.QuestionLog(frozenset({s}), widened=questions.from_one(env.var_to_range, frozenset({s})))
    with env.observing(log):
        ask(b)
    assert bool(log.questions) is kept, log.questions
    assert not env.guards


def test_an_answer_given_before_the_log_is_seen_when_the_lowering_asks_it_again():
    """torch remembers ``evaluate_expr``'s answers (an ``lru_cache``): one Dynamo's trace gave would come back to
    the lowering without being asked, unseen.  The log clears that memo first."""
    env, s, b = _env_with_size()
    assert bool(b != 1) is True  # answered statically (s >= 2), no guard, remembered
    with questions.recording(env, frozenset({s})) as log:
        assert bool(b != 1) is True
    assert [q.expr for q in log.questions] == [sympy.Ne(s, 1)] and not env.guards


def test_a_meta_result_cached_before_the_log_is_asked_again_under_it():
    """torch's fake-tensor cache keeps a meta function's result on the env (``ShapeEnv.fake_tensor_cache``), and a
    later run of the same op is served from it without its questions (``cumsum``'s meta asks whether the size is 1):
    one Dynamo's trace or the AOT trace ran would reach the lowering unseen.  The log clears that cache too."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import StatelessSymbolicContext

    def asked(cached_before: bool) -> list[sympy.Basic]:
        env = VeriShapeEnv()
        mode = FakeTensorMode(shape_env=env)
        x = mode.from_tensor(torch.randn(3, 4), source=LocalSource("x"), symbolic_context=StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC]))
        with mode:
            if cached_before:
                torch.ops.aten.cumsum.default(x, 0)
                assert env.fake_tensor_cache
            with questions.recording(env, frozenset({x.shape[0].node.expr})) as log:
                torch.ops.aten.cumsum.default(x, 0)
        return [q.expr for q in log.questions]

    fresh = asked(cached_before=False)
    assert fresh and asked(cached_before=True) == fresh


class _RightAtOne(recompute.over_ranges.Recorded):
    why = "a layout computation right at 1"

    def _right_at(self, sub):
        return True


@pytest.mark.parametrize("ask", [lambda b: bool(b != 1), lambda b: statically_known_true(b != 1)],
                         ids=["evaluate_expr", "statically_known_true"])
def test_an_answer_moot_where_first_asked_is_checked_where_it_is_asked_again(ask):
    """An answer that changes at 1, asked inside a layout computation right at 1 (moot there), then outside it: the
    lowering acted on it there too, so it is recorded again, not moot.  Asked again, ``evaluate_expr`` answers from
    torch's memo (nothing below it is observed) and a direct static question is one the log has seen."""
    env, s, b = _env_with_size()
    with questions.recording(env, frozenset({s})) as log:
        token = recompute.computing.set(_RightAtOne(done=True))
        try:
            ask(b)
            ask(b)  # the same place: recorded once
        finally:
            recompute.computing.reset(token)
        ask(b)
    at_one = {s: sympy.Integer(1)}
    assert [q.expr for q in log.questions] == [sympy.Ne(s, 1)] * 2
    assert log.questions[0].moot(at_one) is not None and log.questions[1].moot(at_one) is None


def _bn_program(x):  # a program of the widening fuzzer's (--phases, seed 5329)
    import torch.nn.functional as F

    v = x[:-1]
    return F.batch_norm(torch.cat([v, v * 2], 0), None, None, training=True)[:, 1:], torch.topk(x, 1, 0).values


def _bn_served(x, state):  # as its --phases mode calls it
    out = _bn_program(x)
    return out if state is None else (out, state.sum(1))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_decode_steps_batch_norm_of_an_empty_slice_at_one_is_eagers(backend):
    """At 1 ``x[:-1]`` is empty: eager's batch norm of no element is a clone, where the generic AOT graph calls the
    batch norm (which raises on one).  Its check (``numel == 0``) is answered in Dynamo's trace and again, from torch's
    memo, in the AOT trace; the reuse at 1 is refused on the AOT graph, and every call is eager's."""
    compiled = verishape.compile(_bn_served, backend=backend)
    for n in (4, -4, 1, 2, -1):
        g = torch.Generator().manual_seed(n + 10)
        x, state = torch.randn(abs(n), 6, generator=g), (torch.randn(abs(n), 3, generator=g) if n < 0 else None)
        torch.testing.assert_close(compiled(x, state), _bn_served(x, state), equal_nan=True)


# ---------------------------------------------------------------------------- a decision only the AOT trace makes

_lib = torch.library.Library("vs_answers", "DEF")
_lib.define("pick(Tensor x) -> Tensor")
_lib.impl("pick", lambda x: x * 2 if x.shape[0] >= 2 else x * 3, "CompositeExplicitAutograd")
_lib.impl("pick", lambda x: torch.empty_like(x), "Meta")


def _pick_decomposed(x):
    # right for every size its ranges allow (from 2), not at 1: what a size-1 call must not inherit
    return x * 2 if statically_known_true(x.shape[0] >= 2) else x * 3


def picked(x, w):
    return torch.ops.vs_answers.pick(x @ w)


@pytest.fixture
def decomposed_pick():
    """``pick`` decomposed by AOTAutograd under Inductor (its decomposition table): the choice between its branches
    is made in the AOT trace alone, where Dynamo's graph calls the op whole."""
    from torch._inductor import decomposition

    op = torch.ops.vs_answers.pick.default
    tables = (decomposition.decompositions, decomposition.fast_random_decomps())  # (the second: a cached copy)
    for table in tables:
        table[op] = _pick_decomposed
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            yield
    finally:
        for table in tables:
            table.pop(op, None)


def test_an_answer_only_the_aot_trace_gives_is_checked_at_one(decomposed_pick):
    """The generic AOT trace decomposes ``pick`` by a static answer that holds from 2 (``s >= 2``), not at 1: the
    size-1 call's AOT graph (``x * 3``) differs from the kept one, so it compiles as stock, right at 1."""
    w = torch.randn(8, 4)
    compiled = verishape.compile(picked, backend="inductor")
    for b in (2, 3, 1):
        x = torch.randn(b, 8)
        torch.testing.assert_close(compiled(x, w), picked(x, w))
    assert not counters["verishape"]["reused"]
    log = [why for e in frames.envs_for(picked.__code__) for _, why in e.verishape_log.not_widened]
    assert any("AOT graph" in why for why in log), log


def mlp(x, w):
    return torch.relu(x @ w).sum(-1) + x.shape[0]


def _guard_free(monkeypatch):
    """torch's guard-free semantics on: its range-only answers come before the static evaluation a log observes."""
    module_name, name = torch_names.GUARD_FREE_MODE
    monkeypatch.setitem(sys.modules, module_name, types.SimpleNamespace(**{name: 1}))


def _no_fake_cache(monkeypatch):
    """A ShapeEnv keeping fake-tensor results elsewhere (no ``fake_tensor_cache`` dict): they cannot be cleared."""
    monkeypatch.setattr(torch_names, "FAKE_TENSOR_CACHE", "_no_such_cache")


@pytest.mark.parametrize("torch_like", [_guard_free, _no_fake_cache])
def test_where_not_every_answer_can_be_seen_nothing_is_kept_for_size_one(monkeypatch, torch_like):
    """The size-1 call compiles as stock; outputs equal eager's."""
    torch_like(monkeypatch)
    compiled = verishape.compile(mlp, backend="aot_eager")
    w = torch.randn(8, 4)
    for b in (2, 3, 1):
        x = torch.randn(b, 8)
        torch.testing.assert_close(compiled(x, w), mlp(x, w))
    assert not kept_.alive(mlp.__code__) and not counters["verishape"]["reused"]
