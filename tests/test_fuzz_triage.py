"""The maintainer's checks (verishape.fuzz.triage) and root-cause grouping (rootcause): each
test is one rule, on a real op whose behaviour the rule is about."""

import collections
import json

import pytest
import torch

from verishape.fuzz import rootcause
from verishape.fuzz.check import Verdict, check_point, check_trace_point, hint_point
from verishape.fuzz.inputs import Case, T
from verishape.fuzz.report import build_report, settings
from verishape.fuzz.repro_source import plans
from verishape.fuzz.trace import BACKED, UNBACKED, raise_site, run_traced
from verishape.fuzz.triage import PRIVATE_STORAGE, PRIVATE_UNSAFE, RUNTIME_INDEX_CHECK, ZERO_ONE, classify


def _unbacked_verdict(fn, case):
    notes = collections.Counter()
    trace = run_traced(fn, case, case.shapes(), UNBACKED, True)
    point = hint_point(trace, case.shapes())
    return trace, point, check_point(fn, case, trace, point, notes, "trace_point")


def test_unbacked_squeeze_keeping_size_1_dims_is_documented_after_moving_off_0_1():
    case = Case((T((5, 1, 5, 1), torch.float32),), {})
    trace, point, verdict = _unbacked_verdict(torch.squeeze, case)
    assert verdict.kind == "unbacked_silent_shape_mismatch" and verdict.blame == "meta"
    out = classify("squeeze", torch.squeeze, case, trace, point, verdict, collections.Counter())
    assert out.blame == "documented" and out.documented == ZERO_ONE
    assert any("static sizes: the fake tensor agrees" in e for e in out.evidence)
    assert any(e.startswith("0/1: moved") and "gone" in e for e in out.evidence)


def test_a_wrong_meta_at_static_sizes_stays_a_meta_bug_with_that_evidence():
    # adaptive_avg_pool3d's meta accepts an empty non-batch dim at any sizes (eager rejects)
    fn = torch.nn.functional.adaptive_avg_pool3d
    case = Case((T((0, 0, 0, 0, 0), torch.float32), (3, 3, 3)), {})
    trace, point, verdict = _unbacked_verdict(fn, case)
    assert verdict.kind == "unbacked_unchecked_error"
    out = classify("nn.functional.adaptive_avg_pool3d", fn, case, trace, point, verdict, collections.Counter())
    assert out.blame == "meta" and out.documented is None
    assert out.evidence == ("static sizes: the fake tensor accepts it too (the meta lacks the check at any sizes)",)


def test_a_meta_stricter_than_aten_but_equal_to_the_public_api_blames_eager():
    # channels 2, weight/bias/running stats of 3: aten accepts (and reads out of bounds)
    case = Case((T((4, 2, 3), torch.float32), T((3,), torch.float32), T((3,), torch.float32),
                 T((3,), torch.float32), T((3,), torch.float32), False, 0.1, 1e-5), {})
    verdict, trace = check_trace_point(torch.native_batch_norm, case, BACKED, True, collections.Counter())
    assert verdict is not None and verdict.kind == "meta_rejects_eager_accepts"
    assert verdict.site.startswith("torch/") and " in " in verdict.site
    out = classify("native_batch_norm", torch.native_batch_norm, case, trace, None, verdict, collections.Counter())
    assert out.blame == "eager"
    assert any("torch.nn.functional.batch_norm rejects" in e for e in out.evidence)


def test_private_and_storage_unchecked_paths_are_their_own_class():
    v = Verdict("meta_accepts_eager_rejects", "m", eager_error="IndexError: shape mismatch")
    case = Case((T((2,), torch.float32),), {})
    out = classify("_unsafe_masked_index", torch.abs, case, None, None, v, collections.Counter())
    assert (out.blame, out.evidence) == ("private", (PRIVATE_UNSAFE,))
    v = Verdict("shape_determined_permissive", "m", eager_error="RuntimeError: setStorage: sizes [1] out of bounds")
    out = classify("as_strided", torch.abs, case, None, None, v, collections.Counter())
    assert (out.blame, out.evidence) == ("private", (PRIVATE_STORAGE,))


def test_index_tensor_bounds_into_an_empty_dim_are_a_run_time_check_not_a_meta_bug():
    case = Case((T((0,), torch.float32), 0, T((3,), torch.int64, pool=(1,))), {})
    eager_error = "RuntimeError: index 1 is out of bounds for dimension 0 with size 0"
    v = Verdict("shape_determined_permissive", "fake tensor accepts", eager_error=eager_error)
    out = classify("gather", torch.gather, case, None, None, v, collections.Counter())
    assert out.blame == "documented" and out.documented == RUNTIME_INDEX_CHECK


def test_unbacked_symbolic_error_that_eager_shares_at_generic_sizes_is_documented():
    # gather with a uint8 index: eager accepts only an empty index, the unbacked trace assumes non-empty
    case = Case((T((3,), torch.float32), 0, T((0,), torch.uint8)), {})
    notes = collections.Counter()
    verdict, trace = check_trace_point(torch.gather, case, UNBACKED, True, notes)
    assert verdict is not None and verdict.kind == "symbolic_trace_error" and trace is not None
    out = classify("gather", torch.gather, case, trace, hint_point(trace, case.shapes()), verdict, notes)
    assert out.blame == "documented" and any("gone" in e for e in out.evidence)


def test_raise_site_names_the_innermost_python_meta_line():
    try:
        with torch._subclasses.fake_tensor.FakeTensorMode():
            torch.native_batch_norm(torch.empty(4, 2, 3), torch.empty(3), torch.empty(3), torch.empty(3),
                                    torch.empty(3), False, 0.1, 1e-5)
    except RuntimeError as exc:
        site = raise_site(exc)
    assert site.startswith("torch/") and ".py:" in site


def _record(op, kind, mode="backed", **extra):
    return {"op": op, "variant": "", "mode": mode, "kind": kind, "class": "", "message": extra.pop("message", ""),
            "eager_error": extra.pop("eager_error", ""), "meta_error": extra.pop("meta_error", ""),
            "documented": None, **extra}


def test_families_and_normalized_checks_group_witnesses_into_one_root_cause():
    assert rootcause.family("nn.functional.conv3d") == rootcause.family("nn.functional.conv1d") == "convNd"
    assert rootcause.family("squeeze_copy") == "squeeze"
    assert rootcause.family("_native_batch_norm_legit") == rootcause.family("native_batch_norm") == "batch_norm"
    err = "RuntimeError: max(): Expected reduction dim to be specified for input.numel() == 0."
    a = _record("max", "meta_accepts_eager_rejects", eager_error=err, meta_function="torch/_refs/x.py:1 in amax")
    b = _record("max", "unbacked_unchecked_error", mode="unbacked", eager_error=err,
                meta_function="torch/_refs/x.py:1 in amax")
    c = _record("squeeze", "stride_mismatch", message="output 0 of shape [2, 3]: meta strides [3, 1], eager [1, 2]")
    causes = rootcause.group([a, b, c])
    assert len(causes) == 2
    big = next(c for c in causes if len(c["witnesses"]) == 2)
    assert big["kinds"] == ["meta_accepts_eager_rejects", "unbacked_unchecked_error"]


def test_known_issues_file_marks_root_causes_and_bad_files_are_one_line(tmp_path):
    known = tmp_path / "known.json"
    known.write_text(json.dumps([{"issue": "pytorch/pytorch#1", "ops": ["upsample_nearest"], "match": "> 0|greater"}]))
    entries = rootcause.load_known(str(known))
    rec = _record("nn.functional.upsample_nearest", "meta_accepts_eager_rejects",
                  eager_error="RuntimeError: Input and output sizes should be greater than 0")
    other = _record("abs", "stride_mismatch", message="strides")
    causes = rootcause.group([rec, other], entries)
    assert [c["known_upstream"] for c in causes if c["family"] == "upsample_nearest"] == [["pytorch/pytorch#1"]]
    assert [c["known_upstream"] for c in causes if c["family"] == "abs"] == [[]]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(rootcause.KnownIssuesError, match="not JSON"):
        rootcause.load_known(str(bad))
    bad.write_text(json.dumps([{"ops": ["x"]}]))
    with pytest.raises(rootcause.KnownIssuesError, match="needs an \"issue\""):
        rootcause.load_known(str(bad))


def test_report_counts_by_blame_and_root_cause():
    recs = [_record("squeeze", "unbacked_silent_shape_mismatch", mode="unbacked", blame="documented",
                    documented=ZERO_ONE),
            _record("native_batch_norm", "meta_rejects_eager_accepts", blame="eager", meta_site="torch/a.py:1 in f"),
            _record("as_strided", "shape_determined_permissive", blame="private", eager_error="setStorage"),
            _record("logical_or", "stride_mismatch", blame="meta")]
    report = build_report([{"op": "x", "variant": "", "finding_records": recs}])
    s = report["summary"]
    assert (s["meta_bugs"], s["eager_bugs"], s["private_paths"], s["documented_divergences"]) == (1, 1, 1, 1)
    assert s["root_causes"]["total"] == 4 and all(f["root_cause"].startswith("RC") for f in report["findings"])


def test_repro_plans_keep_the_fuzzers_dispatcher_setting():
    record = {"case": "Case(args=(T((2, 3), torch.float32),), kwargs={})", "point": [[4, 3]],
              "python_dispatcher": True, "mode": "backed", "kind": "stride_mismatch"}
    assert {p.python_dispatcher for p in plans(record)} == {True}
    assert settings("backed", True)["python_dispatcher"] is True


def test_eager_internal_asserts_blame_eager_and_probability_checks_are_run_time_checks():
    case = Case((T((2, 2), torch.float32),), {})
    v = Verdict("unbacked_unchecked_error", "m", eager_error='RuntimeError: false INTERNAL ASSERT FAILED at "x.cpp":1')
    assert classify("linalg.ldl_factor", torch.abs, case, None, None, v, collections.Counter()).blame == "eager"
    case = Case((T((0,), torch.float32), 3), {"replacement": True})
    v = Verdict("shape_determined_permissive", "m",
                eager_error="RuntimeError: invalid multinomial distribution (sum of probabilities <= 0)")
    out = classify("multinomial", torch.multinomial, case, None, None, v, collections.Counter())
    assert out.blame == "documented" and "probab" in out.documented


def test_an_aten_restriction_the_public_api_never_meets_is_not_a_meta_bug():
    # native_group_norm's eager kernel wants a contiguous input; F.group_norm accepts this one
    case = Case((T((1, 6, 3), torch.float32, perm=(0, 2, 1)), T((6,), torch.float32), T((6,), torch.float32),
                 1, 6, 3, 2, 1e-5), {})
    v = Verdict("meta_accepts_eager_rejects", "m",
                eager_error="RuntimeError: Expected X.is_contiguous(memory_format) to be true, but got false.")
    out = classify("native_group_norm", torch.native_group_norm, case, None, None, v, collections.Counter())
    assert out.blame == "documented" and "torch.nn.functional.group_norm accepts" in out.evidence[-1]


def test_static_sizes_run_with_the_findings_dispatcher_setting():
    # With the python dispatcher, upsample_nearest's decomposition (what compiled code runs)
    # accepts an empty input that eager rejects; without it the meta registration crashes.
    fn = torch.nn.functional.interpolate
    case = Case((T((0, 0, 0), torch.float32),), {"size": 3, "mode": "nearest"})
    trace, point, verdict = _unbacked_verdict(fn, case)
    assert verdict.kind == "unbacked_unchecked_error"
    out = classify("nn.functional.interpolate", fn, case, trace, point, verdict, collections.Counter(), True)
    assert out.blame == "meta" and "accepts it too" in out.evidence[0]
    out = classify("nn.functional.interpolate", fn, case, trace, point, verdict, collections.Counter(), False)
    assert out.blame == "meta" and "crashes (TypeError" in out.evidence[0]


def test_meta_function_names_the_ops_own_registered_function():
    from verishape.fuzz.trace import meta_function
    empty = Case((T((0, 0, 0), torch.float32),), {"size": 3, "mode": "nearest"})
    # the python dispatcher runs the decomposition before any aten op reaches the fake mode
    assert "in _upsample_nearest_vec" in meta_function(torch.nn.functional.interpolate, empty, [(0, 0, 0)],
                                                        UNBACKED, True)
    # otherwise the function registered for the first aten overload; a C++ meta names the overload
    case = Case((T((0, 0, 0), torch.float32),), {})
    assert meta_function(torch.max, case, [(0, 0, 0)], UNBACKED, True).endswith("in meta_max (aten.max.default)")
    assert meta_function(torch.median, Case((T((0,), torch.float32), 0), {}), [(0,)], UNBACKED, True) == "aten.median.dim"
