"""`verishape proofs`: stats, list, show, export/import, prune and `check` (a second solver
re-decides every stored obligation from its SMT-LIB text; counterexamples are replayed with
Python's integers) on stores that verishape's own prover wrote."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

import pytest
import sympy
from torch.utils._sympy.functions import FloorDiv, Max, Mod, PythonMod

from verishape import solvers
from verishape.proofs.store import open_store
from verishape.cli.main import main

s0, s1, s2 = sympy.symbols("s0 s1 s2", integer=True, positive=True)
u0 = sympy.Symbol("u0", integer=True)

#: (goal, premises, the verdict z3 gives): a mix of linear, nonlinear, modular and
#: floor-division obligations, proved and refuted.  Each reaches the solver (a refutation
#: the prover's first tier finds at the premises' bounds is never stored: ``s0 <= s1``,
#: with ``s1`` unbounded, keeps ``s0 >= 3`` from being one).
OBLIGATIONS = [
    (sympy.Eq(Mod(32 * s0, 4096), 0), [sympy.Eq(Mod(s0, 128), 0)], "proved"),
    (sympy.Gt(FloorDiv(s0, 3), 2), [sympy.Ge(s0, 3), sympy.Le(s0, s1)], "refuted"),
    (sympy.Le(s0**2, s1 * s0), [sympy.Le(s0, s1)], "proved"),
    (sympy.Eq(PythonMod(u0, s1), 0), [sympy.Ge(u0, 0)], "refuted"),
    (sympy.Lt(FloorDiv(u0, s0), 5), [sympy.Lt(u0, 5 * s0)], "proved"),
    (sympy.Eq(Max(s0, s1), s0), [sympy.Ge(s0, s1)], "proved"),
    (sympy.Eq(FloorDiv(s0, u0), 1), [sympy.Eq(s0, 3)], "refuted"),
    (sympy.Ne(s0, s1), [], "refuted"),
]


@pytest.fixture(scope="module")
def made_store(tmp_path_factory):
    """A store written by the prover itself (cold run), then read by a warm run, plus one
    ``unknown`` record decided under a tiny resource limit."""
    path = tmp_path_factory.mktemp("proofs") / "store.sqlite"
    for _ in range(2):  # cold: solver calls; warm: store hits (the last run stats reports)
        store = open_store(path)
        prover = solvers.Prover(store=store)
        for goal, premises, verdict in OBLIGATIONS:
            assert prover.prove(goal, premises).status == verdict
        store.close()
    store = open_store(path)
    tiny = solvers.Prover(limits=solvers.Limits(rlimit=50), store=store)
    assert tiny.prove(sympy.Le(s0**2, s1 * s0), [sympy.Le(s0, s1)]).status == "unknown"
    store.close()
    return path


@pytest.fixture
def store(made_store, tmp_path):
    """A private copy of the made store (tests tamper with it)."""
    copy = tmp_path / "store.sqlite"
    shutil.copy(made_store, copy)
    return copy


def _ids(path, verdict):
    with sqlite3.connect(path) as db:
        return {goal: i for i, goal in db.execute("SELECT id, goal FROM proofs WHERE verdict = ?", (verdict,))}


def _sql(path, statement, *args):
    with sqlite3.connect(path) as db:
        db.execute(statement, args)


def _run(capsys, *args):
    rc = main(["proofs", *args])
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ check


@pytest.mark.parametrize("solver", ["cvc5", "z3"])
def test_check_clean_store_exits_0(store, capsys, solver):
    if solver == "cvc5":
        pytest.importorskip("cvc5")
    rc, out, err = _run(capsys, "check", "--store", str(store), "--solver", solver, "--jobs", "1", "--progress")
    assert rc == 0, out + err
    assert f"re-decided by {solver} " in out
    assert "agree: 8 (proved 4, refuted 4)" in out
    assert "counterexamples replayed with Python integers: 4, all hold" in out
    assert "stored unknown: 1" in out and out.rstrip().endswith("clean")
    assert "proofs check [" in err and "13/13" in err  # 9 obligations + 4 replays


def test_check_names_a_tampered_verdict(store, capsys):
    pytest.importorskip("cvc5")
    rid = _ids(store, "refuted")["((s0//3)) > 2"]
    _sql(store, "UPDATE proofs SET verdict = 'proved', counterexample = NULL WHERE id = ?", rid)
    rc, out, _ = _run(capsys, "check", "--store", str(store), "--jobs", "1", "--json")
    assert rc == 1
    report = json.loads(out)
    assert report["clean"] is False and report["bad_counterexamples"] == []
    assert [(d["id"], d["goal"], d["stored"], d["checker"]) for d in report["disagreements"]] == \
        [(rid, "((s0//3)) > 2", "proved", "sat")]
    rc, out, _ = _run(capsys, "check", "--store", str(store), "--jobs", "1", "--solver", "z3")
    assert rc == 1
    assert f"#{rid} [query] ((s0//3)) > 2: stored proved, z3 " in out and "says sat (refuted)" in out
    assert "premise GreaterThan(s0, 3)" in out and out.rstrip().endswith("NOT CLEAN")


def test_check_replays_counterexamples_with_python_integers(store, capsys):
    ids = _ids(store, "refuted")
    # s0 = 9 satisfies the premises s0 >= 3 and s0 <= s1, but 9 // 3 = 3 > 2: the goal holds there.
    _sql(store, "UPDATE proofs SET counterexample = ? WHERE id = ?", json.dumps({"s0": 9, "s1": 9}),
         ids["((s0//3)) > 2"])
    # u0 = -1 breaks the premise u0 >= 0.
    _sql(store, "UPDATE proofs SET counterexample = ? WHERE id = ?", json.dumps({"u0": -1, "s1": 2}),
         ids["Eq(PythonMod(u0, s1), 0)"])
    # s0 is a positive size: 0 is outside its own domain.
    _sql(store, "UPDATE proofs SET counterexample = ? WHERE id = ?", json.dumps({"s0": 0, "u0": 4}),
         ids["Eq((s0//u0), 1)"])
    # a record is data: its goal text is parsed, never evaluated
    _sql(store, "UPDATE proofs SET goal_srepr = ? WHERE id = ?", "__import__('os').system('false')", ids["Ne(s0, s1)"])
    rc, out, _ = _run(capsys, "check", "--store", str(store), "--jobs", "1", "--solver", "z3")
    assert rc == 1
    assert "agree: 8" in out  # the formulas are still satisfiable: only the replay catches these
    bad = out.split("COUNTEREXAMPLES THAT DO NOT HOLD (4):")[1]
    assert f"#{ids['((s0//3)) > 2']} [query]" in bad and "the goal ((s0//3)) > 2 is True at s0=9, s1=9, not False" in bad
    assert f"#{ids['Eq(PythonMod(u0, s1), 0)']} [query]" in bad and "premise u0 >= 0 is False" in bad
    assert "s0 = 0 breaks its own assumption s0 > 0" in bad
    assert f"#{ids['Ne(s0, s1)']} [query]" in bad and "the stored obligation cannot be parsed" in bad


def test_check_counts_a_second_solver_unknown_without_failing(store, capsys):
    pytest.importorskip("cvc5")
    rc, out, _ = _run(capsys, "check", "--store", str(store), "--jobs", "1", "--rlimit", "1", "--json")
    report = json.loads(out)
    assert rc == 0 and report["clean"] and report["disagreements"] == []
    assert report["not_redecided"] >= 1 and sum(report["agree"].values()) + report["not_redecided"] == 8
    assert all(why.startswith("unknown") for why in report["not_redecided_by_reason"])


def test_check_refuses_a_script_with_other_options(store, capsys):
    rid = _ids(store, "proved")["Eq(Max(s0, s1), s0)"]
    _sql(store, "UPDATE proofs SET smtlib = '(set-option :regular-output-channel \"x.txt\")' || smtlib WHERE id = ?", rid)
    rc, out, _ = _run(capsys, "check", "--store", str(store), "--jobs", "1", "--solver", "z3")
    assert rc == 0  # not re-decided is not a disagreement, but it is listed with its id
    assert "not re-decided: 1" in out and f"#{rid} [query] Eq(Max(s0, s1), s0): the script sets a solver option" in out


# ------------------------------------------------------------------ stats / list / show / export / import / prune


def test_stats_list_show(store, capsys):
    rc, out, _ = _run(capsys, "stats", "--store", str(store), "--json")
    stats = json.loads(out)
    assert rc == 0 and stats["records"] == 9 and stats["path"] == str(store) and stats["bytes"] > 0
    assert stats["by_verdict"] == {"proved": 4, "refuted": 4, "unknown": 1} and stats["by_kind"] == {"query": 9}
    # the last process that used the store decided the unknown one (1 solver call, no hit)
    assert (stats["solver_calls_last_run"], stats["hits_last_run"]) == (1, 0)
    rc, out, _ = _run(capsys, "stats", "--store", str(store))
    assert rc == 0 and "records: 9 (proved 4, refuted 4, unknown 1)" in out and "1 solver calls" in out
    rc, out, _ = _run(capsys, "list", "--store", str(store), "--verdict", "refuted")
    assert rc == 0 and len(out.splitlines()) == 4 and all(" refuted [query] " in line for line in out.splitlines())
    rc, out, err = _run(capsys, "list", "--store", str(store), "--limit", "2")
    assert len(out.splitlines()) == 2 and "7 more" in err
    rid = _ids(store, "refuted")["((s0//3)) > 2"]
    rc, out, _ = _run(capsys, "show", "--store", str(store), str(rid))
    assert rc == 0 and out.startswith(f"#{rid} refuted") and "counterexample (the goal is false there)" in out
    assert "(declare-fun s0 () Int)" in out and out.rstrip().endswith("(check-sat)")


def test_export_import_prune_round_trip(store, tmp_path, capsys):
    exported = tmp_path / "fleet.sqlite"
    rc, out, _ = _run(capsys, "export", "--store", str(store), str(exported))
    assert rc == 0 and "exported 9 records" in out
    other = tmp_path / "other.sqlite"
    open_store(other).close()  # an empty store on "another machine"
    rc, out, _ = _run(capsys, "import", "--store", str(other), str(exported))
    assert rc == 0 and "imported 9 new records" in out
    _sql(exported, "UPDATE proofs SET encoding_hash = 'another' WHERE verdict = 'unknown'")
    rc, out, _ = _run(capsys, "import", "--store", str(other), str(exported))
    assert rc == 0 and "imported 0 new records" in out  # merged by key
    assert "1 records in" in out and "decided under another encoding: they are kept" in out
    assert "skipped 1 records whose key does not match" in out  # its key was made with the old hash
    # the imported store answers the same questions without a solver call
    warm = open_store(other)
    prover = solvers.Prover(store=warm)
    assert [prover.prove(g, p).status for g, p, _ in OBLIGATIONS] == [v for _, _, v in OBLIGATIONS]
    assert prover.stats.solver_calls == 0 and prover.stats.store_hits == len(OBLIGATIONS)
    warm.close()
    _sql(other, "UPDATE proofs SET encoding_hash = 'another' WHERE goal = 'Eq(Max(s0, s1), s0)'")
    rc, out, _ = _run(capsys, "prune", "--store", str(other), "--unknown")
    assert rc == 0 and "pruned 1 records; 8 left" in out
    rc, out, _ = _run(capsys, "prune", "--store", str(other), "--other-encodings")
    assert rc == 0 and "pruned 1 records; 7 left" in out
    rc, out, _ = _run(capsys, "prune", "--store", str(other), "--older-than", "1")
    assert rc == 0 and "pruned 0 records; 7 left" in out
    rc, out, _ = _run(capsys, "prune", "--store", str(other), "--older-than", "0")
    assert rc == 0 and "pruned 7 records; 0 left" in out


# ------------------------------------------------------------------ bad input: one line, exit 2


def _one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("verishape: error: "), err
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(store, tmp_path, capsys, monkeypatch):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all" * 10)
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    existing = tmp_path / "exists.sqlite"
    existing.write_text("")
    cases = [
        (["stats", "--store", str(tmp_path / "missing.sqlite")], "no proof store at"),
        (["check", "--store", str(garbage)], "not a proof store (not an SQLite database)"),
        (["list", "--store", str(corrupt)], "is unusable"),
        (["show", "--store", str(store), "abc"], "a record id is a number"),
        (["show", "--store", str(store), "999"], "no record #999"),
        (["export", "--store", str(store), "/nonexistent-dir/x.sqlite"], "export /nonexistent-dir/x.sqlite: cannot write"),
        (["export", "--store", str(store), str(existing)], "the file exists"),
        (["import", "--store", str(store), str(tmp_path / "nope.sqlite")], "no such file"),
        (["import", "--store", str(store), str(garbage)], "not a proof store export"),
        (["prune", "--store", str(store)], "say what to delete"),
        (["stats"], "the proof store is off"),
    ]
    monkeypatch.setenv("VERISHAPE_PROOF_STORE", "off")
    for args, needle in cases:
        rc, _, err = _run(capsys, *args)
        assert rc == 2, args
        assert needle in _one_error_line(err), (args, err)
    with pytest.raises(SystemExit) as exc:  # argparse: malformed numbers
        main(["proofs", "check", "--store", str(store), "--jobs", "0"])
    assert exc.value.code == 2


_PROBE = ("import sys\nfrom verishape.cli.main import main\nrc = main(sys.argv[1:])\n"
          "print('HEAVY', sorted(m for m in ('torch', 'sympy') if m in sys.modules))\nsys.exit(rc)\n")


def test_proofs_commands_do_not_import_torch(store):
    for args in (["stats"], ["list"], ["show", "1"]):
        out = subprocess.run([sys.executable, "-c", _PROBE, "proofs", *args, "--store", str(store)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stderr
        assert "HEAVY []" in out.stdout, (args, out.stdout[-300:])
