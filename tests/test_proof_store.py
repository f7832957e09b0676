"""The proof store (issue 13, items 1, 2 and 4): answers persist across processes, the key
covers everything an answer depends on, several processes share one store, and a store
that cannot be used never fails a compile."""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sympy
from torch.utils._sympy import functions as tf

from verishape import solvers
from verishape.proofs import store as store_mod
from verishape.proofs.result import BY_BOUNDS, WITHOUT_SOLVER
from verishape.proofs.store import StoredProof, open_store
from verishape.proofs import encoding
from verishape.core.decisions import DecisionLog

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "scripts" / "store_program.py"

x, y = sympy.symbols("x y", integer=True)
s0 = sympy.Symbol("s0", integer=True, positive=True)
#: a question only the solver answers (no bound shows a divisibility: Note [A bound the premises state])
SOLVED = (sympy.Eq(tf.PythonMod(32 * x, 1024), 0), [sympy.Eq(tf.PythonMod(x, 64), 0)])


def _program(store: Path | str) -> tuple[dict, str]:
    """Run the compile program in a fresh process with ``store``; (report, stderr)."""
    env = dict(os.environ, VERISHAPE_PROOF_STORE=str(store))
    out = subprocess.run([sys.executable, str(PROGRAM)], check=False, capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line[len("REPORT "):]), out.stderr


def _artifacts(report: dict) -> dict:
    """What the compile produced: guards, asserts, installed guards, decisions, outputs."""
    frames = {name: [{k: f[k] for k in ("guards", "asserts", "installed", "decisions")} for f in fs]
              for name, fs in report["frames"].items()}
    return {"frames": frames, "outputs": report["outputs"]}


def _store_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "proof store" in line]


# ---------------------------------------------------------------------- warm runs


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory) -> tuple[Path, dict, str]:
    """One cold run of the program (its store, report and stderr), shared by the tests
    that need a populated store or a reference compile: each run is a fresh process."""
    store = tmp_path_factory.mktemp("cold") / "proofs.sqlite"
    report, stderr = _program(store)
    return store, report, stderr


def _copy(store: Path, folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    shutil.copyfile(store, folder / store.name)  # the cold process has exited: no WAL left
    return folder / store.name


def test_warm_run_makes_no_solver_call_and_installs_the_same_artifacts(cold_run, tmp_path):
    cold_store, cold, cold_err = cold_run
    store = _copy(cold_store, tmp_path / "warm")
    warm, warm_err = _program(store)
    assert cold["solver_calls"] > 0 and cold["store_hits"] == 0
    assert warm["solver_calls"] == 0 and warm["store_hits"] > 0
    assert _artifacts(warm) == _artifacts(cold)
    assert any(f["decisions"] for fs in cold["frames"].values() for f in fs)  # it did decide things
    # Item 4: the decision log and explain say where the answers came from.
    assert not any(any(f["from_store"]) for fs in cold["frames"].values() for f in fs)
    # each warm answer is a stored one, or a proof by the premises' bounds (never stored)
    assert all(s or b for fs in warm["frames"].values() for f in fs for s, b in zip(f["from_store"], f["by_bounds"]))
    assert any(any(f["from_store"]) for fs in warm["frames"].values() for f in fs)
    assert "from the proof store" in warm["frames"]["heads"][0]["summary"]
    assert "from store" in warm["explain"] and "from store" not in cold["explain"]
    assert not _store_warnings(cold_err + warm_err)
    # The run rows name the last process's hits and solver calls.
    stats = open_store(store).stats()
    assert stats["solver_calls_last_run"] == 0 and stats["hits_last_run"] == warm["store_hits"]
    assert stats["records"] == cold["solver_calls"]
    assert {"compile", "minimize"} <= set(stats["by_kind"])


def test_a_hit_is_the_same_answer_without_a_solver_call(tmp_path):
    store = open_store(tmp_path / "p.sqlite")
    questions = [(sympy.Eq(tf.PythonMod(32 * x, 1024), 0), [sympy.Eq(tf.PythonMod(x, 64), 0)]),  # proved
                 (sympy.Gt(x, 5), [sympy.Gt(2 * x, 2)]),                                        # refuted
                 (sympy.Ge(x * x * y * y - 2 * x * y + 1, 0), [])]                              # unknown
    limits = [solvers.Limits(), solvers.Limits(), solvers.Limits(rlimit=1)]
    first = [solvers.Prover(lim, store=store).prove(g, p) for (g, p), lim in zip(questions, limits)]
    assert [r.status for r in first] == ["proved", "refuted", "unknown"]
    again = solvers.Prover(store=store)
    for (g, p), lim, want in zip(questions, limits, first):
        got = again.prove(g, list(reversed(p)), limits=lim)
        assert got.from_store and not got.cached
        assert dataclasses.replace(got, time_s=0, from_store=False) == dataclasses.replace(want, time_s=0)
    assert again.stats.solver_calls == 0 and again.stats.store_hits == 3
    assert json.loads(json.dumps(got.to_json())) == got.to_json()
    assert solvers.SolveResult.from_json(got.to_json()) == got


# ---------------------------------------------------------------------- the key


def test_a_changed_premise_misses_the_store(tmp_path):
    store = open_store(tmp_path / "p.sqlite")
    goal = sympy.Eq(tf.PythonMod(32 * x, 4096), 0)
    solvers.Prover(store=store).prove(goal, [sympy.Eq(tf.PythonMod(x, 128), 0)])
    p = solvers.Prover(store=store)
    assert p.prove(goal, [sympy.Eq(tf.PythonMod(x, 128), 0)]).from_store
    changed = p.prove(goal, [sympy.Eq(tf.PythonMod(x, 64), 0)])   # a weaker premise: refuted
    more = p.prove(goal, [sympy.Eq(tf.PythonMod(x, 128), 0), sympy.Ge(x, 0)])  # one premise more
    assert not changed.from_store and changed.status == "refuted"
    assert not more.from_store and more.status == "proved"
    assert p.stats.solver_calls == 2 and p.stats.store_hits == 1
    # Symbol assumptions are part of the obligation too.
    xp = sympy.Symbol("x", integer=True, positive=True)
    assert not p.prove(sympy.Eq(tf.PythonMod(32 * xp, 4096), 0), [sympy.Eq(tf.PythonMod(xp, 128), 0)]).from_store


def test_a_changed_encoding_hash_misses_the_store(tmp_path, monkeypatch):
    store = open_store(tmp_path / "p.sqlite")
    goal, premises = SOLVED
    solvers.Prover(store=store).prove(goal, premises)
    assert solvers.Prover(store=store).prove(goal, premises).from_store
    monkeypatch.setattr(store_mod, "ENCODING_HASH", "0123456789abcdef")
    p = solvers.Prover(store=store)
    assert not p.prove(goal, premises).from_store and p.stats.solver_calls == 1
    assert {r.encoding_hash for r in store.records()} == {encoding.ENCODING_HASH, "0123456789abcdef"}


def test_the_encoding_hash_covers_every_solver_module():
    sources = encoding.package_sources(("verishape.solvers",))
    names = {n for n, _ in sources}
    assert {"verishape.solvers/translate.py", "verishape.solvers/pyarith.py", "verishape.solvers/query.py",
            "verishape.solvers/prover.py"} <= names
    assert encoding.encoding_hash(sources) == encoding.ENCODING_HASH
    edited = [(n, t + b"\n# edited" if n == "verishape.solvers/pyarith.py" else t) for n, t in sources]
    assert encoding.encoding_hash(edited) != encoding.ENCODING_HASH


def test_unknown_is_retried_under_higher_limits(tmp_path):
    store = open_store(tmp_path / "p.sqlite")
    goal = sympy.Le(tf.FloorDiv(x + y, 2), sympy.Max(x, y))
    low = solvers.Limits(rlimit=1)
    assert solvers.Prover(low, store=store).prove(goal).status == "unknown"
    assert solvers.Prover(low, store=store).prove(goal).from_store  # same limits: same answer
    p = solvers.Prover(store=store)
    r = p.prove(goal)
    assert r.status == "proved" and not r.from_store and p.stats.solver_calls == 1


def test_answers_that_depend_on_the_machine_are_not_stored(tmp_path, monkeypatch):
    import z3

    store = open_store(tmp_path / "p.sqlite")

    def boom(self, *a, **k):
        raise z3.Z3Exception("injected failure")

    monkeypatch.setattr(z3.Solver, "check", boom)
    r = solvers.Prover(store=store).prove(*SOLVED)
    assert r.status == "unknown" and store.count() == 0


# ---------------------------------------------------------------------- the records


def test_records_hold_a_self_contained_smtlib_script_that_z3_and_cvc5_read(tmp_path):
    import z3

    store = open_store(tmp_path / "p.sqlite")
    with solvers.asked_by("audit"):
        solvers.Prover(store=store).prove(sympy.Eq(tf.PythonMod(32 * x, 4096), 0), [sympy.Eq(tf.PythonMod(x, 128), 0)])
    solvers.Prover(store=store).prove(sympy.Gt(x, 5), [sympy.Gt(2 * x, 2)])
    proved, refuted = list(store.records())
    assert (proved.kind, proved.verdict, refuted.kind, refuted.verdict) == ("audit", "proved", "query", "refuted")
    assert refuted.counterexample_values is not None and 1 < refuted.counterexample_values["x"] <= 5
    assert proved.solver == store_mod.SOLVER and proved.encoding_hash == encoding.ENCODING_HASH
    assert store_mod.key_of(proved) == proved.key
    for record, want in ((proved, z3.unsat), (refuted, z3.sat)):
        assert "set-option" not in record.smtlib and "(check-sat)" in record.smtlib
        s = z3.Solver(ctx=z3.Context())
        s.from_string(record.smtlib)
        assert s.check() == want
    cvc5 = pytest.importorskip("cvc5")
    for record, want in ((proved, "unsat"), (refuted, "sat")):
        tm = cvc5.TermManager()
        solver = cvc5.Solver(tm)
        symbols = cvc5.SymbolManager(tm)
        parser = cvc5.InputParser(solver, symbols)
        parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, record.smtlib, "record")
        answers = []
        while not (cmd := parser.nextCommand()).isNull():
            answers.append(cmd.invoke(solver, symbols).strip())
        assert [a for a in answers if a] == [want]


def test_export_import_and_prune(tmp_path):
    here = open_store(tmp_path / "a.sqlite")
    solvers.Prover(store=here).prove(*SOLVED)
    solvers.Prover(store=here).prove(sympy.Gt(x, 5), [sympy.Gt(2 * x, 2)])
    here.export(tmp_path / "shipped.sqlite")
    there = open_store(tmp_path / "b.sqlite")
    assert there.import_(tmp_path / "shipped.sqlite") == 2 and there.import_(tmp_path / "shipped.sqlite") == 0
    assert solvers.Prover(store=there).prove(*SOLVED).from_store
    # A record whose key does not name its own obligation is refused on import.
    forged = dataclasses.replace(next(here.records()), id=None, key="0" * 64, goal_srepr="Integer(1)")
    here.add(forged)
    here.export(tmp_path / "forged.sqlite")
    assert open_store(tmp_path / "c.sqlite").import_(tmp_path / "forged.sqlite") == 2
    # Records of another encoding can never be hit: prune drops them.
    here.add(dataclasses.replace(next(here.records()), id=None, key="1" * 64, encoding_hash="old"))
    assert here.prune() == 1 and here.count() == 3


# ---------------------------------------------------------------------- several processes


def _writer(path: str, worker: int, barrier: multiprocessing.Barrier, queue: multiprocessing.Queue) -> None:
    warnings: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("verishape").addHandler(handler)
    store = open_store(path)
    assert store is not None
    template = StoredProof(key="", kind="query", goal="x > 0", goal_srepr="x", premises_srepr="[]",
                           verdict="proved", vacuous=False, undefined_goal=False, counterexample=None, reason=None,
                           solver="test", rlimit=1, timeout_ms=1, seed=0, time_s=0.0, verishape_version="test",
                           encoding_hash="test", smtlib="(check-sat)", created=time.time())
    prover = solvers.Prover(store=store)
    prover._implied = lambda *a: None  # real solver answers: no proof by bounds (they are never stored)
    barrier.wait()
    for i in range(300):  # raw writes, interleaved with the other process's
        store.add(dataclasses.replace(template, key=f"w{worker}-{i}"))
        store.add(dataclasses.replace(template, key=f"shared-{i % 100}"))
        if i % 30 == 0:  # and real solver answers, some asked by both processes
            prover.prove(sympy.Ge(x, i), [sympy.Ge(x, i + worker)])
            prover.prove(sympy.Le(x * 2, i), [sympy.Le(x, i // 2)])
    store.close()
    queue.put((worker, warnings))


def test_two_processes_write_at_once(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, barrier, queue)) for w in (1, 2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert results == {1: [], 2: []}  # no warnings: nothing was locked out
    store = open_store(path)
    keys = [r.key for r in store.records()]
    assert len(keys) == len(set(keys))
    raw = {k for k in keys if k.startswith(("w1-", "w2-", "shared-"))}
    assert len(raw) == 300 + 300 + 100  # nothing lost
    solved = [r for r in store.records() if r.solver == store_mod.SOLVER]
    assert len(solved) == 10 + 10 + 10  # Ge differs per worker, Le is the same question for both
    assert len(open_store(path).stats()["by_kind"]) >= 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _strip_origin(value):
    """A report without the fields that say where answers came from or how long they took."""
    if isinstance(value, dict):
        return {k: _strip_origin(v) for k, v in value.items()
                if k not in ("from_store", "cached", "time_s", "answers_from_store")}
    if isinstance(value, list):
        return [_strip_origin(v) for v in value]
    return value


@pytest.mark.slow
def test_the_audit_report_says_which_answers_came_from_the_store(tmp_path):
    env = dict(os.environ, VERISHAPE_PROOF_STORE=str(tmp_path / "proofs.sqlite"))
    reports, texts = [], []
    for run in ("cold", "warm"):
        out = subprocess.run([sys.executable, "-m", "verishape", "verify-guards",
                              str(ROOT / "tests" / "scripts" / "aot_decisions.py"), "--json", str(tmp_path / run)],
                             check=False, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert out.returncode in (0, 1), out.stderr[-2000:]
        reports.append(json.loads((tmp_path / run).read_text()))
        texts.append(out.stdout)
    cold, warm = reports
    assert cold["summary"]["answers"] > 0 and cold["summary"]["answers_from_store"] == 0
    assert warm["summary"]["answers_from_store"] == warm["summary"]["answers"] == cold["summary"]["answers"]
    assert _strip_origin(warm) == _strip_origin(cold)  # same findings, same counterexamples
    assert "from the proof store" in texts[1] and "from store" not in texts[0]


# ---------------------------------------------------------------------- unusable stores


def test_a_corrupt_store_is_one_warning_and_the_compile_goes_on(cold_run, tmp_path):
    store = tmp_path / "proofs.sqlite"
    store.write_bytes(b"this is not a database\0" * 300)
    _, clean, _ = cold_run
    report, stderr = _program(store)
    warnings = _store_warnings(stderr)
    assert len(warnings) == 1 and "unusable" in warnings[0], stderr[-2000:]
    assert _artifacts(report) == _artifacts(clean)
    assert report["store_hits"] == 0 and report["solver_calls"] > 0
    assert store.read_bytes() == b"this is not a database\0" * 300  # left as it was


def _read_only(command: list[str]) -> list[str]:
    """``command`` run so that it cannot write files it lacks permission for: root
    ignores permissions unless it gives up CAP_DAC_OVERRIDE."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a file read-only for this process")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]


@pytest.mark.slow
def test_a_read_only_store_is_one_warning_and_the_compile_goes_on(cold_run, tmp_path):
    cold_store, cold, _ = cold_run
    folder = tmp_path / "ro"
    store = _copy(cold_store, folder)
    before = store.read_bytes()
    store.chmod(0o444)
    folder.chmod(0o555)
    try:
        env = dict(os.environ, VERISHAPE_PROOF_STORE=str(store))
        out = subprocess.run(_read_only([sys.executable, str(PROGRAM)]), check=False, capture_output=True, text=True, env=env,
                             cwd=ROOT, timeout=300)
    finally:
        folder.chmod(0o755)
        store.chmod(0o644)
    assert out.returncode == 0, out.stderr[-3000:]
    warnings = _store_warnings(out.stderr)
    assert len(warnings) == 1 and "unusable" in warnings[0], out.stderr[-2000:]
    report = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("REPORT "))[7:])
    assert _artifacts(report) == _artifacts(cold)
    assert store.read_bytes() == before


def test_a_store_locked_by_another_process_is_one_warning(tmp_path, monkeypatch, caplog):
    path = tmp_path / "p.sqlite"
    store = open_store(path)
    p = solvers.Prover(store=store)
    p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 6)])
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 50)
    store._conn.execute("PRAGMA busy_timeout = 50")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with caplog.at_level(logging.WARNING, logger="verishape"):
            assert open_store(path) is None  # opening must write (schema): locked
            r1 = p.prove(sympy.Gt(x, 5), [sympy.Gt(2 * x, 2)])  # adding fails: store off from now on
            r2 = p.prove(sympy.Gt(x, 6), [sympy.Gt(2 * x, 2)])
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert r1.status == r2.status == "refuted" and p.store() is None
    lines = [r.getMessage() for r in caplog.records if "proof store" in r.getMessage()]
    assert len(lines) == 2 and all("locked" in line for line in lines)  # one at open, one in use
    assert p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 6)]).status == "proved"


def test_the_environment_variable_turns_the_store_off(monkeypatch, tmp_path):
    for value in ("off", "0", "", "none", "OFF"):
        monkeypatch.setenv(store_mod.ENV_VAR, value)
        assert store_mod.configured_path() is None and store_mod.process_store() is None
    monkeypatch.setenv(store_mod.ENV_VAR, str(tmp_path / "here.sqlite"))
    assert store_mod.process_store().path == tmp_path / "here.sqlite"
    monkeypatch.delenv(store_mod.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert store_mod.configured_path() == tmp_path / "cache" / "verishape" / "proofs.sqlite"


def test_the_test_session_never_uses_the_users_cache_folder():
    chosen = store_mod.configured_path()
    assert chosen is None or not str(chosen).startswith(str(Path.home() / ".cache"))


# ---------------------------------------------------------------------- cost


def test_a_warm_prover_answers_the_latency_corpus_from_the_store_alone(tmp_path):
    """The guard-shaped questions of benchmarks/solver_latency.py, asked again by a fresh
    prover (no in-memory cache): every answer comes from the store, none from the solver,
    and each is the cold answer.  (How much cheaper a hit is, is measured by
    benchmarks/proof_store.py, not asserted here.)"""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from solver_latency import _query
    finally:
        sys.path.pop(0)
    import random

    rng = random.Random(1)
    corpus = list(dict.fromkeys((g, tuple(p)) for g, p in (_query(rng) for _ in range(60))))
    store = open_store(tmp_path / "p.sqlite")

    cold = [solvers.Prover(store=store).prove(g, p) for g, p in corpus]
    warm_prover = solvers.Prover(store=store)
    warm = [warm_prover.prove(g, p) for g, p in corpus]
    # what the cheap tiers answer (refuted at the premises' bounds, proved by them) never
    # reached the solver: it is answered again the same way, the rest comes from the store
    first_tier = [c.reason in WITHOUT_SOLVER for c in cold]
    assert 0 < sum(first_tier) < len(corpus)
    assert warm_prover.stats.solver_calls == 0 and warm_prover.stats.store_hits == first_tier.count(False)
    assert all(w.from_store != tier for w, tier in zip(warm, first_tier))
    assert [(w.status, w.counterexample) for w in warm] == [(c.status, c.counterexample) for c in cold]


def test_decision_log_counts_answers_from_the_store():
    from verishape.proofs import Obligation, ProofRecord

    log = DecisionLog()
    log.add(ProofRecord(Obligation(sympy.Gt(s0, 0), (), "guard_avoided"), solvers.SolveResult("proved"), True))
    log.add(ProofRecord(Obligation(sympy.Gt(s0, -1), (), "guard_avoided"),
                        solvers.SolveResult("proved", from_store=True), True))
    assert log.from_store() == (1, 2)
    assert "1 of 2 answers from the proof store" in log.summary()
    assert "proved by the premises' bounds" not in log.summary()
    log.add(ProofRecord(Obligation(sympy.Gt(s0, -2), (), "guard_avoided"),
                        solvers.SolveResult("proved", reason=BY_BOUNDS), True))
    assert "1 of 3 proved by the premises' bounds (no solver call)" in log.summary()
    assert "from store" in str(log.records[1]) and "from store" not in str(log.records[0])


def test_every_solver_limit_is_in_the_obligation_key():
    """The key holds the limits whole: a field added to Limits enters every key without
    anyone listing it (and a record decided under other limits is another obligation)."""
    limits = solvers.Limits()
    base = store_mod.obligation_key("Symbol('s0')", ["Symbol('s1')"], limits)
    keys = {base}
    for field in dataclasses.fields(limits):
        other = dataclasses.replace(limits, **{field.name: getattr(limits, field.name) + 1})
        keys.add(store_mod.obligation_key("Symbol('s0')", ["Symbol('s1')"], other))
    assert len(keys) == 1 + len(dataclasses.fields(limits))
    assert store_mod.obligation_key("Symbol('s0')", ["Symbol('s1')", "Symbol('s1')"], limits) == base


def test_an_answer_the_resource_limit_stopped_is_stored(tmp_path):
    """Z3's "canceled" is its resource limit (a function of the query and the limits), not
    the machine: stored, so a restart does not spend the limit on the question again."""
    store = open_store(tmp_path / "p.sqlite")
    goal, limits = sympy.Ge(x * x * y * y - 2 * x * y + 1, 0), solvers.Limits(rlimit=1000)
    r = solvers.Prover(limits, store=store).prove(goal)
    assert r.reason == "solver: canceled" and store.count() == 1
    warm = solvers.Prover(limits, store=store)
    assert warm.prove(goal).from_store and warm.stats.solver_calls == 0
