"""`verishape verify-guards` on scripts that export (issue 11, item 4).

An export is a frame of kind "export": its declared space is the ``Dim(min=, max=)`` ranges
of ``dynamic_shapes`` (``--assume`` intersects), and its range constraints, shape guards and
runtime asserts are checked against it; a counterexample is replayed by calling
``ep.module()`` against the eager module, where the program's refusal is ``compiled_rejects``.
"""

from __future__ import annotations




from audit_helpers import X0, audit_in_process


audit = audit_in_process


def only_export(report: dict) -> dict:
    (frame,) = report["frames"]
    assert frame["kind"] == "export", frame
    return frame


def test_declared_dim_range_is_the_space_and_is_implied(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_clean.py")
    assert status == 0, out
    frame = only_export(report)
    assert frame["compiled"] and frame["name"] == "export(Scale)" and frame["location"] == "export_clean.py:12"
    assert f"2 <= {X0} <= 64  (Dim('batch', min=2, max=64))" in frame["declared_space"]
    bounds = {c["guard"] for c in frame["range_constraints"]}
    assert bounds == {f"2 <= {X0}", f"{X0} <= 64"}, bounds  # x and y share the Dim: one symbol
    assert all(c["status"] == "implied" and c["proof"]["status"] == "proved" for c in frame["range_constraints"])


def test_auto_dim_narrowed_by_export_is_a_finding_replayed_as_rejected(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_auto_narrowed.py")
    assert status == 1, out
    frame = only_export(report)
    narrowed = next(c for c in frame["range_constraints"] if c["guard"] == f"17 <= {X0}")
    assert narrowed["status"] == "not_implied"
    (f,) = [x for x in report["findings"] if x["kind"] == "range_not_implied"]
    n = f["counterexample"][X0]
    assert 2 <= n <= 16
    assert f["replay"]["outcome"] == "compiled_rejects", f["replay"]
    assert f["replay"]["mode"] == "exported_program" and f["replay"]["inputs"] == {"x": [n, 4]}
    assert f["replay"]["eager_error"] is None and "Guard failed" in f["replay"]["compiled_error"]


def test_assume_inside_the_program_range_makes_it_clean(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_auto_narrowed.py", "17 <= x.size(0) <= 1000")
    assert status == 0, out
    assert all(c["status"] == "implied" for c in only_export(report)["range_constraints"])


def test_assume_about_an_input_no_export_has_is_a_usage_error(capsys, tmp_path):
    status, _, _, err = audit(capsys, tmp_path, "export_clean.py", "z.size(0) <= 4")
    assert status == 2
    assert "z.size()[0]" in err or "L['z']" in err, err


def test_strict_export_is_one_export_frame_with_its_guards(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_strict_auto.py")
    assert status == 1, out
    frame = only_export(report)  # Dynamo's frame inside the strict export is not a frame of its own
    assert frame["name"] == "export(Pairs, strict)"
    # sources use the forward's names, not the strict trace's L['flat_args'][0]
    assert frame["symbols"] and all(s == [X0] for s in frame["symbols"].values()), frame["symbols"]
    even = next(x for x in report["findings"] if "Mod" in x["guard"])
    assert even["kind"] == "guard_not_implied" and even["counterexample"][X0] % 2 == 1
    assert even["replay"]["outcome"] == "both_fail"  # eager cannot view an odd size as (-1, 2) either
    # size 2 or 3 breaks the x // 2 guards only together with the range check 4 <= x.size(0):
    # that check's finding is the one replayed, and the program refuses the input
    for two in (x for x in report["findings"] if "//2" in x["guard"]):
        assert two["isolation"] == "also_breaks_others" and two["replay"]["outcome"] == "not_replayed"
    (narrowed,) = [x for x in report["findings"] if x["kind"] == "range_not_implied"]
    assert narrowed["guard"] == f"4 <= {X0}" and narrowed["counterexample"][X0] in (2, 3)
    assert narrowed["replay"]["outcome"] == "compiled_rejects", narrowed["replay"]


def test_runtime_assert_on_input_size_is_checked_and_replayed(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_deferred_assert.py")
    assert status == 1, out
    frame = only_export(report)
    asserts = {c["guard"]: c for c in frame["runtime_asserts"]}
    even = asserts[f"Eq(Mod({X0}, 2), 0)"]
    assert even["status"] == "not_implied" and even["counterexample"][X0] % 2 == 1
    assert 2 <= even["counterexample"][X0] <= 64  # inside the declared Dim range
    (f,) = report["findings"]
    assert f["kind"] == "runtime_assert_not_implied" and f["counterexample"] == even["counterexample"]
    # the user's own torch._check refuses the odd size in eager; the program, with its _assert_scalar
    assert f["replay"]["outcome"] == "both_fail", f["replay"]
    assert "Runtime assertion failed for expression Eq(Mod(" in f["replay"]["compiled_error"]


def test_failed_export_is_a_finding_not_a_crash(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_dde.py")
    assert status == 1, out
    frame = only_export(report)
    assert not frame["compiled"] and "GuardOnDataDependentSymNode" in frame["error"]
    assert [x["kind"] for x in report["findings"]] == ["data_dependent_error"]
    assert "did not export" in out


def test_verishape_export_is_audited_with_its_proofs(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_verishape_proved.py")
    frame = only_export(report)
    assert frame["compiled"], out
    # the program accepts every declared input: no check of it is a finding (the
    # guard_or_* fallbacks torch took on the data value are reported as for compiled frames)
    assert {x["kind"] for x in report["findings"]} <= {"fallback_unproved"}, out
    assert all(c["status"] == "implied" for c in frame["range_constraints"] + frame["guards"])
    assert f"3 <= {X0} <= 100  (Dim('s', min=3, max=100))" in frame["declared_space"]
    proved = [d["obligation"] for d in frame["decisions"]
              if d["obligation"]["kind"] == "dde_avoided" and d["result"]["status"] == "proved"]
    assert any(o["goal"] == "u0 <= 5" for o in proved), frame["decisions"]
    # the user's checks on the data value stay in the program: reported, never a finding
    assert any("u0" in c["guard"] for c in frame["runtime_asserts"])


def test_compiled_and_exported_frames_side_by_side(capsys, tmp_path):
    status, report, out, _ = audit(capsys, tmp_path, "export_two_programs.py")
    assert status == 0, out
    assert [f["kind"] for f in report["frames"]] == ["compile", "export"]
    assert [f["id"] for f in report["frames"]] == [0, 1]


def test_a_shapes_collection_is_read_as_export_reads_it(capsys, tmp_path):
    """The audit resolves a ShapesCollection as torch.export does (it used to iterate it,
    which indexed it by position and made the user's own export fail under the audit)."""
    status, report, out, _ = audit(capsys, tmp_path, "export_shapes_collection.py")
    assert status == 0, out
    frame = only_export(report)
    assert f"3 <= {X0} <= 16  (Dim('rows', min=3, max=16))" in frame["declared_space"]
    assert {c["status"] for c in frame["range_constraints"]} == {"implied"}
