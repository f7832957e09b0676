"""The widening benchmarks' runners: the campaign draws the same distinct programs for a
seed and summarizes what its workers report; bad arguments and a missing GPU are one line
and exit 2."""

from __future__ import annotations

import json

import pytest

from bench_loader import load_benchmark


@pytest.fixture
def fuzz():
    yield from load_benchmark("widen_fuzz")


def test_the_campaign_draws_the_same_distinct_programs_for_a_seed(fuzz):
    a, b = fuzz.draw(6, 3, 4), fuzz.draw(6, 3, 4)
    assert [p.source for p in a] == [p.source for p in b]
    assert len(a) == 6 and len({p.source for p in a}) == 6 and all(p.lines for p in a)
    assert [p.source for p in fuzz.draw(6, 4, 4)] != [p.source for p in a]


def test_the_summary_counts_reuse_wrong_and_reasons(fuzz):
    progs = fuzz.draw(3, 0, 3)
    rows = [{"status": "ran", "compiles": 2, "reuses": 1, "wrong": [], "other_differences": [], "refusal_kinds": [],
             "seconds": 1.0},
            {"status": "ran", "compiles": 2, "reuses": 0, "wrong": ["size 1: values differ"], "other_differences": [],
             "refusal_kinds": ["a generic guard excludes 1"], "seconds": 2.0},
            {"status": "crash"}]
    s = fuzz.summarize(progs, {"inductor": rows})["inductor"]
    assert (s["compiled"], s["reused"], s["crashes"], s["reuse_rate"]) == (2, 1, 1, 0.5)
    assert s["refusal_reasons"] == {"a generic guard excludes 1": 1}
    assert s["wrong"][0]["program"] == progs[1].source


@pytest.mark.parametrize("name,argv,says", [
    ("widen_fuzz", ["--programs", "0"], "--programs and --jobs must be at least 1"),
    ("widen_models", ["--models", "gpt5"], "unknown model or sweep"),
    ("widen_depth", ["--models", "bert"], "--models takes gpt2,llama"),
    ("widen_corpus", ["--only", "no_such_program"], "--only names no program"),
    ("serve_loop", ["--families", "gpt5"], "unknown family, cache or variant"),
    ("serve_loop", ["--variants", "stock,torch"], "unknown family, cache or variant"),
    ("serve_loop", ["--requests", "0"], "outside 1..7"),
    ("serve_loop", ["--mix", "2x"], "BATCHxPROMPT"),
    ("serve_loop", ["--mix", "0x3"], "BATCHxPROMPT"),
    ("serve_loop", ["--layers", "0"], "must be at least 1"),
    ("serve_loop", ["--sliding-window", "1"], "must be at least 2"),
    ("widen_exportdb", ["--only", "static_if,no_such_example"], "names no ExportDB example"),
    ("serve_paths", ["--families", "gpt5"], "unknown family or cache"),
    ("serve_paths", ["--caches", "paged"], "unknown family or cache"),
    ("serve_paths", ["--mix", "3"], "BATCHxPROMPT"),
    ("serve_paths", ["--sliding-window", "1"], "must be at least 2"),
    ("triton_questions", ["--gpu-json", "/no/such.json"], "is not a file"),
    ("layout_copy_cost", ["--lengths", "2"], "must be integers >= 4"),
    ("warm_restart", ["--workloads", "gpt5"], "unknown workload or start"),
    ("warm_restart", ["--starts", "warm"], "must begin with cold"),
    ("generic_recompile_cost", ["--batches", "8"], "needs two or more sizes >= 2"),
    ("generic_recompile_cost", ["--batches", "8,x"], "needs two or more sizes >= 2"),
    ("generic_recompile_cost", ["--calls", "0"], "must be at least 1"),
    ("compile_cost", ["--rows", "warm_mlp,nope"], "--rows nope: no such row"),
    ("compile_cost", ["--rounds", "0"], "--rounds 0: needs at least 1"),
])
def test_bad_arguments_are_one_line_and_exit_2(name, argv, says, capsys):
    module = next(load_benchmark(name))
    assert module.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


@pytest.mark.parametrize("name,argv", [("gpu_divisibility", []), ("gpu_scale", []),
                                       ("serve_loop", ["--device", "cuda"]),
                                       ("generic_recompile_cost", ["--device", "cuda"])])
def test_gpu_benchmarks_say_they_need_a_gpu(name, argv, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the benchmark would run")  # only on a GPU machine
    module = next(load_benchmark(name))
    assert module.main(argv) == 2
    assert "needs a CUDA device" in capsys.readouterr().err


@pytest.mark.parametrize("kernel_cache", ["fresh", "shared"])
def test_each_served_child_builds_its_kernels_in_a_folder_of_its_own(kernel_cache, tmp_path, monkeypatch):
    """With torch's caches off, ``--kernel-cache fresh`` (the default) gives each child an empty Inductor
    cache folder of its own, removed after it (a first run's seconds: no kernel another run built is
    loaded); ``shared`` leaves the machine's.  The children are stood in for: what they are handed is checked."""
    import os
    import subprocess

    module = next(load_benchmark("serve_loop"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    seen = []

    def child(cmd, **kwargs):
        folder = kwargs["env"].get("TORCHINDUCTOR_CACHE_DIR")
        seen.append((folder, folder is not None and os.path.isdir(folder) and not os.listdir(folder)))
        row = {"family": cmd[3], "cache": cmd[4], "variant": cmd[5], "inductor_compiles": 1,
               "served_from_torch_caches": 0, "dynamo_frames": 1, "recompile_limit_hits": 0, "reused": 0,
               "compile_s": 1.0, "wall_s": 1.0, "tokens_per_s": 1.0, "errors": 0, "tokens_equal": True, "requests": []}
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(row) + "\n", stderr="")

    monkeypatch.setattr(module.subprocess, "run", child)
    out = tmp_path / "serve.json"
    assert module.main(["--families", "llama", "--caches", "dynamic,static", "--kernel-cache", kernel_cache,
                        "--json", str(out)]) == 0
    assert len(seen) == 4 and json.loads(out.read_text())["kernel_cache"] == kernel_cache
    if kernel_cache == "fresh":
        assert all(empty for _, empty in seen) and len({folder for folder, _ in seen}) == 4
        assert not any(os.path.exists(folder) for folder, _ in seen)
    else:
        assert seen == [(None, False)] * 4


@pytest.mark.slow
def test_a_served_decoder_compiles_four_times_with_either_cache(tmp_path):
    """Issue 38's loop, small: tiny LLaMA, three requests (batch 2, then 1, then 3), the
    dynamic and the static cache, stock and verishape side by side.  Verishape compiles the
    prefill static, the first decode step generic (a recompile: every input size a
    symbol), the batch-1 prefill, the generic prefill: 4, and reuses the rest (batch 1 of
    the decode, the dynamic cache's contiguous layout on a copy); stock compiles more.
    Tokens equal eager's on both sides."""
    module = next(load_benchmark("serve_loop"))
    out = tmp_path / "serve.json"
    assert module.main(["--families", "llama", "--caches", "dynamic,static", "--mix", "2x7,1x11,3x5",
                        "--kernel-cache", "shared", "--json", str(out)]) == 0
    rows = {(r["cache"], r["variant"]): r for r in json.loads(out.read_text())["rows"]}
    for cache in ("dynamic", "static"):
        stock, mine = rows[(cache, "stock")], rows[(cache, "verishape")]
        assert stock["tokens_equal"] and mine["tokens_equal"]
        assert mine["inductor_compiles"] <= 4 < stock["inductor_compiles"]
        assert mine["reused_at_size_1"] >= 1
        assert mine["recompile_limit_hits"] == 0
    assert rows[("dynamic", "verishape")]["reused_relaid"] >= 1


@pytest.mark.slow
def test_the_floor_counts_paths_below_what_stock_traces(tmp_path):
    """Tiny Gemma 2 past a window of 4 with the dynamic cache, two requests (batch 2, then 1): the trace
    generic in every size makes fewer graphs than ``dynamic=True`` (which specializes batch 1) and
    automatic dynamic (static first), with no graph break (one would make graphs that are no paths); with
    batch 1 sent at 2, ``dynamic=True`` without duck sizing needs no more than with it."""
    module = next(load_benchmark("serve_paths"))
    out = tmp_path / "paths.json"
    assert module.main(["--families", "gemma2", "--caches", "dynamic", "--mix", "2x5,1x7",
                        "--sliding-window", "4", "--json", str(out)]) == 0
    row = json.loads(out.read_text())["rows"][0]
    traced = [row[setting] for setting in ("generic", "dynamic", "automatic", "no_one")]
    assert [t["graph_breaks"] for t in traced] == [0, 0, 0, 0]
    assert traced[0]["graphs"] < traced[1]["graphs"] <= traced[2]["graphs"], traced
    assert traced[3]["graphs"] <= traced[1]["graphs"]


@pytest.mark.slow
def test_hugging_face_s_own_compile_of_the_decode_step_compiles_less_under_enable(tmp_path):
    """Issue 38's last goal: Hugging Face's own compile of the static-cache decode step
    (batches 2, 1, 3) lowers 3 graphs stock; under ``verishape.enable()`` the batch-1
    recompile compiles a candidate generic in the batch, proved at 1 and at 3: 2.  Tokens
    equal eager's on both sides."""
    module = next(load_benchmark("serve_loop"))
    out = tmp_path / "hf.json"
    assert module.main(["--families", "llama", "--caches", "static", "--mix", "2x7,1x11,3x5",
                        "--variants", "hf-stock,hf-enable", "--kernel-cache", "shared", "--json", str(out)]) == 0
    rows = {r["variant"]: r for r in json.loads(out.read_text())["rows"]}
    stock, mine = rows["hf-stock"], rows["hf-enable"]
    assert stock["tokens_equal"] and mine["tokens_equal"]
    assert stock["graphs_lowered"] == 3
    assert mine["graphs_lowered"] == mine["inductor_compiles"] == 2
    assert mine["candidates"] == 1 and mine["reused_at_size_1"] == 1 and mine["reused_generic"] == 1


@pytest.mark.slow
def test_compile_cost_runs_a_pytorch_test_on_both_sides_and_says_the_ratio(tmp_path):
    """Issue 49's benchmark, one row, one round: PyTorch's ``test_conv1d_symint_padding`` under
    stock and with VeriShapeEnv in every torch module, each in its own process; the outputs
    equal, the solver calls bounded by the frame's budget, a ratio reported."""
    module = next(load_benchmark("compile_cost"))
    out = tmp_path / "cost.json"
    assert module.main(["--rows", "conv1d_padding", "--rounds", "1", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["outputs_equal"] and row["ratio_median"] > 0
    (ours,) = row["verishape"]["runs"]
    assert ours["solver_calls"] <= 8 and "solver_calls" not in row["stock"]["runs"][0]


def test_the_served_loop_builds_gemma_2_at_its_own_window_or_the_one_asked_for(monkeypatch):
    """Gemma 2's sliding-window layers: built with eager attention (transformers has no SDPA
    path for it), at its own window of 4096 (no request of a mix slides past it), or at
    ``--sliding-window``'s (passed to each child in ``SERVE_LOOP_SLIDING_WINDOW``); the eager
    copy has the same weights."""
    import torch

    module = next(load_benchmark("serve_loop"))
    model, reference = module.build("gemma2")
    assert model.config.sliding_window == 4096 and model.config._attn_implementation == "eager"
    ids = torch.tensor([[3, 5, 7]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)
    monkeypatch.setenv("SERVE_LOOP_SLIDING_WINDOW", "8")
    assert module.build("gemma2")[0].config.sliding_window == 8
    assert module.build("llama")[0].config.sliding_window is None  # a family without one keeps none


def test_exportdb_examples_are_swept_to_one_against_eager(tmp_path):
    """Two of PyTorch's ExportDB examples under ``aot_eager``: ``static_if`` reuses its generic
    artifact at 1, equal to eager; ``cond_operands`` (``torch.cond`` on ``x.shape[0] > 2``) is refused,
    saying why: at 1 Dynamo inlines the branch the predicate takes."""
    module = next(load_benchmark("widen_exportdb"))
    out = tmp_path / "exportdb.json"
    assert module.main(["--backend", "aot_eager", "--only", "static_if,cond_operands", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    rows = report["examples"]
    assert rows["static_if"]["reuses"] >= 1 and rows["static_if"]["wrong"] == []
    assert rows["cond_operands"]["reuses"] == 0 and "differs from the generic graph" in rows["cond_operands"]["refusals"][0]
    assert report["summary"]["swept"] == 2 and report["summary"]["wrong"] == []


def test_a_wrong_reuse_of_an_exportdb_example_fails_the_run(monkeypatch, capsys):
    """A reused call that differs from eager where stock does not is listed and exits 1."""
    from verishape.fuzz import widen_check

    def wrong_sweep(fn, make_args, sizes, backend="inductor", **kwargs):
        calls = [widen_check.Call(n, reused=n == 1, difference="values differ" if n == 1 else None) for n in sizes]
        return widen_check.Sweep(backend, calls, [], 2)

    monkeypatch.setattr(widen_check, "run_sweep", wrong_sweep)
    module = next(load_benchmark("widen_exportdb"))
    assert module.main(["--only", "static_if"]) == 1
    assert "wrong: 2" in capsys.readouterr().out
