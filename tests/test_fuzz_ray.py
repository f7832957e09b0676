"""``fuzz-meta --executor ray``: the same report as ``--jobs 1``, resume, crashes, usage errors.

The end-to-end tests start a local Ray (a few seconds) and skip when Ray is not installed;
the usage errors are checked without it.
"""

import json
import os
import socket
import sys
import textwrap

import pytest

from verishape.cli.main import main

#: A custom op module the workers must find in the current folder (``--import``, like python -m).
CUSTOM_OPS = textwrap.dedent('''
    import torch

    @torch.library.custom_op("vs_ray_test::grow", mutates_args=())
    def grow(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1)
        return torch.cat([flat, flat[:1]]) if flat.numel() >= 2 else flat.clone()

    @grow.register_fake
    def _grow_fake(x):
        return x.new_empty(x.numel())   # wrong for numel >= 2: a finding
''')

#: An op whose eager kernel kills its process, as a segfaulting kernel would.
CRASHING_OP = textwrap.dedent('''
    import os, signal
    import torch

    @torch.library.custom_op("vs_ray_crash::boom", mutates_args=())
    def boom(x: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGSEGV)
        return x.clone()

    @boom.register_fake
    def _boom_fake(x):
        return x.new_empty(x.shape)
''')

OPS = "abs,index_select,vs_ray_test::grow"


def _strip_times(report):
    for op in report["ops"]:
        op.pop("time_s", None)
    report["summary"].pop("time_s", None)
    return report


def _fuzz(out, *extra):
    rc = main(["fuzz-meta", "--import", "vs_ray_test_ops", "--ops", OPS, "--max-examples", "3", "--seed", "5",
               "--json", str(out), *extra])
    assert rc in (0, 1)
    return _strip_times(json.loads(out.read_text()))


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    (tmp_path / "vs_ray_test_ops.py").write_text(CUSTOM_OPS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_ray_gives_the_same_report_as_jobs_1(in_tmp):
    sequential = _fuzz(in_tmp / "seq.json", "--jobs", "1", "--mode", "backed")
    on_ray = _fuzz(in_tmp / "ray.json", "--executor", "ray", "--jobs", "2", "--mode", "backed")
    assert sequential["findings"], "the wrong fake of vs_ray_test::grow must be found"
    assert on_ray["findings"] == sequential["findings"]
    assert on_ray == sequential
    assert {op["op"] for op in on_ray["ops"]} == {"abs", "index_select", "vs_ray_test::grow"}


@pytest.mark.slow
def test_resume_under_ray_skips_finished_ops_and_records_new_ones(in_tmp):
    progress = in_tmp / "progress.jsonl"
    marker = {"op": "abs", "variant": "", "status": "ok", "seeds": 1, "examples": 4242, "findings": 0,
              "notes": {}, "finding_records": []}
    progress.write_text(json.dumps({"full_name": "abs", "result": marker}) + "\n")
    report = _fuzz(in_tmp / "r.json", "--executor", "ray", "--jobs", "2", "--resume", str(progress))
    by_op = {op["op"]: op for op in report["ops"]}
    assert by_op["abs"]["examples"] == 4242, "abs was in the progress file: it must not run again"
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert sorted(rec["full_name"] for rec in lines if "result" in rec) == sorted(
        ["abs", "index_select", "vs_ray_test::grow"])


@pytest.mark.slow
def test_a_worker_dying_on_an_op_is_that_ops_crash(in_tmp, capsys):
    (in_tmp / "vs_ray_crash_ops.py").write_text(CRASHING_OP)
    out = in_tmp / "r.json"
    rc = main(["fuzz-meta", "--import", "vs_ray_crash_ops", "--ops", "vs_ray_crash::boom,abs", "--mode", "backed",
               "--max-examples", "2", "--executor", "ray", "--jobs", "2", "--json", str(out)])
    assert rc == 0, capsys.readouterr().err[-2000:]
    status = {op["op"]: op["status"] for op in json.loads(out.read_text())["ops"]}
    assert status["abs"] == "ok"
    assert status["vs_ray_crash::boom"].startswith("crash"), status


@pytest.mark.slow
def test_ray_workers_use_the_drivers_proof_store(in_tmp, monkeypatch):
    import sqlite3

    store = in_tmp / "proofs.sqlite"
    monkeypatch.setenv("VERISHAPE_PROOF_STORE", str(store))
    main(["fuzz-meta", "--ops", "index_select", "--mode", "backed", "--max-examples", "3",
          "--executor", "ray", "--jobs", "1"])
    db = sqlite3.connect(store)
    kinds = {k for (k,) in db.execute("SELECT kind FROM proofs")}
    assert "fuzz" in kinds
    # Ray kills its workers without atexit: their runs rows (hits, solver calls) must be there anyway
    workers = db.execute("SELECT SUM(solver_calls + hits) FROM runs WHERE pid != ?", (os.getpid(),)).fetchone()
    assert workers[0], "the Ray workers' proof store statistics were lost"


def _one_line_exit_2(args, capsys):
    assert main(["fuzz-meta", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_ray_missing_is_one_line_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)   # ``import ray`` fails as if not installed
    err = _one_line_exit_2(["--ops", "abs", "--executor", "ray"], capsys)
    assert "pip install 'verishape[ray]'" in err


def test_ray_address_needs_executor_ray(capsys):
    err = _one_line_exit_2(["--ops", "abs", "--ray-address", "127.0.0.1:6379"], capsys)
    assert "--ray-address" in err and "--executor ray" in err


def test_unreachable_ray_address_is_one_line(capsys):
    pytest.importorskip("ray")
    with socket.socket() as s:   # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        err = _one_line_exit_2(["--ops", "abs", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"], capsys)
    assert f"127.0.0.1:{port}" in err and "cannot reach" in err


@pytest.mark.slow
def test_a_worker_missing_the_users_module_is_one_line(in_tmp, monkeypatch, capsys):
    (in_tmp / "vs_ray_driver_only.py").write_text(
        "import os\nif os.getpid() != int(os.environ['VS_RAY_DRIVER_PID']):\n"
        "    raise ImportError('not installed on this node')\n")
    monkeypatch.setenv("VS_RAY_DRIVER_PID", str(os.getpid()))
    err = _one_line_exit_2(["--import", "vs_ray_driver_only", "--ops", "abs", "--max-examples", "1",
                            "--executor", "ray", "--jobs", "1"], capsys)
    assert "not installed on this node" in err and "every node" in err
