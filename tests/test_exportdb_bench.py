"""benchmarks/exportdb.py: the row function on three small ExportDB examples.

Each example runs under both configurations (its own ``dynamic_shapes``, then ``Dim.AUTO``
on every dimension), non-strict: both exporters export, the programs match eager on the
example inputs, and the row keeps what each side did.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_loader import load_benchmark
from torch._export.db.examples import all_examples

ROOT = Path(__file__).resolve().parents[1]

EXAMPLES = ("scalar_output", "dynamic_shape_slicing", "user_input_mutation")


@pytest.fixture(scope="module")
def bench():
    yield from load_benchmark("exportdb")


def test_rows_of_three_small_examples_have_parity_and_record_both_sides(bench):
    cases = all_examples()
    for name in EXAMPLES:
        case = cases[name]
        for config in bench.CONFIGS:
            row = bench.measure(case, config)
            assert (row["example"], row["config"]) == (name, config)
            for side in ("stock", "verishape"):
                entry = row[side]
                assert entry["outcome"] == "exported", (name, config, side, entry)
                assert entry["matches_eager"] is True and "run_error" not in entry
                assert entry["export_s"] > 0 and entry["assert_nodes"] >= 0
            assert row["parity"] is True
            spec = bench.dynamic_shapes_for(case, config)
            if config == "auto":  # Dim.AUTO on every dimension of the one tensor input
                assert spec == {"x": {d: bench.Dim.AUTO for d in range(case.example_args[0].dim())}}
            else:
                assert spec is case.dynamic_shapes
    summary = bench.summarize([bench.measure(cases["user_input_mutation"], "own")])
    assert summary["rows"] == summary["parity"] == summary["both_export"] == 1
