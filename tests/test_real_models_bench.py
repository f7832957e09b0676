"""benchmarks/real_models.py: the runner's own logic.

The fast tests measure a sweep of the runner's ``toy`` module (no ``transformers``) in this
process and check that what the runner reports agrees with what Dynamo and the model
say independently: the calls that compiled are the cache entries left on ``forward``, the
outputs are eager's, verishape's questions add up.  The slow test runs one tiny
``transformers`` model through the command line, each variant in its own process.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path

import pytest
import torch

import verishape

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rm():
    spec = importlib.util.spec_from_file_location("real_models_bench", ROOT / "benchmarks" / "real_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def report(rm):
    """benchmarks/real_models_report.py, the tables and report files (imported by ``rm``)."""
    return sys.modules["real_models_report"]


def test_a_sweep_counts_the_compiles_dynamo_keeps(rm):
    """Batch sweep 2, 3, 1, 4, 1, 5: each call that compiled leaves one cache entry on
    ``forward`` (the toy has no graph break), a repeated size compiles nothing, and the
    compiled outputs are eager's."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    torch.manual_seed(0)
    case = rm.MODELS["toy"]()
    shapes = rm.SWEEPS["batch"]
    stock = rm.run_sweep(case, torch.compile, "aot_eager", shapes, checks=50)
    entries = len(_debug_get_cache_entry_list(type(case.module).forward.__code__))
    assert stock["compiles"] == len(stock["compiled_calls"]) == stock["graphs"] == stock["cache_entries"] == entries
    assert stock["compiled_calls"][0] == 0
    for i in stock["compiled_calls"]:
        assert shapes[i] not in shapes[:i]  # a size seen before never compiles again
    assert stock["max_abs_diff"] == 0.0
    assert stock["compile_cpu_s"] > 0 and stock["guard_check_us"] > 0
    assert "verishape" not in stock  # a stock compile has no decision log

    vs = rm.run_sweep(case, verishape.compile, "aot_eager", shapes, checks=50)
    log = vs["verishape"]
    assert log["questions"] == log["decided"] + log["undecided"] and log["errors"] == 0
    assert 0 <= log["range_only_decided"] <= log["range_only_questions"] <= log["questions"]
    assert log["premises_s"] <= log["decide_s"] and log["z3_s"] <= log["prove_s"] + 1e-3
    assert vs["max_abs_diff"] == 0.0
    # widening is on by default: the batch-1 call left a cache entry that runs the generic artifact
    assert vs["reused_calls"] == [2]
    assert vs["compiles"] + len(vs["reused_calls"]) == vs["cache_entries"] == stock["cache_entries"]


def test_the_spies_are_removed_after_a_sweep(rm):
    """Measuring patches ShapeEnv and verishape's decision path for one block only."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from verishape.core import premises as premises_mod
    from verishape.core.shape_env import VeriShapeEnv

    before = (ShapeEnv.__init__, ShapeEnv.produce_guards_verbose, VeriShapeEnv._decide, premises_mod.relevant)
    with rm._SPIES.active():
        assert ShapeEnv.__init__ is not before[0] and premises_mod.relevant is not before[3]
    assert (ShapeEnv.__init__, ShapeEnv.produce_guards_verbose, VeriShapeEnv._decide, premises_mod.relevant) == before


def test_frame_locals_follow_a_decorated_forward(rm):
    """Hugging Face wraps ``forward`` in a decorator with ``*args, **kwargs`` and a closure;
    the guard check needs the wrapper's locals, cells included."""
    import functools

    def deco(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            return func(self, *args, **kwargs)
        return wrapper

    class M(torch.nn.Module):
        @deco
        def forward(self, x, scale=2):
            return x * scale

    m = M()
    local = rm._frame_locals(m, {"x": 1})
    assert local["self"] is m and local["args"] == () and local["kwargs"] == {"x": 1}
    assert local["func"] is M.forward.__wrapped__


def test_widen_variant_follows_the_keyword(rm):
    has = "widen_specializations" in inspect.signature(verishape.compile).parameters
    assert (rm.compiler_for("widen") is not None) == has
    with pytest.raises(ValueError, match="variant must be one of"):
        rm.compiler_for("fast")


def _run(compiles: int, cpu: float, **extra):
    return {"compiles": compiles, "compile_cpu_s": cpu, "shape_guard_lines": 2, "guard_check_us": 10.0,
            "max_abs_diff": 0.0, **extra}


def test_table_gives_ratios_and_marks_a_missing_widen_variant(rm, report):
    log = {"decided": 3, "undecided": 5, "range_only_questions": 4, "decide_s": 0.5, "z3_s": 0.25, "premises_s": 0.1}
    rows = [{"model": "m", "variants": {
        "stock": {"available": True, "sweeps": {"batch": _run(3, 2.0)}},
        "verishape": {"available": True, "sweeps": {"batch": _run(3, 2.2, verishape=log)}},
        "widen": {"available": False},
    }}]
    line = report.markdown(rows).splitlines()[2]
    assert line.startswith("| m | batch | 3 / 3 / n/a | 2.00 | 1.10x | n/a | 3 / 5 | 4 | 0.50 (0.25, 0.10) |")
    assert report.summary(rows)["compile_cpu_ratio_median"] == pytest.approx(1.1)
    rows[0]["variants"]["widen"] = {"available": True, "sweeps": {"batch": _run(2, 2.4)}}
    assert "| 3 / 3 / 2 | 2.00 | 1.10x | 1.20x |" in report.markdown(rows)


def test_rounds_combine_to_the_median_compile_and_the_best_check(rm):
    runs = [{"sweeps": {"batch": _run(3, cpu, guard_check_us=us)}} for cpu, us in ((3.0, 9.0), (1.0, 12.0), (2.0, 10.0))]
    combined = rm.combined([{"error": "crashed"}, *runs])
    batch = combined["sweeps"]["batch"]
    assert batch["compile_cpu_s"] == 2.0 and batch["compile_cpu_s_rounds"] == [3.0, 1.0, 2.0]
    assert batch["guard_check_us"] == 9.0
    assert runs[0]["sweeps"]["batch"]["compile_cpu_s"] == 3.0  # the rounds themselves are left alone
    assert rm.combined([{"error": "crashed"}]) == {"error": "crashed"}


def test_an_unknown_model_is_refused_by_name(rm, capsys):
    with pytest.raises(SystemExit):
        rm.main(["--models", "gpt2,resnet"])
    err = capsys.readouterr().err
    assert "--models" in err and "resnet" in err and "gpt2" in err


@pytest.mark.slow
def test_a_tiny_transformers_model_through_the_command_line(rm, tmp_path):
    """GPT-2 (tiny config, random weights), batch sweep, each variant in its own process."""
    pytest.importorskip("transformers")
    out = tmp_path / "r.json"
    assert rm.main(["--models", "gpt2", "--sweeps", "batch", "--widen", "--json", str(out),
                    "--markdown", str(tmp_path / "r.md")]) == 0
    report = json.loads(out.read_text())
    (row,) = report["models"]
    stock, vs = row["variants"]["stock"], row["variants"]["verishape"]
    assert "error" not in stock and "error" not in vs
    s, v = stock["sweeps"]["batch"], vs["sweeps"]["batch"]
    assert s["max_abs_diff"] < 1e-5 and v["max_abs_diff"] < 1e-5
    assert s["compiles"] >= 2 and v["compiles"] <= s["compiles"]
    assert v["verishape"]["questions"] == v["verishape"]["decided"] + v["verishape"]["undecided"]
    widen = row["variants"]["widen"]
    if widen["available"]:
        assert "error" not in widen, widen.get("error")
        assert widen["sweeps"]["batch"]["max_abs_diff"] < 1e-5
    assert "| gpt2 | batch |" in (tmp_path / "r.md").read_text()


def test_interleaved_rounds_alternate_and_give_the_median_ratio(rm, monkeypatch):
    """``--interleave``: both variants measured in one process, the same number of times,
    the variant going first alternating, after one sweep of each that is not counted (the
    model's one-time work in the process billed to neither), each sweep compiling as often as
    in its own process; the ratio is of the medians."""
    import statistics

    swept = []
    real = rm.run_sweep

    def spy(*args, **kwargs):
        figures = real(*args, **kwargs)
        swept.append(figures["compile_cpu_s"])
        return figures

    monkeypatch.setattr(rm, "run_sweep", spy)
    out = rm.interleaved("toy", "aot_eager", ["batch"], rounds=3)
    f = out["sweeps"]["batch"]
    assert out["unmeasured_rounds"] == rm.UNMEASURED_ROUNDS == 1 and len(swept) == 2 * (1 + 3)
    # swept[0:2] not counted; then stock, verishape | verishape, stock | stock, verishape
    assert f["compile_cpu_s"] == {"stock": [swept[2], swept[5], swept[6]], "verishape": [swept[3], swept[4], swept[7]]}
    assert all(x > 0 for xs in f["compile_cpu_s"].values() for x in xs)
    # widening is on by default: the batch-1 call runs the generic artifact
    assert f["compiles"] == {"stock": [3], "verishape": [2]}
    med = {v: statistics.median(xs) for v, xs in f["compile_cpu_s"].items()}
    assert f["median_s"] == med and f["ratio"] == med["verishape"] / med["stock"]


def test_interleaved_widening_counts_backend_compiles_and_the_size_1_call(rm, report):
    """``--interleave --widen``: a size-1 call that ran the generic artifact is no backend
    compile, its CPU is still billed to the sweep, and the table and summary say so."""
    out = rm.interleaved("toy", "aot_eager", ["batch"], rounds=1, other="widen")
    f = out["sweeps"]["batch"]
    assert f["compiles"] == {"stock": [3], "widen": [2]}
    assert f["reused_calls"]["widen"] == [(2,)] and f["reused_calls"]["stock"] == [()]
    assert f["size_1_call"] == 2 and all(t > 0 for t in f["size_1_call_cpu_s"].values())
    assert max(f["max_abs_diff"].values()) == 0.0
    row = {"model": "toy", **out}
    assert report.interleave_summary([row], "widen")["batch"]["fewer_compiles"] == 1
    assert "| toy | batch | 3 / 2 |" in report.interleave_markdown([row], "widen", "aot_eager")
