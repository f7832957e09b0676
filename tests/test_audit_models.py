"""verify-guards on model-shaped programs: sizes tied across inputs, derived sizes, float
attributes, one call compiled as several frames, ``--assume`` equalities; and (slow,
skipped without ``transformers``) a tiny GPT-2 and a tiny BERT with random weights."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from audit_helpers import SCRIPTS, audit_in_process

X0, MASK0 = "L['x'].size()[0]", "L['mask'].size()[0]"


def _finding(report: dict, kind: str) -> dict:
    found = [f for f in report["findings"] if f["kind"] == kind]
    assert found, [f["kind"] for f in report["findings"]]
    return found[0]


def test_batch_1_counterexample_resizes_every_input_sharing_the_batch(capsys, tmp_path):
    _, report, _, _ = audit_in_process(capsys, tmp_path, "tied_batch.py", "1 <= x.size(0) <= 64")
    f = _finding(report, "specialization_01")
    assert f["counterexample"][X0] == 1 and f["counterexample"][MASK0] == 1
    assert f["replay"]["inputs"]["x"][0] == 1 and f["replay"]["inputs"]["mask"][0] == 1
    assert f["replay"]["outcome"] == "agree" and f["replay"]["graph_calls"] == 1
    assert len([x for x in report["findings"] if x["kind"] == "specialization_01"]) == 1  # one size, one finding


def test_derived_size_is_rebuilt_and_its_equality_is_a_guard(capsys, tmp_path):
    _, report, _, _ = audit_in_process(capsys, tmp_path, "derived_size.py", "1 <= x.size(0) <= 64")
    f = _finding(report, "specialization_01")
    cex = f["counterexample"]
    assert cex[X0] == 1 and cex["L['y'].size()[0]"] == 2  # y is x plus one, as torch replaced it
    assert f["replay"]["inputs"] == {"x": [1], "y": [2]}
    guards = {g["guard"]: g for g in report["frames"][0]["guards"]}
    assert all(text != "True" for text in guards)  # a replacement's own guard is shown as written
    tied = [g for text, g in guards.items() if "L['y'].size()[0]" in text and text.startswith("Eq(")]
    assert tied and tied[0]["status"] == "not_implied"  # the declared space lets y be any size


def test_float_attributes_are_value_guards_not_shape_guards(capsys, tmp_path):
    _, report, out, _ = audit_in_process(capsys, tmp_path, "float_attributes.py")
    frame = report["frames"][0]
    assert not any("eps" in g["guard"] or ".p" in g["guard"] or g["guard"] == "True" for g in frame["guards"])
    assert not any(".eps" in d or "'].p" in d for d in frame["declared_space"])
    sources = {s for v in frame["value_guards"] for s in v["sources"]}
    assert any(s.endswith(".eps") for s in sources) and any(s.endswith(".p") for s in sources)
    assert report["summary"]["guards"] == len(frame["guards"]) and report["summary"]["value_guards"] >= 2
    assert "value guards" in out


def test_one_call_compiled_as_two_frames_is_one_call(capsys, tmp_path):
    _, report, out, _ = audit_in_process(capsys, tmp_path, "graph_break_first.py")
    assert report["calls"] == [{"id": 0, "name": "f", "location": "graph_break_first.py:5", "frames": [0, 1]}]
    assert report["summary"]["calls"] == 1 and report["summary"]["frames"] == 2
    resumed = report["frames"][1]["guards"]  # nothing lost: the resume frame keeps its guard
    assert any("> 16" in g["guard"] for g in resumed)
    assert "call 0: f" in out


def test_two_calls_stay_two_calls(capsys, tmp_path):
    _, report, _, _ = audit_in_process(capsys, tmp_path, "two_functions.py")
    assert len(report["calls"]) == report["summary"]["frames"]


def test_duck_sizing_respects_assumed_equality(capsys, tmp_path):
    _, report, _, _ = audit_in_process(capsys, tmp_path, "duck.py")
    assert any(f["kind"] == "duck_sizing" for f in report["findings"])
    _, report, _, _ = audit_in_process(capsys, tmp_path, "duck.py", "x.size(0) == y.size(0)")
    assert not any(f["kind"] == "duck_sizing" for f in report["findings"])


def test_specialization_widened_on_proof_is_reported_with_its_evidence(capsys, tmp_path):
    """A widened 0/1 specialization is no finding: its evidence (the graph fingerprints)
    is shown with the frame; the same compile not widened is a specialization finding."""
    import inspect

    import verishape
    from verishape.audit.run import verify_guards

    if "widen_specializations" not in inspect.signature(verishape.compile).parameters:
        pytest.skip("verishape.compile has no widen_specializations")
    widened, control = (verify_guards(SCRIPTS / "widened_batch.py", args, assume=["1 <= x.size(0) <= 64"],
                                      progress=False)[1] for args in ([], ["--no-widen"]))
    assert widened["summary"]["frames"] == 2  # the generic compile, and the batch-1 call that ran it
    generic, size_1 = widened["frames"]
    (record,) = generic["widened_specializations"]
    assert record["role"] == "reused_by" and record["frame"] == 1
    assert record["source"] == X0 and record["value"] == 1
    assert record["status"] == "proved" and "graph" in record["evidence"]
    assert [w["role"] for w in size_1["widened_specializations"]] == ["reuses"]
    assert not any(f["kind"] == "specialization_01" for f in widened["findings"])
    assert control["frames"][0]["widened_specializations"] == []
    assert _finding(control, "specialization_01")["counterexample"] == {X0: 1}


_HF = importlib.util.find_spec("transformers") is None


def _audit_fresh(script: str, *assume: str, tmp_path) -> dict:
    """A real model audited in a process of its own, as a user runs it."""
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "verishape", "verify-guards", str(SCRIPTS / script), "--json", str(out)]
    for a in assume:
        cmd += ["--assume", a]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=500, check=False)
    assert out.exists(), proc.stderr[-2000:]
    return json.loads(out.read_text())
IDS, MASK = "L['kwargs']['input_ids'].size()[0]", "L['kwargs']['attention_mask'].size()[0]"


@pytest.mark.slow
@pytest.mark.skipif(_HF, reason="transformers is not installed")
def test_tiny_gpt2_batch_1_replay_resizes_input_ids_and_attention_mask(capsys, tmp_path):
    report = _audit_fresh("hf_tiny_gpt2.py", tmp_path=tmp_path)
    tied = _finding(report, "guard_not_implied")  # the artifact requires the two batches equal
    assert IDS in tied["guard"] and MASK in tied["guard"]
    report = _audit_fresh("hf_tiny_gpt2.py", "kwargs['input_ids'].size(0) == kwargs['attention_mask'].size(0)",
                          "1 <= kwargs['input_ids'].size(0) <= 64", tmp_path=tmp_path)
    assert [f["kind"] for f in report["findings"]] == ["specialization_01"]
    f = report["findings"][0]
    assert f["counterexample"][IDS] == 1 and f["counterexample"][MASK] == 1
    assert f["replay"]["outcome"] == "agree", f["replay"]


@pytest.mark.slow
@pytest.mark.skipif(_HF, reason="transformers is not installed")
def test_tiny_bert_batch_1_replay_with_assumed_equal_batches(capsys, tmp_path):
    report = _audit_fresh(
        "hf_tiny_bert.py",
        "kwargs['input_ids'].size(0) == kwargs['attention_mask'].size(0)",
        "kwargs['input_ids'].size(0) == kwargs['token_type_ids'].size(0)",
        "1 <= kwargs['input_ids'].size(0) <= 64", "1 <= kwargs['attention_mask'].size(0) <= 64", tmp_path=tmp_path)
    spec = [f for f in report["findings"] if f["kind"] == "specialization_01"]
    assert spec and all(f["counterexample"][IDS] == f["counterexample"][MASK] == 1 for f in spec)
    assert all(f["replay"]["outcome"] == "agree" for f in spec), [f["replay"] for f in spec]
    assert not [f for f in report["findings"] if f["kind"] != "specialization_01"]
