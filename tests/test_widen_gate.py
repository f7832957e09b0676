"""The widening gate (``benchmarks/widen_gate.py``, issue 48): its comparison with the
reference, and CI's subset run for real (the decode sweep that a wave-5 change lost on every
decoder family, on two families, against the committed reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_loader import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gate():
    yield from load_benchmark("widen_gate")


def _row(**kw):
    return {"ran": True, "compiles": 2, "reused_at_1": True, "wrong": False, **kw}


def test_a_lost_reuse_a_compile_more_a_wrong_call_and_a_missing_row_are_drops(gate):
    ref = {"sweep/a/decode": _row(), "sweep/b/decode": _row(), "serve/a/static/x": _row(limit_hits=0),
           "corpus/inductor": {"ran": True, "reused": 3, "wrong": 0, "reused_programs": ["p", "q", "r"]}}
    now = {"sweep/a/decode": _row(compiles=3, reused_at_1=False, why="a refusal"),
           "sweep/b/decode": _row(wrong=True),
           "serve/a/static/x": _row(limit_hits=1),
           "corpus/inductor": {"ran": True, "reused": 3, "wrong": 0, "reused_programs": ["p", "q", "s"]}}
    drops, gains = gate.compare(now, ref)
    text = "\n".join(drops)
    assert "sweep/a/decode: compiles 2 -> 3 (a refusal)" in text
    assert "sweep/a/decode: reused_at_1 True -> False" in text
    assert "sweep/b/decode: differs from eager" in text
    assert "serve/a/static/x: limit_hits 0 -> 1" in text
    assert "corpus/inductor: 1 program(s) no longer reuse: r" in text
    assert gains == ["corpus/inductor: 1 program(s) reuse now: s"]
    # the same figures: nothing to say
    assert gate.compare(ref, ref) == ([], [])
    # a row that ran and now did not is a drop, named with its reason
    drops, _ = gate.compare({"sweep/a/decode": {"ran": False, "why": "crashed"}}, ref)
    assert drops == ["sweep/a/decode: ran in the reference, now not: crashed"]


def test_bad_arguments_are_one_line_and_exit_2(gate, capsys, tmp_path):
    assert gate.main(["--parts", "sweeps,nonsense"]) == 2
    assert "unknown ['nonsense']" in capsys.readouterr().err
    assert gate.main(["--reference", str(tmp_path / "none.json")]) == 2
    assert "no reference" in capsys.readouterr().err


def test_the_committed_reference_holds_every_row_the_gate_runs(gate):
    ref = json.loads((ROOT / "benchmarks" / "reference" / "widen_gate.json").read_text())["rows"]
    expected = {f"sweep/{f}/{s}" for f, s in gate.SWEEP_ROWS}
    expected |= {f"serve/{f}/{c}/{m}" for f in gate.SERVE_FAMILIES for c in ("dynamic", "static")
                 for m in gate.SERVE_MIXES}
    expected |= {f"serve/{f}/{c}/{gate.HELDOUT_MIX[0]}" for f in gate.HELDOUT_FAMILIES for c in ("dynamic", "static")}
    assert not set(gate.HELDOUT_FAMILIES) & set(gate.SERVE_FAMILIES), "held out: run by no other serve row"
    expected |= {"corpus/inductor", "fuzz/inductor", "fuzz/one_early/inductor"}
    expected |= {f"serve/{f}/static/issue38/hf" for f in gate.HF_FAMILIES}
    assert expected <= ref.keys(), sorted(expected - ref.keys())
    assert not [k for k, r in ref.items() if r.get("wrong")], "the reference holds no wrong call"
    decode = [k for k in ref if k.endswith("/decode")]
    assert len(decode) >= 8 and all(ref[k]["reused_at_1"] for k in decode), "the decode step reuses on every family"


@pytest.mark.slow
def test_ci_subset_passes_against_the_reference(gate, tmp_path):
    """The decode sweep on two families, each in a fresh process: no drop."""
    assert gate.main(["--fast", "--json", str(tmp_path / "gate.json")]) == 0
    result = json.loads((tmp_path / "gate.json").read_text())
    assert result["drops"] == [] and {k for k in result["rows"]} == {"sweep/phi3/decode", "sweep/llama/decode"}
    assert all(r["reused_at_1"] and r["compiles"] == 2 for r in result["rows"].values())
