"""The finding kinds a user of compiled code hits (a runtime assert of unbacked semantics, a
specialized dynamic dim), shape-determined permissiveness, and the report that keeps meta
bugs apart from documented divergences.  Custom ops registered here are small on purpose:
each has a fake that is right or wrong in exactly one way."""

import collections

import torch

from verishape.fuzz.check import SIZE_OBLIVIOUS, SPECIALIZED, check_point, hint_point
from verishape.fuzz.fuzzer import FuzzConfig, fuzz_target
from verishape.fuzz.inputs import Case, T
from verishape.fuzz.ops import Target, custom_target
from verishape.fuzz.report import build_report, text_summary
from verishape.fuzz.trace import BACKED, UNBACKED, run_traced


@torch.library.custom_op("verishape_kinds_test::to3", mutates_args=())
def to3(x: torch.Tensor) -> torch.Tensor:
    """Eager broadcasts a size 1 (or keeps a size 3) to 3."""
    return x.expand(3).clone()


@to3.register_fake
def _to3_fake(x):
    return x.expand(3).clone()   # right; unbacked, it asserts Eq(u0, 3)


@torch.library.custom_op("verishape_kinds_test::copy_even", mutates_args=())
def copy_even(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@copy_even.register_fake
def _copy_even_fake(x):
    torch._check(x.shape[0] >= 4)   # deliberately stricter than eager (any size)
    return x.new_empty(x.shape)


@torch.library.custom_op("verishape_kinds_test::copy_big", mutates_args=())
def copy_big(x: torch.Tensor) -> torch.Tensor:
    if x.shape[0] < 4:
        raise RuntimeError("copy_big: expected at least 4 elements")
    return x.clone()


@copy_big.register_fake
def _copy_big_fake(x):
    torch._check(x.shape[0] >= 4)   # exactly what eager checks
    return x.new_empty(x.shape)


@torch.library.custom_op("verishape_kinds_test::copy3", mutates_args=())
def copy3(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@copy3.register_fake
def _copy3_fake(x):
    torch._check(x.shape[0] == 3)   # pins a dynamic size eager does not care about
    return x.new_empty(x.shape)


@torch.library.custom_op("verishape_kinds_test::rows_of", mutates_args=())
def rows_of(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.index_select(x, 0, idx)


@rows_of.register_fake
def _rows_of_fake(x, idx):
    return x.new_empty((idx.shape[0], *x.shape[1:]))   # never rejects an empty source


@torch.library.custom_op("verishape_kinds_test::chol", mutates_args=())
def chol(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.cholesky(x)


@chol.register_fake
def _chol_fake(x):
    torch._check(x.shape[-1] == x.shape[-2])
    return x.new_empty(x.shape)


def _fuzz(op, seeds, mode, max_examples=15):
    target = custom_target(op, seeds=seeds)
    return fuzz_target(target, FuzzConfig(max_examples=max_examples, seed=0, modes=(mode,)))


def _kinds(result):
    return {f["kind"]: f for f in result["finding_records"]}


def test_unbacked_assert_rejecting_a_broadcast_is_a_documented_divergence():
    result = _fuzz(to3, [Case((T((3,), torch.float32, pool=(1.0,)),), {})], UNBACKED)
    found = _kinds(result)["compiled_rejects_unbacked_assert"]
    assert found["documented"] == SIZE_OBLIVIOUS and "Eq(u0, 3)" in found["message"]
    assert found["class"] == "compiled_rejects"


def test_unbacked_assert_rejecting_a_generic_size_is_a_meta_bug():
    result = _fuzz(copy_even, [Case((T((5,), torch.float32),), {})], UNBACKED)
    found = _kinds(result)["compiled_rejects_unbacked_assert"]
    assert found["documented"] is None and "4 <= u0" in found["message"]
    # the point is a generic size (>= 2) where eager accepts, not a 0/1 explained by torch
    assert found["point"] is None or found["point"][0][0] in (2, 3)


def test_unbacked_assert_where_eager_rejects_too_is_no_finding():
    result = _fuzz(copy_big, [Case((T((5,), torch.float32),), {})], UNBACKED)
    assert result["finding_records"] == []
    assert result["notes"].get("unbacked_assert_fires", 0) > 0
    summary = build_report([result])["summary"]
    assert summary["meta_bugs"] == 0 and summary["documented_divergences"] == 0


def test_a_pinned_dynamic_size_eager_does_not_need_is_a_specialization():
    result = _fuzz(copy3, [Case((T((3,), torch.float32),), {})], BACKED)
    found = _kinds(result)["compiled_rejects_specialization"]
    assert found["documented"] == SPECIALIZED and found["where"] == "outside_guards"
    assert "pin t0_size0 to 3 (Eq(t0_size0, 3))" in found["message"]
    assert found["point"][0][0] != 3 and found["point"][0][0] >= 2


def test_a_pin_the_op_itself_needs_is_no_specialization():
    # expand to 3 pins the size to 3 in a backed trace, but eager rejects every other size >= 2
    target = Target("expand_to_3", "", lambda x: x.expand(3),
                    lambda: [Case((T((3,), torch.float32),), {})], "lambda x: x.expand(3)")
    result = fuzz_target(target, FuzzConfig(max_examples=15, seed=0, modes=(BACKED,)))
    assert "compiled_rejects_specialization" not in _kinds(result)
    assert result["notes"].get("pinned_sizes", 0) > 0


def test_index_select_from_an_empty_dim_is_shape_determined():
    seeds = [Case((T((0, 2), torch.float32), T((2,), torch.int64, pool=(0,))), {})]
    result = _fuzz(rows_of, seeds, BACKED)
    found = _kinds(result)["shape_determined_permissive"]
    assert found["documented"] is None and "indexing axis" in found["eager_error"]


def test_an_index_out_of_range_stays_value_dependent():
    case = Case((T((3, 2), torch.float32), T((2,), torch.int64, pool=(7,))), {})
    notes = collections.Counter()
    trace = run_traced(rows_of, case, case.shapes(), BACKED, False)
    verdict = check_point(rows_of, case, trace, hint_point(trace, case.shapes()), notes, "trace_point")
    assert verdict is None and notes["excluded:value_dependent_error:index_range"] == 1


def test_cholesky_of_a_non_pd_matrix_stays_excluded_with_its_reason():
    seeds = [Case((T((3, 3), torch.float32, pool=(-1.0, 2.0)),), {})]
    result = _fuzz(chol, seeds, BACKED, max_examples=8)
    assert result["finding_records"] == []
    report = build_report([result])
    excluded = report["summary"]["excluded"]
    assert excluded.get("value_dependent_error:linear_algebra", 0) > 0
    assert "value_dependent_error" in report["summary"]["excluded_reasons"]


def test_summary_and_text_keep_meta_bugs_and_documented_divergences_apart():
    bug = _fuzz(copy_even, [Case((T((5,), torch.float32),), {})], UNBACKED)
    doc = _fuzz(to3, [Case((T((3,), torch.float32, pool=(1.0,)),), {})], UNBACKED)
    report = build_report([bug, doc])
    s = report["summary"]
    assert s["meta_bugs"] >= 1 and s["documented_divergences"] >= 1
    assert s["meta_bugs"] + s["documented_divergences"] == s["findings"]
    assert s["by_class"]["compiled_rejects"] == s["findings"]
    text = text_summary(report)
    bugs_at, doc_at = text.index("meta bugs ("), text.index("documented divergences (")
    assert bugs_at < text.index("copy_even") < doc_at < text.index("to3")


def test_check_meta_fails_on_meta_bugs_and_on_documented_divergences_only_when_asked():
    """An op author's correct fake that broadcasts a size 1 is not their bug: torch's
    unbacked semantics assert the size is not 1.  ``check_meta`` passes it by default and
    reports it with ``documented=True``; a fake stricter than eager always fails."""
    import pytest

    from verishape.testing import check_meta

    samples = [(torch.ones(3),)]
    check_meta(to3, samples, mode="unbacked", max_examples=20)
    with pytest.raises(AssertionError, match="compiled_rejects_unbacked_assert"):
        check_meta(to3, samples, mode="unbacked", max_examples=20, documented=True)
    with pytest.raises(AssertionError, match="compiled_rejects_unbacked_assert"):
        check_meta(copy_even, [(torch.ones(5),)], mode="unbacked", max_examples=20)


def test_a_singular_reshaped_matrix_is_value_dependent_not_shape_determined():
    """``linalg.tensorinv`` inverts the input reshaped to a square matrix: every generic
    filling (the identity on the last two dims included) is singular there, yet other values
    are invertible.  Linear-algebra errors are excluded without retrying."""
    from verishape.fuzz.check import Notes, check_trace_point

    fn = lambda x: torch.linalg.tensorinv(x, ind=1)   # noqa: E731 - a one-off callable
    case = Case(args=(T((4, 2, 2), torch.float32, pool=(1.0,)),), kwargs={})
    notes: Notes = collections.Counter()
    verdict, _ = check_trace_point(fn, case, BACKED, True, notes)
    assert verdict is None
    assert notes["excluded:value_dependent_error:linear_algebra"] == 1
