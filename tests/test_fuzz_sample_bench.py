"""benchmarks/fuzz_sample.py: the hand-check sample is reproducible, only meta-blamed findings are
drawn, and a score needs verdicts for exactly the drawn sample."""

import pytest

from bench_loader import load_benchmark


@pytest.fixture
def bench():
    yield from load_benchmark("fuzz_sample")


def _f(op, blame, kind="stride_mismatch"):
    return {"op": op, "variant": "", "mode": "backed", "kind": kind, "blame": blame, "message": op}


def test_the_sample_is_seeded_and_draws_meta_bugs_only(bench):
    report = {"findings": [_f(f"op{i}", "meta") for i in range(10)] + [_f("doc", "documented"), _f("p", "private")]}
    a, b = bench.sample(report, 4, 22), bench.sample(report, 4, 22)
    assert a == b and len(a) == 4 and all(f["blame"] == "meta" for f in a)
    assert bench.sample(report, 4, 23) != a or len(report["findings"]) < 5


def test_score_counts_real_and_user_visible_and_refuses_a_partial_verdict_list(bench):
    report = {"findings": [_f("a", "meta"), _f("b", "meta"), _f("c", "meta")]}
    drawn = bench.sample(report, 3, 0)
    verdicts = [{"op": f["op"], "variant": "", "mode": "backed", "kind": "stride_mismatch",
                 "verdict": "real" if f["op"] != "c" else "not_real", "visible": f["op"] == "a", "reason": "r"}
                for f in drawn]
    assert bench.score(drawn, verdicts) == {"sampled": 3, "real": 2, "precision": 0.667, "user_visible": 1,
                                            "user_visible_share": 0.333}
    with pytest.raises(SystemExit, match="cover the drawn sample exactly"):
        bench.score(drawn, verdicts[:2])
    assert "| `a` | backed | `stride_mismatch` | real | yes | r |" in bench.markdown(drawn, verdicts)
