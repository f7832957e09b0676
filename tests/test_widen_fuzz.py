"""The widening fuzzer: what the differential check calls a difference (fast), the program
grammar (fast), and a short derandomized run on both backends (slow; the long campaign is
``benchmarks/widen_fuzz.py``)."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch._dynamo.utils import counters
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import verishape
from verishape.fuzz import widen_check
from verishape.fuzz.widen_programs import OPS, B, eager_accepts, layout_sweep, one_early_sweep, phase_sweep, programs


def _diff(want, got, inputs=()):
    a = [t.clone() for t in inputs]
    return widen_check.difference(want, got, list(inputs), a, [], [])


def test_values_shapes_dtypes_and_strides_are_compared():
    x = torch.arange(6.0).reshape(2, 3)
    assert _diff(x, x.clone()) is None
    assert "values differ" in _diff(x, x + 1)
    assert "shape" in _diff(x, x.reshape(3, 2))
    assert "dtype" in _diff(x, x.double())
    assert "strides" in _diff(x, x.t().contiguous().t())
    # the stride of a dimension of size 1 addresses nothing: not a difference by torch's own
    # rule (stock Inductor returns other strides there than eager), but said apart
    assert _diff(torch.ones(1, 3), torch.ones(3, 1).t()) is None
    assert widen_check.size_one_strides(torch.ones(1, 3), torch.ones(3, 1).t())
    assert not widen_check.size_one_strides(x, x.t().contiguous().t())
    assert _diff(torch.tensor([float("nan")]), torch.tensor([float("nan")])) is None
    assert _diff((x, 3), (x.clone(), 4)) == "output[1]: 3 vs 4"


def test_storage_sharing_with_inputs_and_between_outputs_is_compared():
    x = torch.arange(4.0)
    x_copy = x.clone()
    # eager returns a view of its input, the other side a copy
    assert "storage shared" in widen_check.difference(x[1:], x_copy[1:].clone(), [x], [x_copy], [], [])
    assert widen_check.difference(x[1:], x_copy[1:], [x], [x_copy], [], []) is None
    y = torch.ones(4)
    assert "storage shared" in _diff((y, y[:2]), (y.clone(), y[:2].clone()))


def test_exceptions_and_input_mutations_are_compared():
    x = torch.ones(3)
    assert widen_check._compare(ValueError("a"), RuntimeError("b"), [x], [x]) is None
    assert "eager raises" in widen_check._compare(ValueError("a"), x, [x], [x])
    assert "compiled raises" in widen_check._compare(x, ValueError("a"), [x], [x])
    assert "input 0 after the call" in widen_check._compare(x, x, [torch.ones(3)], [torch.zeros(3)])


def test_a_reused_call_that_differs_is_wrong_unless_stock_differs_the_same_way():
    calls = [widen_check.Call(3, False, None), widen_check.Call(1, True, "output: values differ")]
    sweep = widen_check.Sweep("inductor", calls, [], 1)
    assert sweep.wrong == ["size 1 (call 1): output: values differ"]
    sweep.stock_differs[1] = True
    assert sweep.wrong == [] and sweep.other_differences == ["size 1 (call 1): output: values differ"]


def test_strides_stock_itself_returns_at_another_size_are_stocks_own_layout():
    """The H200's ``last_token``: stock pads a (2, 3) matmul output to strides (4, 1) at sizes
    3, 4, 5 (``pad_mm``'s benchmark) and not at 1; the reuse at 1 returns (4, 1), one of stock's
    own layouts for that shape.  Other strides, another shape, or values that differ too are
    still the reuse's."""
    padded = torch.zeros(2, 4)[:, :3]
    eager = torch.zeros(2, 3)
    assert "strides" in _diff(eager, padded)
    strides_only = widen_check._compare(eager, padded, [], []) is not None and \
        widen_check._compare(eager, padded, [], [], strides=False) is None
    assert strides_only
    ours = widen_check.Call(1, True, "output: strides (3, 1) vs (4, 1)", strides_only=True)
    stock = [(widen_check.Call(3, False, "output: strides (3, 1) vs (4, 1)", strides_only=True), torch.zeros(2, 4)[:, :3]),
             (widen_check.Call(1, False, None), eager)]
    assert widen_check._stocks_own_layout(padded, ours, stock)
    assert not widen_check._stocks_own_layout(torch.zeros(2, 5)[:, :3], ours, stock)  # strides stock never returned
    assert not widen_check._stocks_own_layout(torch.zeros(3, 4)[:, :3], ours, stock)  # another shape
    values_too = widen_check.Call(1, True, "output: values differ", strides_only=False)
    assert not widen_check._stocks_own_layout(padded, values_too, stock)


def _doubled_rows(x):
    return x * 2 + x.sum(1, keepdim=True)


def test_a_call_an_entry_made_by_a_reuse_at_another_size_serves_counts_as_reused():
    """The candidate at 1 is reused at 3 by a trace generic in the size; its entry serves 4
    with nothing traced.  That call runs the kept artifact, so it is checked as a reuse (its
    differences are wrong unless stock's): the warm fuzzer, seed 19, counted it as nothing."""
    calls = widen_check._calls(lambda: verishape.compile(_doubled_rows), _doubled_rows,
                               lambda n: [torch.randn(n, 4, generator=torch.Generator().manual_seed(n))], [6, 1, 3, 4],
                               reused_counter=lambda: counters["verishape"]["reused"], clear_frames=True)
    assert [c.reused for c, _ in calls] == [False, True, True, True]
    assert all(c.difference is None for c, _ in calls)
    assert counters["stats"]["unique_graphs"] == 3  # 6, the restarted attempt at 1, 3: nothing at 4


def test_refusal_reasons_are_counted_by_kind():
    r = widen_check.reason_class
    assert r("L['x'].size()[0]: false at size 1: the size s7 - 1 of the AOT graph node slice_1 is 0 at 1 "
             "(the general path needs at least 1)") == "a size of the AOT graph is not >= 1 at 1"
    assert r("L['x'].size()[0]: false at size 1: the lowering's answer 4*s7 > 4 answered True (asked in "
             "need_use_acc_helper <- reduction)") == "a lowering answer not right at 1 (asked in need_use_acc_helper)"
    assert r("L['h'].size()[1]: the AOT graph at size 1 differs from the generic graph at node 4 "
             "(('call_function', 'aten.addmm.default', ...") == "the AOT graph differs at aten.addmm.default"


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(programs())
def test_drawn_programs_are_python_that_eager_runs_at_generic_sizes(program):
    assert program.sweep[2] == 1 and program.sweep[0] != program.sweep[1] and min(program.sweep[:2]) >= 2
    fn = program.function()
    assert callable(fn) and "def program(" in program.source
    n = program.sweep[0]
    args = program.make_args(n)
    assert [tuple(a.shape) for a in args] == [tuple(int(d.subs(B, n)) for d in shape) for _, shape in program.inputs]
    assert all(torch.equal(a, b) for a, b in zip(args, program.make_args(n)))  # the same inputs each time
    assert eager_accepts(program) in (True, False)  # never raises itself, whatever the program does


def test_the_grammar_covers_what_the_issue_names():
    assert {"slice", "reduce", "binary", "view", "join", "matmul", "norm", "attention", "gather", "inplace",
            "branch", "size_value", "graph_break"} <= set(OPS)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@settings(max_examples=8, suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_no_drawn_program_reuses_a_wrong_artifact(backend, data):
    program = data.draw(programs(max_ops=5))
    if not eager_accepts(program):
        return
    sweep = widen_check.run_sweep(program.function(), program.make_args, program.sweep, backend=backend)
    assert sweep.wrong == [], f"{sweep.wrong}\n{program.source}"


@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(programs())
def test_a_layout_sweep_relays_the_same_values(program):
    make, sizes = layout_sweep(program)
    assert [abs(n) for n in sizes[:4]] == [program.sweep[0], program.sweep[1], program.sweep[1], program.sweep[3]]
    n = program.sweep[1]
    plain, relaid = make(n), make(-n)
    for a, b in zip(plain, relaid):
        assert torch.equal(a, b) and b._base is None
        if a.dim() >= 2:
            assert b.stride() == tuple(reversed(torch.zeros(tuple(reversed(a.shape))).stride()))


@pytest.mark.slow
@settings(max_examples=6, suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_no_drawn_program_reuses_a_wrong_artifact_in_another_layout(data):
    program = data.draw(programs(max_ops=5))
    if not eager_accepts(program):
        return
    make, sizes = layout_sweep(program)
    sweep = widen_check.run_sweep(program.function(), make, sizes, backend="inductor")
    assert sweep.wrong == [], f"{sweep.wrong}\n{program.source}"


@pytest.mark.slow
@settings(max_examples=8, suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_no_drawn_program_reuses_a_wrong_candidate(data):
    """Size 1 right after the first size: the recompile at 1 compiles a candidate generic in
    the size, reused at 1 and at later sizes only where proved; never differs from eager."""
    program = data.draw(programs(max_ops=5))
    if not eager_accepts(program):
        return
    sweep = widen_check.run_sweep(program.function(), program.make_args, one_early_sweep(program),
                                  backend="aot_eager")
    assert sweep.wrong == [], f"{sweep.wrong}\n{program.source}"


@pytest.mark.slow
@settings(max_examples=6, suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_no_drawn_program_called_as_a_decoder_forward_is_served_wrong(data):
    """Prefills and decode steps (an extra state argument, None or a tensor of the swept size): the
    prefill at 1 after a decode step traces a candidate, reused at 1 and at the later prefill only
    where proved; never differs from eager."""
    program = data.draw(programs(max_ops=5))
    if not eager_accepts(program):
        return
    fn, make_args, sizes = phase_sweep(program)
    sweep = widen_check.run_sweep(fn, make_args, sizes, backend="aot_eager")
    assert sweep.wrong == [], f"{sweep.wrong}\n{program.source}"


def test_a_phased_sweep_alternates_prefills_and_decode_steps_with_a_state_of_the_swept_size():
    from verishape.fuzz.widen_programs import Program

    program = Program([("x", (B, sympy.Integer(3)))], ["v1 = x * 2"], ["v1"], [2, 3, 1, 4, 1])
    fn, make_args, sizes = phase_sweep(program)
    assert sizes == [2, -2, 1, 4, -1, 3]
    prefill, decode = make_args(4), make_args(-4)
    assert prefill[1] is None and decode[1].shape == (4, 3)
    torch.testing.assert_close(fn(*prefill), prefill[0] * 2)
    out, state = fn(*decode)
    torch.testing.assert_close(out, decode[0] * 2)
    torch.testing.assert_close(state, decode[1].sum(1))
    # a code object of its own each time (widening's records of a frame are by code)
    assert phase_sweep(program)[0].__code__ is not fn.__code__
