"""Widening across a restart: a generic artifact served by torch's caches, reused at size 1
with the record its lowering left beside it (compiler/widen/record.py), and every way the
record can be missing or wrong giving stock behaviour with the reason.

A "warm process" is simulated in-process: Dynamo's caches and verishape's frames are dropped
(torch._dynamo.reset()), torch's on-disk caches and the records stay, in a cache folder of
the test's own (TORCHINDUCTOR_CACHE_DIR).  The remote cache: ``test_widen_remote``; the
record and the verdict themselves: ``test_widen_record``."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest
import torch
from torch._dynamo.utils import counters

import verishape
from verishape.compiler import frames
from verishape.compiler.widen import record
from widen_warm_helpers import LAST, Evil, broadcasts, flip_last_byte, make, records, sweep, verdicts


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory):
    """A cache folder after one cold process: batch 2 and 3 compiled (the generic artifact
    and its record on disk), batch 1 reused."""
    folder = str(tmp_path_factory.mktemp("cold"))
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    finally:
        torch._dynamo.reset()
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
    assert (lowered, reused) == (2, 1), refusals
    return folder


@pytest.fixture
def warm(cold_cache, tmp_path, monkeypatch):
    """A copy of the cold cache folder, in force for this test."""
    folder = str(tmp_path / "warm")
    shutil.copytree(cold_cache, folder)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", folder)
    return folder


@pytest.mark.slow
def test_a_warm_process_reuses_the_cached_generic_artifact_at_batch_one(warm):
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    assert counters["aot_autograd"]["autograd_cache_hit"] == 2
    (ev,) = [ev for env in frames.envs_for(broadcasts.__code__) for ev in env.verishape_log.widened]
    assert ev.from_cache and "from the widening record" in ev.describe()


@pytest.mark.slow
def test_a_warm_process_reuses_by_looking_the_comparison_up(warm, monkeypatch):
    """The cold process filed the size-1 AOT comparison as a verdict beside the artifact
    (compiler/widen/verdict.py): the warm process reuses at 1 tracing neither AOT graph, with
    the fingerprint the cold comparison gave; where the verdicts are damaged or gone, it
    traces both again and still reuses."""
    from verishape.compiler.widen import kept, reuse

    def never(*a, **k):
        raise AssertionError("traced again where a verdict answers")

    with monkeypatch.context() as m:
        m.setattr(reuse, "_aot_inference_graph", never)
        m.setattr(kept, "_traced_again", never)
        lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    (ev,) = [ev for env in frames.envs_for(broadcasts.__code__) for ev in env.verishape_log.widened]
    looked_up = ev.aot
    for path in verdicts(warm):
        flip_last_byte(path)
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    (ev,) = [ev for env in frames.envs_for(broadcasts.__code__) for ev in env.verishape_log.widened]
    assert ev.aot == looked_up is not None


@pytest.mark.slow
def test_a_warm_process_reuses_a_candidate_at_a_later_batch_by_the_verdict_its_answers_filed(
        tmp_path, monkeypatch):
    """Batches 2, 1, 3: a candidate at 1, reused at 1 and, at 3, by its unguarded answers
    proved in place of an AOT trace
    (Note [A candidate's answers stand in for its AOT trace]).
    That reuse files a verdict as a comparison does: a restarted process, whose
    candidate comes from torch's cache with no answers of its AOT stage to prove, reuses at
    1 and at 3 tracing no AOT graph."""
    from verishape.compiler.widen import kept, reuse

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    lowered, reused, refusals = sweep(broadcasts, (2, 1, 3))
    assert (lowered, reused, counters["verishape"]["aot_trace_stood_in"]) == (2, 1, 1), refusals

    def never(*a, **k):
        raise AssertionError("traced again where a verdict answers")

    monkeypatch.setattr(reuse, "_aot_inference_graph", never)
    monkeypatch.setattr(kept, "_traced_again", never)
    lowered, reused, refusals = sweep(broadcasts, (2, 1, 3))
    assert (lowered, reused, counters["verishape"]["reused_generic"]) == (0, 1, 1), refusals
    assert counters["verishape"]["aot_trace_stood_in"] == 0  # from torch's cache: the verdict answered


@pytest.mark.slow
def test_a_retrace_that_adds_facts_spoils_the_kept_compile(warm, monkeypatch):
    """Where tracing the cached artifact's AOT graph again changes its env's facts (a guard,
    a range, a replacement the cache entry does not check), no proof uses that env: stock
    behaviour, with the reason.  (No verdict answers here: they are removed.)"""
    from verishape.compiler.widen import kept

    for path in verdicts(warm):
        os.unlink(path)
    calls = iter(range(1000))
    monkeypatch.setattr(kept, "facts", lambda env: next(calls))  # every look differs
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (1, 0), refusals
    assert any("added a guard, range or replacement" in why for why in refusals), refusals


@pytest.mark.slow
def test_served_by_the_fx_graph_cache_alone_it_reuses_too(tmp_path, monkeypatch):
    """AOTAutograd's cache off, Inductor's on: the inference graph is traced here, its
    lowering served from the FX graph cache; the record under that cache's key supplies
    the answers."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch._functorch.config.enable_autograd_cache = False  # the conftest restores it
    assert sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    assert counters["inductor"]["fxgraph_cache_hit"] == 2 and counters["aot_autograd"]["autograd_cache_hit"] == 0


@pytest.mark.slow
def test_the_fuzz_check_runs_a_sweep_warm():
    """verishape.fuzz.widen_check's warm mode (benchmarks/widen_fuzz.py --warm): cold, then
    served by the caches, the warm calls compared with eager."""
    from verishape.fuzz.widen_check import run_sweep

    def make(b):
        g = torch.Generator().manual_seed(b)
        return [torch.randn(b, 6, generator=g), torch.randn(b, 6, generator=g), torch.randn(6, generator=g)]

    sweep = run_sweep(broadcasts, make, [2, 3, 1], backend="inductor", warm=True)
    assert sweep.cold_reused == [False, False, True] and [c.reused for c in sweep.calls] == [False, False, True]
    assert sweep.lowered == 0 and not sweep.wrong and not sweep.other_differences


def _sort_then_stack(x):
    v1 = torch.sort(x, 0).values
    return torch.stack([v1, v1.relu()], 0), torch.maximum(v1, v1)


@pytest.mark.slow
def test_a_guard_torch_prints_back_in_another_form_still_matches_the_record():
    """A sort along the swept size guards ``s < 32767``, which the restarted process reads
    back from the cache as ``s <= 32766``: the record's facts are the same facts (found by
    ``widen_fuzz.py --warm --seed 13``; before, the reuse at 1 was lost when warm)."""
    from verishape.fuzz.widen_check import run_sweep

    sweep = run_sweep(_sort_then_stack, lambda b: [torch.randn(b, 3, generator=torch.Generator().manual_seed(b))],
                      [3, 2, 1, 3, 1], backend="inductor", warm=True)
    assert sweep.cold_reused == [False, False, True, False, True]
    assert [c.reused for c in sweep.calls] == sweep.cold_reused, sweep.refusals
    assert not sweep.wrong and not sweep.other_differences


def _split_after_norm(x):
    v2 = torch.nn.functional.layer_norm(x, (3,))
    return v2.split(2, 0)[0].clone().sum()


@pytest.mark.slow
def test_two_compiles_under_one_cache_key_each_find_their_own_record():
    """The candidate at 1 (its size kept, ``(s + 1) // 2 == 1``) and the recompile at 5 (its
    size pinned to 5) share AOTAutograd's key, which keeps both entries, told apart by their
    guards.  The second record overwrote the first, and the restarted process dropped it
    ("bound to other inputs") and lost the reuse at 1 (found by ``widen_fuzz.py --warm
    --one-early --seed 43``): records are named by their binding too."""
    from verishape.fuzz.widen_check import run_sweep

    def make(b):
        return [torch.randn(b, 4, 2, 3, generator=torch.Generator().manual_seed(b))]

    sweep = run_sweep(_split_after_norm, make, [4, 1, 5, 1, 5], backend="inductor", warm=True)
    assert sweep.cold_reused == [False, True, False, True, False]
    assert [c.reused for c in sweep.calls] == sweep.cold_reused, sweep.refusals
    assert not sweep.wrong and not sweep.other_differences


def _trimmed_rows(x, y):
    y.narrow(0, 0, y.shape[0] - 1)
    x.max(0).values
    x.narrow(0, 0, x.shape[0] - 1)
    smallest = x.sum(0, keepdim=True).min().min()
    return smallest * smallest


@pytest.mark.slow
def test_a_restarted_process_reads_the_caches_guards_as_the_cold_one_had_them():
    """Note [A cache's guards are stock's]: the generic compile guards ``s - 1 != 1``; folded
    with the lower bound 2 into ``s >= 3`` in the cache's guard expression, the restarted
    process read back a guard that excludes 1 and lost the reuse (``widen_fuzz.py --warm
    --seed 71``)."""
    from verishape.fuzz.widen_check import run_sweep

    def make(b):
        g = torch.Generator().manual_seed(b)
        return [torch.randn(b, 6, generator=g), torch.randn(6, generator=g)]

    sweep = run_sweep(_trimmed_rows, make, [2, 6, 1, 6, 1], backend="inductor", warm=True)
    assert sweep.cold_reused == [False, False, True, False, True]
    assert [c.reused for c in sweep.calls] == sweep.cold_reused, sweep.refusals
    assert not sweep.wrong and not sweep.other_differences


def _rewrite(path, payload_fn):
    """Write a record whose digest matches ``payload_fn(old payload)``: a record that is
    whole but says something else."""
    data = open(path, "rb").read()
    head = len(record._MAGIC)
    payload = payload_fn(data[head + record._DIGEST + 1:])
    import hashlib

    with open(path, "wb") as f:
        f.write(record._MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def _other_version(payload):
    fmt, version, torch_version, bound, log = pickle.loads(payload)
    return pickle.dumps((fmt, "0.0.1", torch_version, bound, log))


def _other_binding(payload):
    fmt, version, torch_version, (symbols, replacements, guards), log = pickle.loads(payload)
    swapped = tuple((name, sources[::-1] if len(sources) > 1 else ("L['z'].size()[0]",), vr)
                    for name, sources, vr in symbols)
    return pickle.dumps((fmt, version, torch_version, (swapped, replacements, guards), log))


def _other_guards(payload):
    fmt, version, torch_version, (symbols, replacements, guards), log = pickle.loads(payload)
    return pickle.dumps((fmt, version, torch_version, (symbols, replacements, (*guards, "Eq(Mod(s0, 8), 0)")), log))


FAULTS = {
    "missing": (lambda p: os.unlink(p), "no widening record"),
    "edited": (lambda p: flip_last_byte(p), "does not match its digest"),
    "another version": (lambda p: _rewrite(p, _other_version), "written by verishape 0.0.1"),
    "other inputs": (lambda p: _rewrite(p, _other_binding), "bound to other inputs"),
    "other guards": (lambda p: _rewrite(p, _other_guards), "its facts (ranges, guards) differ"),
    "code in it": (lambda p: _rewrite(p, lambda _: pickle.dumps(Evil())), "which no record may contain"),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_record_that_does_not_belong_gives_stock_behaviour_with_the_reason(warm, fault):
    damage, reason = FAULTS[fault]
    for path in records(warm):
        damage(path)
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (1, 0), refusals  # batch 1 compiles, as stock compiles it
    assert any(reason in why and "torch's cache" in why for why in refusals), refusals
    (line,) = [line for line in verishape.explain(LAST["compiled"]).splitlines() if reason in line]
    assert "not widened: the generic artifact came from torch's cache" in line  # one line, in explain


# ---------------------------------------------------------------------------- mega-cache and remote cache


@pytest.mark.slow
def test_saved_artifacts_loaded_in_another_cache_folder_carry_the_record(tmp_path, monkeypatch):
    """torch.compiler.save_cache_artifacts() in one process, load_cache_artifacts() in a
    fresh cache folder: the record travels in the blob, batch 1 reuses."""
    from torch.compiler._cache import CacheArtifactManager

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "first"))
    CacheArtifactManager.clear()
    assert sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    blob, info = torch.compiler.save_cache_artifacts()
    assert info.verishape_widen_artifacts and info.aot_autograd_artifacts  # one per key of the artifact
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "second"))
    torch.compiler.load_cache_artifacts(blob)
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
