"""``fuzz-meta --jobs N`` (local worker processes): a worker that dies on an op is that op's
crash, as under Ray, and every other op still gets the result ``--jobs 1`` gives it."""

import json
import textwrap

from verishape.cli.main import main

#: An op whose eager kernel kills its process, as a segfaulting kernel would.
CRASHING_OP = textwrap.dedent('''
    import os
    import torch

    @torch.library.custom_op("vs_local_crash::boom", mutates_args=())
    def boom(x: torch.Tensor) -> torch.Tensor:
        os.abort()

    @boom.register_fake
    def _boom_fake(x):
        return x.new_empty(x.shape)
''')


def _ops_without_times(path):
    report = json.loads(path.read_text())
    for op in report["ops"]:
        op.pop("time_s", None)
    return {op["op"]: op for op in report["ops"]}


def test_a_local_worker_dying_on_an_op_is_that_ops_crash(tmp_path, monkeypatch, capsys):
    (tmp_path / "vs_local_crash_ops.py").write_text(CRASHING_OP)
    monkeypatch.chdir(tmp_path)
    common = ["fuzz-meta", "--import", "vs_local_crash_ops", "--mode", "backed", "--max-examples", "2",
              "--seed", "3"]
    # boom first and twice the jobs' worth of other ops: the replaced worker must take more work
    ops = "vs_local_crash::boom,abs,neg,index_select"
    rc = main([*common, "--ops", ops, "--jobs", "2", "--json", str(tmp_path / "par.json")])
    assert rc == 0, capsys.readouterr().err[-2000:]
    rc_alone = main([*common, "--ops", "abs,neg,index_select", "--jobs", "1", "--json", str(tmp_path / "seq.json")])
    assert rc_alone == 0
    parallel, sequential = _ops_without_times(tmp_path / "par.json"), _ops_without_times(tmp_path / "seq.json")
    assert parallel["vs_local_crash::boom"]["status"] == "crash: process died"
    assert parallel["vs_local_crash::boom"]["findings"] == 0
    assert {name: parallel[name] for name in sequential} == sequential
    assert all(op["status"] == "ok" for op in sequential.values())


def test_a_worker_that_cannot_import_the_users_module_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "vs_only_in_driver.py").write_text(
        "import multiprocessing\n"
        "if multiprocessing.parent_process() is not None:\n"
        "    raise ImportError('not importable in workers')\n")
    monkeypatch.chdir(tmp_path)
    rc = main(["fuzz-meta", "--import", "vs_only_in_driver", "--ops", "abs,neg", "--mode", "backed",
               "--max-examples", "1", "--jobs", "2"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("verishape: error:")]
    assert rc == 2, err[-2000:]
    assert len(errors) == 1 and "ImportError: not importable in workers" in errors[0], err
