"""Building blocks of ``fuzz-meta``: tensor recipes, repro printing, solver-picked sizes,
and what the comparison excludes (and why)."""

import collections

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verishape.fuzz import compare
from verishape.fuzz.check import check_trace_point, replay
from verishape.fuzz.compare import Eager, diff, is_value_error
from verishape.fuzz.inputs import Case, T, build, case_source, real_tensor
from verishape.fuzz.sizes import cap_for_rank, edges, pick, shapes_at
from verishape.solvers.concrete import holds
from verishape.fuzz.strategies import layouts, mutated_cases, shapes, strides
from verishape.fuzz.trace import BACKED, UNBACKED, OutMeta, run_traced


def test_layout_recipes_give_the_strides_they_promise():
    t = real_tensor(T((3, 4), torch.float32, perm=(1, 0)))
    assert t.shape == (3, 4) and t.stride() == (1, 3)
    t = real_tensor(T((3, 4), torch.float32, stride="pad"))
    assert t.shape == (3, 4) and t.stride() == (5, 1) and t.storage_offset() == 1
    t = real_tensor(T((3, 4), torch.float32, stride="double"))
    assert t.shape == (3, 4) and t.stride() == (8, 2)


@settings(max_examples=40)
@given(st.data())
def test_every_drawn_layout_has_the_drawn_shape(data):
    shape = data.draw(shapes(max_rank=4))
    layout = data.draw(layouts(len(shape)))
    t = build(list(shape), layout, lambda base: torch.empty(base, device="meta"))
    assert tuple(t.shape) == shape
    assert len(data.draw(strides(shape))) == len(shape)
    assert all(s <= cap_for_rank(len(shape)) for s in shape)


def test_pool_values_fill_the_tensor_cyclically():
    t = real_tensor(T((2, 3), torch.int64, pool=(0, 1)))
    assert t.reshape(-1).tolist() == [0, 1, 0, 1, 0, 1]


def test_case_source_round_trips():
    case = Case((T((2, 3), torch.float32, perm=(1, 0), pool=(0.5,)), [1, -1], None, float("inf")),
                {"dim": 1, "dtype": torch.int64, "out_size": (2,)})
    again = eval(case_source(case), {"Case": Case, "T": T, "torch": torch})
    assert case_source(again) == case_source(case)


@settings(max_examples=20)
@given(st.data())
def test_mutated_cases_keep_ranks_and_dtypes(data):
    seed_case = Case((T((3, 4), torch.float32), T((4,), torch.int64, pool=(1, 2))), {"alpha": 2})
    case = data.draw(mutated_cases([seed_case]))
    assert [len(s) for s in case.shapes()] == [2, 1]
    assert [s.dtype for s in case.leaves()] == [torch.float32, torch.int64]
    assert case.kwargs == {"alpha": 2}


def _view_trace():
    case = Case((T((4, 6), torch.float32), (-1, 8)), {})
    return case, run_traced(torch.reshape, case, case.shapes(), BACKED, False)


def test_backed_trace_records_sizes_guards_and_ranges():
    case, trace = _view_trace()
    assert trace.error is None and len(trace.dims) == 2
    assert trace.guards, "reshape to (-1, 8) must guard on divisibility"
    out = trace.outputs[0]
    env = {s: h for s, h in zip(trace.dims, (4, 6))}
    assert [int(compare.predict(trace, env)[0].shape[i]) for i in range(2)] == [3, 8]
    assert out.dtype == torch.float32


def test_solver_points_satisfy_every_condition_and_stay_small():
    case, trace = _view_trace()
    for target in (0, 2, 5, 64):
        point = pick(trace, [2], {sym: target for sym in trace.dims})
        assert point is not None and holds(trace.conditions(), point)
        assert all(v <= cap_for_rank(2) for v in point.values())
        a, b = shapes_at(trace, case.shapes(), point)[0]
        assert (a * b) % 8 == 0


def test_outside_points_break_the_chosen_condition():
    case, trace = _view_trace()
    guard = trace.guards[0]
    point = pick(trace, [2], {sym: 3 for sym in trace.dims}, violate=guard)
    assert point is not None and not holds([guard], point)
    assert 3 in edges(trace) or edges(trace)


def test_unbacked_trace_turns_checks_into_runtime_asserts():
    case = Case((T((3, 4), torch.float32), T((3, 4), torch.float32)), {})
    trace = run_traced(torch.add, case, case.shapes(), UNBACKED, False)
    assert trace.error is None and trace.asserts and not trace.guards


def test_zero_element_and_size_one_strides_are_not_compared():
    notes = collections.Counter()
    meta = [OutMeta((0, 3), (3, 1), 0, torch.float32)]
    assert diff(meta, "1:T", Eager([OutMeta((0, 3), (1, 1), 0, torch.float32)], "1:T"), notes) is None
    assert notes["zero_numel_strides"] == 1
    meta = [OutMeta((1, 3), (3, 1), 0, torch.float32)]
    assert diff(meta, "1:T", Eager([OutMeta((1, 3), (7, 1), 0, torch.float32)], "1:T"), notes) is None
    d = diff([OutMeta((2, 3), (3, 1), 0, torch.float32)], "1:T",
             Eager([OutMeta((2, 3), (1, 2), 0, torch.float32)], "1:T"), notes)
    assert d is not None and d.kind == "stride_mismatch"


def test_value_dependent_errors_are_recognised():
    assert is_value_error(RuntimeError("index 7 is out of bounds for dimension 0 with size 3"))
    assert is_value_error(RuntimeError("INDICES element is out of DATA bounds, id=2 axis_dim=2"))
    assert not is_value_error(RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"))


def test_data_dependent_index_errors_are_excluded():
    # narrow with a tensor start: meta reads the value into an unbacked size, eager then
    # rejects the value; that is not a meta bug.
    case = Case((T((2, 2), torch.float32), 1, T((), torch.int64, pool=(2,)), 2), {})
    notes = collections.Counter()
    verdict, _ = check_trace_point(torch.narrow, case, BACKED, False, notes)
    assert verdict is None and notes["excluded:data_dependent_values"] == 1


def test_replay_passes_on_a_correct_op_and_fails_on_a_wrong_one():
    case = Case((T((3, 4), torch.float32),), {})
    replay(torch.abs, case, mode=BACKED, point=((5, 2),))

    def wrong(x):   # eager and fake disagree: the fake branch drops a row
        if isinstance(x, torch._subclasses.fake_tensor.FakeTensor):
            return x[1:].clone()
        return x.clone()

    try:
        replay(wrong, case, mode=BACKED)
    except AssertionError as exc:
        assert "shape_mismatch" in str(exc)
    else:
        raise AssertionError("replay did not report the difference")
