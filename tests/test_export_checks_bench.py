"""benchmarks/export_checks.py: the row function on two of the benchmark's own programs.

An input size below the declared minimum: the stock program accepts it and returns something
else than eager, verishape's program rejects it with its input check, which names the input
and the bound; the per-call timing runs on both sides.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_loader import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    yield from load_benchmark("export_checks")


def own(bench, name):
    return next(p for p in bench.OWN if p.name == name)


def test_size_one_below_dim_min_stock_returns_other_result_verishape_rejects(bench):
    row = bench.measure(own(bench, "center_rows"), "own", rounds=1, calls=3)
    assert row["stock_export"] == row["verishape_export"] == "exported"
    by_size = {r["size"]: r for r in row["inputs"]}
    assert set(by_size) == {0, 1} and all(r["kind"] == "out_of_range" for r in row["inputs"])
    one = by_size[1]
    assert one["eager"] == {"returns": "(1, 3)"}
    assert one["stock"]["accepted"] and one["stock"]["different"]  # the traced branch, not eager's
    assert not one["verishape"]["accepted"] and one["verishape"]["by_verishape_check"]
    assert "x.size(0) >= 2" in one["verishape"]["raises"] and "min=2" in one["verishape"]["raises"]
    assert row["cost"]["checks_added"] == 2  # min and max of Dim("b", min=2, max=64)
    assert row["cost"]["assert_nodes"] == {"stock": 0, "verishape": 2}
    assert row["cost"]["stock_us"] > 0 and row["cost"]["verishape_us"] > 0


def test_size_zero_below_dynamic_hint_min_and_size_one_only_outside_the_trace(bench):
    row = bench.measure(own(bench, "empty_safe_mean"), "own", rounds=1, calls=3)
    by_size = {r["size"]: r for r in row["inputs"]}
    zero, one = by_size[0], by_size[1]
    assert zero["kind"] == "out_of_range" and "Dim.DYNAMIC min=1" in zero["why"]
    assert zero["stock"]["accepted"] and zero["stock"]["returns"] == "(3,) NaN" and zero["stock"]["different"]
    assert "x.size(0) >= 1" in zero["verishape"]["raises"] and "min=1" in zero["verishape"]["raises"]
    # size 1 is declared (min=1) but below the traced range: both programs accept it
    assert one["kind"] == "traced_only" and one["stock"]["accepted"] and one["verishape"]["accepted"]
