"""A recompile at size 1 traces a candidate generic in that size; stock traces decide its use
(issue 38: Hugging Face's own compile of a decode step at batch 2, 1, 3 compiles twice, not
three times).  :mod:`verishape.compiler.widen.candidate`."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch._dynamo.source import LocalSource, TensorProperty, TensorPropertySource
from torch._dynamo.utils import counters
from torch.fx.experimental.symbolic_shapes import DimDynamic, guard_or_false, guard_or_true
from torch.utils._sympy.value_ranges import ValueRanges

import verishape
from verishape.compiler import frames
from verishape.compiler.widen import candidate
from verishape.core.shape_env import VeriShapeEnv

pytestmark = pytest.mark.usefixtures("fresh_frames")

#: the decode step's batches as Hugging Face's compile meets them: 2, then 1, then 3
BATCHES = (2, 1, 3, 1, 4)


def _size_source(name: str, dim: int = 0) -> TensorPropertySource:
    return TensorPropertySource(LocalSource(name), TensorProperty.SIZE, dim)


@pytest.fixture
def at_one():
    """A VeriShapeEnv inside a candidate attempt's scope, and what that scope keeps."""
    env = VeriShapeEnv()
    kept = candidate.KeptAtOne()
    with env.keeping_symbolic_at_one(kept):
        yield env, kept


def _symbol_at_one(env: VeriShapeEnv, kept: candidate.KeptAtOne) -> torch.SymInt:
    src = _size_source("x")
    kept.sources.add(src.name)
    expr = env.create_symbol(1, src, DimDynamic.DYNAMIC)
    return env.create_symintnode(expr, hint=1, source=src)


def test_a_size_kept_symbolic_at_one_gets_a_size_like_symbol_and_defaults_unguarded(at_one):
    env, kept = at_one
    b = _symbol_at_one(env, kept)
    s = b.node.expr
    assert isinstance(s, sympy.Symbol) and s in kept.symbols and s in env.size_like
    assert env.var_to_range[s].lower == 0
    # the broadcast question its ranges leave open: the default, no guard
    assert guard_or_false(b == 1) is False
    assert guard_or_true(b != 1) is True
    assert not env.guards
    assert [d for _, d in kept.defaulted] == [False, True]
    # what the ranges decide is decided, as stock decides it
    assert guard_or_false(b >= 0) is True
    # a plain question is answered as a trace generic in the size answers it (>= 2), unguarded
    assert bool(b == 1) is False
    assert not env.guards and candidate.pinned(env) is None
    # one that sizes from 2 leave open guards at the hint, as stock; this one pins it to 1
    assert bool(b % 2 == 1) is True
    assert env.guards and candidate.pinned(env) is not None


def test_a_question_undefined_at_the_hint_one_is_decided_without_an_internal_error(at_one):
    """A divisor that is 0 at the kept size's hint 1 (``Mod(t, 3*s - 3)``, from a slice
    ``x[:-1]`` of a size kept symbolic at 1; the one-early fuzzer, seed 23): the solver is not
    steered by evaluating it at the hints, which raised ZeroDivisionError, logged as a bug."""
    env, kept = at_one
    b = _symbol_at_one(env, kept)
    s = b.node.expr
    t = env.create_symbol(6, _size_source("y"), DimDynamic.DYNAMIC)
    for goal in (sympy.Eq(sympy.Mod(t, 3 * s - 3), 0), sympy.Eq(sympy.Mod(1, s - 1), 0)):
        assert env._maybe_evaluate_static(goal) is None  # open as for stock: s = 2 and s = 3 differ
        # asked as a trace generic in the size asks it (sizes from 2): still open, still no error
        assert env._maybe_evaluate_static(goal, size_oblivious=True) is None
    # one that sizes from 2 settle is decided so (3t < 3t + 3(s - 1) wherever s >= 2)
    assert env._maybe_evaluate_static(sympy.Eq(sympy.Mod(3 * t, 3 * t + 3 * s - 3), 3 * t),
                                      size_oblivious=True) is sympy.true
    assert env.verishape_log.errors == []



def test_an_open_question_is_asked_once_until_the_env_learns(at_one, monkeypatch):
    """Note [An open question stays open until the env learns]: torch asks a candidate's
    broadcast question hundreds of times; an open answer is remembered under the env's
    state, and a fact learned since (a narrowed range, a guard) asks it again."""
    env, kept = at_one
    b = _symbol_at_one(env, kept)
    s = b.node.expr
    goal = (b // 4 == 0).node.expr  # (a SymBool made, not evaluated)
    asked = []
    decide = VeriShapeEnv._decide

    def counted(self, expr, **kw):
        if expr == goal:
            asked.append(kw["size_oblivious"])
        return decide(self, expr, **kw)

    monkeypatch.setattr(VeriShapeEnv, "_decide", counted)
    assert [guard_or_false(b // 4 == 0) for _ in range(5)] == [False] * 5  # open: the default
    assert asked == [False, True]  # asked once plainly, once size-oblivious
    assert guard_or_true(b // 4 == 0) is True  # another kind of question: asked on its own
    assert len(asked) == 4
    env._update_var_to_range(s, ValueRanges(0, 100))  # a narrowing: a new state
    assert guard_or_false(b // 4 == 0) is False and len(asked) == 6
    assert guard_or_false(b // 4 == 0) is False and len(asked) == 6
    assert bool(b < 3) is True and env.guards  # a guard at the hint: the env learned s < 3
    # asked again (a remembered open answer would give the default, False): decided now
    assert guard_or_false(b // 4 == 0) is True


def test_other_sizes_and_plain_envs_are_untouched(at_one):
    env, kept = at_one
    kept.sources.add(_size_source("x").name)
    assert env.create_symbol(1, _size_source("y"), DimDynamic.DYNAMIC) == 1  # 0/1 specialization, as stock
    assert env.create_symbol(1, _size_source("x", 1), DimDynamic.DYNAMIC) == 1
    assert not kept.symbols
    assert not candidate.is_candidate(env)


def test_outside_the_scope_nothing_is_kept_symbolic_at_one():
    """The scope is the candidate attempt's: before and after it the env is stock's."""
    env = VeriShapeEnv()
    kept = candidate.KeptAtOne({_size_source("x").name})
    with env.keeping_symbolic_at_one(kept):
        inside = env.create_symbol(1, _size_source("x"), DimDynamic.DYNAMIC)
        assert candidate.is_candidate(env)
    assert isinstance(inside, sympy.Symbol) and not candidate.is_candidate(env)
    assert env.create_symbol(1, _size_source("x", 1), DimDynamic.DYNAMIC) == 1
    assert VeriShapeEnv.symbolic_at_one_of(env) is None


def test_an_unpinned_candidate_is_said_so(at_one):
    env, kept = at_one
    b = _symbol_at_one(env, kept)
    assert guard_or_false(b == 1) is False
    assert candidate.pinned(env) is None


def served(x, mask, w):
    """A decode step in small: activations and a mask sharing the batch; the mask
    broadcasts over the features (a broadcast whose "is it 1?" the candidate defaults)."""
    return ((x * w) * mask[:, :, None]).relu().sum(1) / mask.sum(1, keepdim=True)


def projected(x, mask, w):
    """A batched matmul: torch's matmul asks (a plain guard) whether the batch folds into
    the rows; the candidate answers as for batches from 2, and the stock trace at 1 folds
    the same way."""
    return ((x @ w.diag()) * mask[:, :, None]).sum(1)


def expanded(x, mask, w):
    """Reads the batch in Python (``x.shape[0]``): the candidate's trace guards the input's
    type (``TYPE_MATCH``), the stock trace at 1 only its tensor match, which checks the type."""
    return (mask[:, :, None] * x * w).expand(x.shape[0], -1, -1).sum(1)


def _run(compiled, fn, batches=BATCHES, n=5, width=8):
    w = torch.randn(width)
    for b in batches:
        x, mask = torch.randn(b, n, width), torch.rand(b, n)
        torch.testing.assert_close(compiled(x, mask, w), fn(x, mask, w))
    # Dynamo counts the graphs a backend returns; a compiled candidate ends in a restart
    return (counters["stats"]["unique_graphs"] - counters["verishape"]["reused"]
            + counters["verishape"]["candidates"])


@pytest.mark.parametrize("fn", [served, projected, expanded])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_batch_two_one_three_compiles_twice_where_stock_compiles_three_times(backend, fn):
    """Stock: batch 2 static, batch 1 static, batch 3 generic.  verishape: batch 2 static,
    then the candidate generic in the batch, compiled at batch 1 and proved there against
    the stock trace at 1, and proved at batch 3 against the stock trace generic in it."""
    assert _run(torch.compile(fn, backend=backend), fn) == 3
    torch._dynamo.reset()
    counters.clear()
    assert _run(verishape.compile(fn, backend=backend), fn) == 2
    assert counters["verishape"]["candidates"] == 1
    assert counters["verishape"]["reused_at_size_1"] == 1
    assert counters["verishape"]["reused_generic"] == 1


def _generic_reuses(fn):
    from verishape.compiler import frames

    return [ev for e in frames.envs_for(fn.__code__) for ev in e.verishape_log.widened
            if ev.value is None and not ev.restrided]


@pytest.fixture
def aot_traces(monkeypatch):
    """How many AOT graphs the reuse proofs traced to compare."""
    from verishape.compiler.widen import reuse

    calls = []
    traced = reuse._aot_inference_graph

    def counted(*args, **kwargs):
        calls.append(1)
        return traced(*args, **kwargs)

    monkeypatch.setattr(reuse, "_aot_inference_graph", counted)
    return calls


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_candidate_at_another_batch_is_proved_without_tracing_the_aot_graph_again(backend, aot_traces):
    """Note [A candidate's answers stand in for its AOT trace]: at batch 3 the candidate's
    unguarded answers (the broadcast's "is the batch 1?", answered as for batches from 2)
    are proved at the call, and only the size-1 proof traces an AOT graph.  (Torch's caches
    off: a candidate served from them is compared through a verdict or a trace, as before.)"""
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    compiled = verishape.compile(served, backend=backend)
    _run(compiled, served, batches=(2, 1))
    assert counters["verishape"]["reused_at_size_1"] == 1
    at_one = len(aot_traces)  # (0 where a verdict filed earlier answered the size-1 comparison)
    assert _run(compiled, served, batches=(3,)) == 2
    assert counters["verishape"]["reused_generic"] == 1 and len(aot_traces) == at_one
    assert counters["verishape"]["aot_trace_stood_in"] == 1
    (ev,) = _generic_reuses(served)
    assert ev.at_one.unguarded and ev.aot is not None  # the candidate's AOT graph, by fingerprint
    assert "the call's AOT graph not traced" in ev.describe()
    assert ev.proof is not None and ev.proof.result.proved


def written_through_a_view(x, mask, w):
    """An in-place write to the input through a view of it, a view returned."""
    y = x.view(x.shape[0], 40)
    y.mul_(2)
    return y[:, :3], (x * w * mask[:, :, None]).sum(1)


def empty_at_zero(x, mask, w):
    """A mean over the batch (NaN at batch 0) and the batch as a number."""
    return (x * w).mean(0) + x.shape[0], mask.sum(0)


def expanded_bias(x, mask, w):
    """A parameter expanded along the batch (stride 0), and a transpose returned."""
    return w[None, None].expand(x.shape[0], -1, -1) * x, (mask[:, :, None] * x).transpose(0, 1)


def _same(got, want):
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g, e, equal_nan=True)
        assert [st for n, st in zip(g.shape, g.stride()) if n > 1] == [st for n, st in zip(e.shape, e.stride()) if n > 1]


@pytest.mark.parametrize("fn", [written_through_a_view, empty_at_zero, expanded_bias])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_programs_written_against_the_stand_in_equal_eager(backend, fn):
    """Note [A candidate's answers stand in for its AOT trace], tried to be broken: writes
    through views, empty reductions and a batch of 0, stride-0 and transposed outputs; every
    call's values, strides and inputs afterwards equal eager's, and the later sizes are
    served by the candidate through the stand-in."""
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    compiled = verishape.compile(fn, backend=backend)
    w = torch.randn(8)
    for b in (2, 1, 0, 3, 1, 5):
        x, mask = torch.randn(b, 5, 8), torch.rand(b, 5)
        x_eager, x_compiled = x.clone(), x.clone()
        _same(compiled(x_compiled, mask, w), fn(x_eager, mask, w))
        assert torch.equal(x_compiled, x_eager)
    # (torch 2.15's AOTAutograd asks of expanded_bias whether its returned transpose has its
    # base's metadata, ``Eq(s, 5)``: the candidate answers it unguarded, and at batch 3 it is
    # carried into the entry's guards, where stock's AOT trace guards it: batch 5 recompiles)
    assert counters["verishape"]["aot_trace_stood_in"] >= 1


def same_either_way(x, mask, w):
    """An unguarded answer false at batch 3 (the candidate's ``guard_or_false`` default),
    whose branches trace the same graph."""
    if guard_or_false(x.shape[0] == 3):
        return ((x * w) * mask[:, :, None]).sum(1)
    return ((x * w) * mask[:, :, None]).sum(1)


def test_an_unguarded_answer_false_at_the_call_leaves_the_aot_graph_to_compare(aot_traces):
    """The stock trace at batch 3 guards the batch equal to 3, so the candidate's default
    (not 3) is false there: its answers do not stand in, and the AOT graphs are traced and
    compared (equal: the branches trace the same graph), outputs equal eager's."""
    compiled = verishape.compile(same_either_way, backend="aot_eager")
    _run(compiled, same_either_way, batches=(2, 1))
    at_one = len(aot_traces)
    assert _run(compiled, same_either_way, batches=(3,)) == 2
    assert counters["verishape"]["reused_generic"] == 1 and len(aot_traces) == at_one + 1
    assert counters["verishape"]["aot_trace_stood_in"] == 0
    (ev,) = _generic_reuses(same_either_way)
    assert ev.at_one.unguarded is None and ev.aot is not None


def test_an_unguarded_answer_the_call_holds_but_does_not_guard_is_carried_into_its_entry(aot_traces, monkeypatch):
    """An answer of the candidate's AOTAutograd trace that the stock trace at 3 does not guard
    (Dynamo never asks it; torch 2.15's view-metadata question ``Eq(s, 5)`` is one, simulated
    here by adding it to the candidate's unguarded answers): true at 3, so it is carried into
    the new entry's guards and the AOT graph is not traced; the entry then misses at 5, where
    the answer is false, and 5 is proved by tracing its AOT graph.  Outputs equal eager's."""
    from verishape.compiler.widen import kept as kept_
    from verishape.compiler.widen import verdict

    filed = []
    monkeypatch.setattr(verdict, "remember", lambda *args: filed.append(args))
    compiled = verishape.compile(served, backend="aot_eager")
    _run(compiled, served, batches=(2, 1))
    (k,) = [k for k in kept_.alive(served.__code__) if k.candidate]
    (s,) = sorted(k.at_one.symbols, key=str)[:1]
    k.unguarded = (*k.unguarded, (sympy.Eq(s, 5), False))
    at_one, filed_at_one = len(aot_traces), len(filed)
    assert _run(compiled, served, batches=(3, 4)) == 2
    assert counters["verishape"]["aot_trace_stood_in"] == 1 and len(aot_traces) == at_one
    (ev,) = _generic_reuses(served)
    assert ev.at_one.carried == (f"the candidate's unguarded answer Ne({s}, 5)",) and len(ev.install) == 1
    assert "1 guard(s) carried into this entry's guards" in ev.describe()
    # no verdict filed for it: a process without the stand-in (its candidate served from torch's
    # cache) would run the artifact without the carried guard
    assert len(filed) == filed_at_one
    assert _run(compiled, served, batches=(5,)) == 2
    assert counters["verishape"]["reused_generic"] == 2 and counters["verishape"]["aot_trace_stood_in"] == 1
    assert len(aot_traces) == at_one + 1


def branchy(x, mask, w):
    """Python code that branches on the batch being 1: the candidate takes the general
    branch (as for batches from 2), the stock trace at 1 the other."""
    if x.shape[0] == 1:
        return (x * w).sum(1) * 2
    return ((x * w) * mask[:, :, None]).sum(1)


def defaulted_in_user_code(x, mask, w):
    """User code asking ``guard_or_false`` about the batch: the candidate takes its
    default, the stock trace at 1 the other branch."""
    if guard_or_false(x.shape[0] == 1):
        return (x * w).sum(1) + 1
    return ((x * w) * mask[:, :, None]).sum(1)


def odd_batches(x, mask, w):
    """A question sizes from 2 leave open (is the batch odd?): the candidate guards it at
    the hint 1, which pins it to odd batches; dropped before its compile."""
    if x.shape[0] % 2 == 1:
        return (x * w).sum(1)
    return ((x * w) * mask[:, :, None]).sum(1)


@pytest.mark.parametrize("fn", [branchy, defaulted_in_user_code])
def test_a_candidate_that_differs_at_one_serves_only_the_batches_it_was_proved_for(fn):
    """Every output equal to eager's, never the candidate at 1: it is compiled, refused at
    1 (the graphs differ), the size-1 trace compiled as stock, and batch 3 runs the
    candidate, proved against the stock trace there: 3 compiles, as stock."""
    compiled = verishape.compile(fn, backend="aot_eager")
    assert _run(compiled, fn) == 3
    assert counters["verishape"]["reused_at_size_1"] == 0
    assert counters["verishape"]["candidates"] == 1
    assert counters["verishape"]["reused_generic"] == 1


def test_a_candidate_its_own_trace_pins_to_one_is_dropped_before_its_compile():
    stock = _run(torch.compile(odd_batches, backend="aot_eager"), odd_batches)
    torch._dynamo.reset()
    counters.clear()
    assert _run(verishape.compile(odd_batches, backend="aot_eager"), odd_batches) == stock
    assert counters["verishape"]["candidates_dropped"] == 1
    assert counters["verishape"]["candidates"] == 0


def test_no_candidate_where_a_kept_compile_is_already_generic_in_the_size():
    """Batches 2, 3, 1: the second compile is generic in the batch; at 1 it is proved, no
    candidate traced."""
    _run(verishape.compile(served, backend="aot_eager"), served, batches=(2, 3, 1))
    assert counters["verishape"]["candidates"] == counters["verishape"]["candidates_dropped"] == 0
    assert counters["verishape"]["reused_at_size_1"] == 1


def test_the_first_compile_and_stock_backends_trace_no_candidate():
    _run(torch.compile(served, backend="aot_eager"), served)
    _run(verishape.compile(served, backend="aot_eager", generic_recompiles=False), served)
    assert counters["verishape"]["candidates"] == counters["verishape"]["candidates_dropped"] == 0


def test_a_type_match_is_checked_by_a_tensor_match_of_the_same_input_only():
    from verishape.compiler.widen.reuse import _not_checked

    generic = {("L['x']", "TYPE_MATCH"), ("G['f']", "ID_MATCH")}
    assert _not_checked(generic, {("L['x']", "TENSOR_MATCH"), ("G['f']", "ID_MATCH")}) == set()
    assert _not_checked(generic, {("L['y']", "TENSOR_MATCH"), ("G['f']", "ID_MATCH")}) == {("L['x']", "TYPE_MATCH")}
    assert _not_checked(generic, {("L['x']", "TENSOR_MATCH")}) == {("G['f']", "ID_MATCH")}


def decoder_step(x, mask, w, cache=None):
    """A prefill without a cache, then decode steps with one (a new input) at length 1."""
    out = ((x * w) * mask[:, :, None]).sum(1)
    return out if cache is None else out + cache.sum(1)


def test_a_call_that_brings_other_tensors_traces_no_candidate():
    """The first decode step after a prefill (length 7, then 1 with a KV cache) is another
    program, not the prefill at another length: a candidate there was traced only to be
    refused (a whole trace spent).  The walk of the arguments says so before the trace: no
    candidate attempt, outputs equal eager's."""
    compiled = verishape.compile(decoder_step, backend="aot_eager")
    w = torch.randn(8)
    calls = [(torch.randn(2, 7, 8), torch.rand(2, 7), None),
             (torch.randn(2, 1, 8), torch.rand(2, 1), torch.randn(2, 3, 8))]
    for x, mask, cache in calls:
        torch.testing.assert_close(compiled(x, mask, w, cache), decoder_step(x, mask, w, cache))
    assert counters["verishape"]["candidates"] == counters["verishape"]["candidates_dropped"] == 0
    assert counters["stats"]["unique_graphs"] == 2



def buffered_step(x, mask, w, cache=None):
    """``decoder_step`` writing through a zero buffer of the batch's size, as a static cache's prefill
    does: Inductor's constant folding asks whether that buffer is contiguous ("is the batch 1?")."""
    buf = torch.zeros(x.shape[0], 2, x.shape[1], 8)
    buf[:, 0] = x * w
    out = (buf.sum(1) * mask[:, :, None]).sum(1)
    return out if cache is None else out + cache.sum(1)


@pytest.mark.parametrize("backend,fn", [("aot_eager", decoder_step), ("inductor", decoder_step),
                                        ("inductor", buffered_step)])
def test_a_prefill_at_one_after_decode_steps_traces_a_candidate_that_serves_later_prefills(backend, fn, monkeypatch):
    """Prefill at batch 2, a decode step (a generic compile that took the cache too), a prefill at
    batch 1, one at batch 3.  The generic decode step serves no prefill, and the prefill at 1 takes
    the tensors of the frame's first compile: it traces a candidate, proved at 1, which then serves
    the prefill at 3 (without its AOT trace: the candidate's answers, Inductor's constant
    folder's contiguity test among them, stand in).  Three compiles where stock, and this before the
    candidate was judged by the tensors a call takes, compile four; outputs equal eager's (``buffered_step``'s
    prefill at 1 is refused: its lowering acted on "is the batch 1?" where nothing makes it moot).  torch's
    caches off: a candidate served from them has no stand-in (its answers were not seen here)."""
    monkeypatch.setattr(torch._inductor.config, "fx_graph_cache", False)
    monkeypatch.setattr(torch._functorch.config, "enable_autograd_cache", False)
    w = torch.randn(8)
    calls = [(torch.randn(2, 7, 8), torch.rand(2, 7), None),
             (torch.randn(2, 1, 8), torch.rand(2, 1), torch.randn(2, 3, 8)),
             (torch.randn(1, 11, 8), torch.rand(1, 11), None),
             (torch.randn(3, 5, 8), torch.rand(3, 5), None)]
    compiled = verishape.compile(fn, backend=backend)
    for x, mask, cache in calls:
        torch.testing.assert_close(compiled(x, mask, w, cache), fn(x, mask, w, cache))
    assert counters["verishape"]["candidates"] == 1
    assert counters["verishape"]["reused_generic"] == 1
    assert counters["verishape"]["aot_trace_stood_in"] == 1
    if fn is buffered_step:
        # the reinplacing pass's fake run of the buffer's views asks "is the batch 1?" too (first asked where it is
        # moot, in the constant folder): an answer the lowering acted on, false at 1, so the prefill at 1 compiles
        refusals = [why for e in frames.envs_for(fn.__code__) for _, why in e.verishape_log.not_widened]
        assert any("_inplace_generalized_scatter" in why for why in refusals), refusals
        assert counters["verishape"]["reused_at_size_1"] == 0
        return
    assert counters["verishape"]["reused_at_size_1"] == 1
    assert counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] + counters["verishape"]["candidates"] == 3


def test_a_frames_first_compile_forgets_the_tensors_taken_before_a_reset():
    """What an earlier Dynamo session compiled is no earlier compile of this one: after a reset, only
    the tensors of the frame's compiles since count (``candidate.other_inputs``)."""
    from verishape.compiler.widen import candidate

    compiled = verishape.compile(decoder_step, backend="aot_eager")
    w = torch.randn(8)
    compiled(torch.randn(2, 7, 8), torch.rand(2, 7), w, None)
    compiled(torch.randn(2, 1, 8), torch.rand(2, 1), w, torch.randn(2, 3, 8))
    assert len(candidate._inputs_seen[decoder_step.__code__]) == 2
    torch._dynamo.reset()
    compiled(torch.randn(2, 1, 8), torch.rand(2, 1), w, torch.randn(2, 3, 8))
    assert len(candidate._inputs_seen[decoder_step.__code__]) == 1
