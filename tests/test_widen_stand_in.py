"""A size-1 call proved without tracing its AOT graph: the generic compile's backend answers stand in
(Note [The backend's answers stand in for the AOT trace at 1], ``compiler/widen/kept.py``, ``goals.py``)."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch._dynamo.utils import counters
from torch.fx.experimental.symbolic_shapes import DimDynamic, guard_or_false, guard_or_true, statically_known_true

import verishape
from verishape.compiler import frames
from verishape.compiler.widen import kept as kept_
from verishape.compiler.widen import questions
from verishape.core.shape_env import VeriShapeEnv

pytestmark = pytest.mark.usefixtures("fresh_frames")


def mlp(x, w):
    return torch.relu(x @ w).sum(-1) + x.shape[0]


def _sweep(compiled, fn, batches, *args):
    for b in batches:
        x = torch.randn(b, 8)
        torch.testing.assert_close(compiled(x, *args), fn(x, *args))


def _size_one_reuses(fn):
    return [ev for e in frames.envs_for(fn.__code__) for ev in e.verishape_log.widened if ev.value == 1]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_size_one_call_runs_the_generic_artifact_without_tracing_its_aot_graph(backend, aot_traces):
    w = torch.randn(8, 4)
    compiled = verishape.compile(mlp, backend=backend)
    with torch._inductor.config.patch(force_disable_caches=True):  # (a cache-served artifact is compared)
        _sweep(compiled, mlp, (2, 3, 1, 4, 1), w)
    (ev,) = _size_one_reuses(mlp)
    assert counters["verishape"]["aot_trace_stood_in"] == 1 and not aot_traces
    assert ev.aot is not None and ev.at_one.unguarded is not None
    assert "the call's AOT graph not traced" in ev.describe() and "generic compile's backend" in ev.describe()


def test_a_kept_compile_holds_the_answers_its_backend_gave_outside_the_lowering():
    """The generic compile keeps what its backend's call asked beyond the lowering (here: nothing that changes at 1),
    and the env's fake-tensor cache is the one it had, with the backend's own results joined.  An artifact
    AOTAutograd's cache served has no such answers: nothing of its trace was seen."""
    w = torch.randn(8, 4)
    compiled = verishape.compile(mlp, backend="inductor")
    with torch._inductor.config.patch(force_disable_caches=True):
        _sweep(compiled, mlp, (2, 3), w)
    (k,) = kept_.alive(mlp.__code__)
    assert k.traced == () and k.questions is not None
    assert isinstance(k.env.fake_tensor_cache, dict) and k.env.fake_tensor_cache
    for _ in range(2):  # torch's caches on: the second process-like round is served what the first compiled
        torch._dynamo.reset()
        compiled = verishape.compile(mlp, backend="inductor")
        _sweep(compiled, mlp, (2, 3), w)
    (k,) = kept_.alive(mlp.__code__)
    assert k.traced is None and k.cache_key is not None


# ---------------------------------------------------------------------------- an answer only the AOT trace gives

_lib = torch.library.Library("vs_stand_in", "DEF")
_lib.define("pick(Tensor x) -> Tensor")


def _pick_eager(x):
    return x * 2 if x.shape[0] >= 2 else x * 3


_lib.impl("pick", _pick_eager, "CompositeExplicitAutograd")
_lib.impl("pick", lambda x: torch.empty_like(x), "Meta")


def _pick_decomposed(x):
    # right for every size its ranges allow (from 2), not at 1: the kind of answer a size-1 call must not inherit
    return x * 2 if statically_known_true(x.shape[0] >= 2) else x * 3


def picked(x, w):
    return torch.ops.vs_stand_in.pick(x @ w)


@pytest.fixture
def decomposed_pick():
    """``pick`` decomposed by AOTAutograd under Inductor (its decomposition table), so that the choice between
    its branches is made in the AOT trace alone, where Dynamo's graph calls the op whole."""
    from torch._inductor import decomposition

    op = torch.ops.vs_stand_in.pick.default
    tables = (decomposition.decompositions, decomposition.fast_random_decomps())  # (the second: a cached copy)
    for table in tables:
        table[op] = _pick_decomposed
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            yield
    finally:
        for table in tables:
            table.pop(op, None)


def test_an_answer_the_aot_trace_gave_for_sizes_from_two_sends_the_proof_to_the_trace(decomposed_pick, aot_traces):
    """The generic AOT trace decomposes ``pick`` by a static answer that holds from 2 (``s >= 2``), not at 1: it is
    kept, so the size-1 call traces its AOT graph, which differs (``x * 3``), and compiles as stock: right at 1."""
    w = torch.randn(8, 4)
    compiled = verishape.compile(picked, backend="inductor")
    _sweep(compiled, picked, (2, 3, 1), w)
    (k,) = [k for k in kept_.alive(picked.__code__) if k.candidates]
    assert any(q.expr.rel_op == ">=" and q.answer is sympy.true for q in k.traced), (k.traced, k.questions)
    assert counters["verishape"]["aot_trace_stood_in"] == 0 and aot_traces
    assert not _size_one_reuses(picked)
    log = [why for e in frames.envs_for(picked.__code__) for _, why in e.verishape_log.not_widened]
    assert any("AOT graph" in why for why in log), log


# ---------------------------------------------------------------------------- a guard_or_* question's fallback


def _env_with_size():
    env = VeriShapeEnv()
    s = env.create_symbol(3, source=_source(), dynamic_dim=DimDynamic.DYNAMIC)
    return env, s, env.create_symintnode(s, hint=3)


def _source():
    from torch._dynamo.source import LocalSource, TensorProperty, TensorPropertySource

    return TensorPropertySource(LocalSource("x"), TensorProperty.SIZE, 0)


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


# ---------------------------------------------------------------------------- what the backend's call runs under


def test_the_backends_meta_functions_run_afresh_and_their_results_join_the_envs_cache():
    """A result Dynamo's trace cached on the env would come back with the answers it was computed from unseen."""
    env = VeriShapeEnv()
    before = env.fake_tensor_cache
    before["dynamo's"] = 1
    with kept_._fresh_fake_cache(env) as fresh:
        assert fresh and env.fake_tensor_cache == {}
        env.fake_tensor_cache["the backend's"] = 2
    assert env.fake_tensor_cache is before and before == {"dynamo's": 1, "the backend's": 2}


def test_under_torchs_guard_free_semantics_nothing_is_kept_for_size_one(monkeypatch):
    """Its range-only answers come before the static evaluation a log observes: none would be seen."""
    import sys
    import types

    from verishape.core import torch_names

    module_name, name = torch_names.GUARD_FREE_MODE
    monkeypatch.setitem(sys.modules, module_name, types.SimpleNamespace(**{name: 1}))
    w = torch.randn(8, 4)
    compiled = verishape.compile(mlp, backend="aot_eager")
    _sweep(compiled, mlp, (2, 3, 1), w)
    assert not kept_.alive(mlp.__code__) and not counters["verishape"]["reused"]


def _bn_program(x):  # the fuzzer's program
    import torch.nn.functional as F

    v = x[:-1]
    return F.batch_norm(torch.cat([v, v * 2], 0), None, None, training=True)[:, 1:], torch.topk(x, 1, 0).values


def _bn_served(x, state):  # as its --phases mode calls it
    out = _bn_program(x)
    return out if state is None else (out, state.sum(1))


def test_an_answer_dynamos_trace_gave_first_is_seen_when_the_backend_gives_it_again():
    """Found by the widening fuzzer (``--phases``, seed 5329, aot_eager): the decode step's batch norm of an empty
    slice at 1 is a clone in eager, where the generic AOT graph calls the batch norm (which raises on no element).
    Its check ``numel == 0`` was answered in Dynamo's trace, and torch's memo of ``evaluate_expr`` served it again
    in the AOT trace unseen, so the stand-in held.  The log clears that memo: the answer is seen, kept, false at 1."""
    compiled = verishape.compile(_bn_served, backend="aot_eager")
    for n in (4, -4, 1, 2, -1):
        g = torch.Generator().manual_seed(n + 10)
        x, state = torch.randn(abs(n), 6, generator=g), (torch.randn(abs(n), 3, generator=g) if n < 0 else None)
        torch.testing.assert_close(compiled(x, state), _bn_served(x, state), equal_nan=True)
    traced = [q for k in kept_.alive(_bn_served.__code__) for q in k.traced or ()]
    assert any(isinstance(q.expr, sympy.Eq) and q.answer is sympy.false for q in traced), traced
