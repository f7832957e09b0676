"""``verishape fuzz-meta`` end to end on a small fixed slice of OpInfo ops (the full
campaign runs outside CI: benchmarks/fuzz_campaign.py, results in benchmarks/FUZZ.md)."""

import json
import os
import subprocess
import sys

import pytest

from verishape.cli.main import main

#: Ops whose meta functions the full campaign found correct; they must stay finding-free.
KNOWN_CORRECT = "abs,mm,transpose,unsqueeze,sum"

HERE = os.path.dirname(__file__)


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "verishape", "fuzz-meta", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def _strip_times(report):
    for op in report["ops"]:
        op.pop("time_s", None)
    report["summary"].pop("time_s", None)
    return report


def test_known_correct_ops_give_no_findings(tmp_path, capsys):
    out = tmp_path / "report.json"
    rc = main(["fuzz-meta", "--ops", KNOWN_CORRECT, "--max-examples", "6", "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["findings"] == [], capsys.readouterr().out
    assert rc == 0
    assert [op["op"] for op in report["ops"]] == sorted(KNOWN_CORRECT.split(","))
    s = report["summary"]
    assert s["ops"] == 5 and s["findings"] == 0 and s["examples"] > 0
    assert {"by_kind", "by_class", "excluded", "op_status"} <= set(s)


@pytest.mark.slow
def test_same_seed_same_report_whatever_the_jobs(tmp_path):
    reports = []
    for jobs in ("1", "2"):
        out = tmp_path / f"r{jobs}.json"
        rc = main(["fuzz-meta", "--ops", "index_select,nn.functional.pad.constant", "--max-examples", "4",
                   "--seed", "7", "--jobs", jobs, "--json", str(out)])
        assert rc in (0, 1)
        reports.append(_strip_times(json.loads(out.read_text())))
    assert reports[0] == reports[1]


def test_name_matches_all_variants_or_one(tmp_path):
    out = tmp_path / "r.json"
    main(["fuzz-meta", "--ops", "nn.functional.pad.constant", "--max-examples", "2", "--mode", "backed",
          "--json", str(out)])
    ops = json.loads(out.read_text())["ops"]
    assert [(o["op"], o["variant"]) for o in ops] == [("nn.functional.pad", "constant")]
    from verishape.fuzz.ops import resolve
    assert len(resolve(["nn.functional.pad"])) >= 4


@pytest.mark.parametrize("args, needle", [
    (["--ops", "no_such_op"], "unknown op 'no_such_op'"),
    (["--ops", "abs", "--max-examples", "0"], "--max-examples must be at least 1"),
    (["--ops", "abs", "--import", "no_such_module_xyz"], "--import no_such_module_xyz"),
    (["--ops", "abs", "--known-issues", "/no/such/known.json"], "--known-issues /no/such/known.json: cannot read"),
])
def test_usage_errors_are_one_line_exit_2(args, needle, capsys):
    assert main(["fuzz-meta", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_ops_or_all_is_required():
    out = _run("--max-examples", "1")
    assert out.returncode == 2 and "Traceback" not in out.stderr


@pytest.mark.slow
def test_custom_op_by_name_with_import_exits_1_with_repro(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    out_json = tmp_path / "r.json"
    out = _run("--import", "test_fuzz_custom_op", "--ops", "verishape_fuzz_test::grow", "--mode", "backed",
               "--max-examples", "5", "--json", str(out_json), env=env)
    assert out.returncode == 1, out.stderr[-2000:]
    report = json.loads(out_json.read_text())
    kinds = {f["kind"] for f in report["findings"]}
    assert "shape_mismatch" in kinds
    f = report["findings"][0]
    assert {"op", "variant", "kind", "mode", "repro"} <= set(f)
    assert "import test_fuzz_custom_op" in f["repro"]


# ------------------------------------------------------------------ bad input (issue 10, item 9)


def _run_like_console_script(*args, cwd):
    """``python -P``: the current folder is not on sys.path, as with the installed ``verishape``."""
    return subprocess.run([sys.executable, "-P", "-m", "verishape", "fuzz-meta", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize("body, needle", [
    ("raise RuntimeError('broken at import')\n", "RuntimeError: broken at import"),
    ("import sys\nsys.exit(3)\n", "SystemExit"),
    ("1 / 0\n", "ZeroDivisionError"),
])
def test_import_of_a_module_that_raises_is_one_line(tmp_path, body, needle):
    (tmp_path / "raising_mod.py").write_text(body)
    out = _run_like_console_script("--ops", "abs", "--import", "raising_mod", cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("verishape: error:")]
    assert len(errors) == 1 and "--import raising_mod" in errors[0] and needle in errors[0], out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_import_finds_modules_in_the_current_folder_also_in_workers(tmp_path):
    (tmp_path / "local_mod.py").write_text(
        "import os\nopen(os.path.join(os.path.dirname(__file__), f'imported.{os.getpid()}'), 'w').close()\n")
    out_json = tmp_path / "r.json"
    out = _run_like_console_script("--ops", "abs,neg", "--import", "local_mod", "--jobs", "2", "--mode", "backed",
                                   "--max-examples", "1", "--json", str(out_json), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(list(tmp_path.glob("imported.*"))) >= 2  # the main process and at least one worker
    assert json.loads(out_json.read_text())["summary"]["ops"] == 2


def test_resume_into_a_missing_folder_is_one_line(capsys, tmp_path):
    assert main(["fuzz-meta", "--ops", "abs", "--resume", str(tmp_path / "no" / "p.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--resume" in err and len(err.splitlines()) == 1


def test_negative_time_budget_is_refused(capsys):
    assert main(["fuzz-meta", "--ops", "abs", "--time-budget", "-1"]) == 2
    assert "--time-budget" in capsys.readouterr().err
