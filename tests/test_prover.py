"""The solver front end: cache, statistics, limits, SMT-LIB export, failure handling.

Tests about what the solver itself does build ``Prover(store=None)``: the session's proof
store (tests/conftest.py) would otherwise answer a question an earlier test asked, and the
solver would never run."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import sympy
import z3
from torch.utils._sympy import functions as tf

from verishape import solvers
from verishape.solvers.prover import Prover

x = sympy.Symbol("x", integer=True)
y = sympy.Symbol("y", integer=True)
#: an easy question only the solver answers (a square: no bound rule, Note [A bound the premises state])
EASY = (sympy.Gt(x * x, 5), [sympy.Gt(x, 6)])
s0 = sympy.Symbol("s0", integer=True, positive=True)


def test_status_strings_and_types():
    p = Prover()
    r = p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 6)])
    assert r.status == "proved" and r.proved and r.counterexample is None
    r = p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 1)])
    assert r.status == "refuted" and r.refuted
    assert set(r.counterexample) == {"x"} and type(r.counterexample["x"]) is int
    assert 1 < r.counterexample["x"] <= 5
    assert r.time_s >= 0


def test_repeated_question_hits_cache():
    p = Prover()
    goal, prem = sympy.Eq(tf.PythonMod(32 * x, 1024), 0), [sympy.Eq(tf.PythonMod(x, 64), 0)]
    first = p.prove(goal, prem)
    second = p.prove(goal, list(reversed(prem)))
    assert not first.cached and second.cached
    assert second.status == first.status == "proved"
    assert p.stats.queries == 2 and p.stats.cache_hits == 1 and p.stats.hit_rate == 0.5
    assert p.stats.proved == 1  # counted once: the hit is not a new decision


def test_cache_key_includes_assumptions_and_limits():
    p = Prover()
    assert p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 6)]).status == "proved"
    assert p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 4)]).status == "refuted"
    assert not p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 6)], timeout_ms=1234).cached


def test_symbol_assumptions_are_part_of_the_question():
    plain = sympy.Symbol("s0", integer=True)
    assert solvers.prove(sympy.Gt(s0, 0)).status == "proved"
    assert solvers.prove(sympy.Gt(plain, 0)).status == "refuted"


def test_resource_limit_gives_unknown_not_an_answer():
    # A nonlinear question that needs real work; a tiny rlimit must give up.
    p = Prover(solvers.Limits(rlimit=1))
    goal = sympy.Ge(x * x * y * y - 2 * x * y + 1, 0)
    r = p.prove(goal)
    assert r.status == "unknown" and "solver" in r.reason


def test_limits_are_deterministic():
    goal = sympy.Le(tf.FloorDiv(x + y, 2), sympy.Max(x, y))
    answers = {Prover(store=None).prove(goal).status for _ in range(3)}
    assert answers == {"proved"}


def test_every_check_gets_its_own_context(monkeypatch):
    # Near the resource limit, a check in Z3's shared context can finish after one
    # history of earlier queries and give up after another (term ids steer Z3's
    # heuristics; the differential corpus showed 4 of 39 hard queries flipping when
    # asked in reverse order).  So no two checks may share a context, and none may use
    # the shared one.
    seen = []
    real_init = z3.Solver.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        seen.append(self.ctx)

    monkeypatch.setattr(z3.Solver, "__init__", spy)
    p = Prover(store=None)
    p.prove(*EASY)                                  # proved, plus a vacuity check
    p.prove(sympy.Gt(x, 5), [sympy.Gt(x, 4)])       # refuted
    p.prove(sympy.Ge(x * y, x), [sympy.Ge(y, 1), sympy.Ge(x, 0)])
    assert len(seen) >= 4
    assert all(c is not z3.main_ctx() for c in seen)
    assert len({id(c) for c in seen}) == len(seen)


def test_solver_exception_is_unknown(monkeypatch):
    def boom(self, *a, **k):
        raise z3.Z3Exception("injected failure")

    monkeypatch.setattr(z3.Solver, "check", boom)
    r = Prover(store=None).prove(*EASY)
    assert r.status == "unknown" and "injected failure" in r.reason


def test_bad_goal_is_a_clear_type_error():
    with pytest.raises(TypeError, match="goal must be a sympy boolean"):
        solvers.prove(x + 1)


def test_smtlib_export_is_a_runnable_script():
    text = solvers.smtlib(sympy.Eq(tf.PythonMod(32 * x, 4096), 0), [sympy.Eq(tf.PythonMod(x, 64), 0)])
    assert "(check-sat)" in text and "declare-fun x" in text
    s = z3.Solver()
    s.from_string(text)
    assert s.check() == z3.sat  # refutable: sat means a counterexample exists
    text = solvers.smtlib(sympy.Eq(tf.PythonMod(32 * x, 1024), 0), [sympy.Eq(tf.PythonMod(x, 64), 0)])
    s = z3.Solver()
    s.from_string(text)
    assert s.check() == z3.unsat


@pytest.mark.skipif(shutil.which("z3") is None, reason="no z3 binary on PATH")
def test_smtlib_runs_in_the_z3_binary(tmp_path):  # pragma: no cover - optional
    path = tmp_path / "q.smt2"
    path.write_text(solvers.smtlib(sympy.Gt(x, 5), [sympy.Gt(x, 6)]))
    out = subprocess.run(["z3", str(path)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "unsat"


def test_global_stats_accumulate():
    before = solvers.stats().queries
    solvers.prove(sympy.Ne(x, x + 1))
    assert solvers.stats().queries == before + 1
    assert "hit_rate" in solvers.stats().as_dict()


# ---------------------------------------------------------------- threads

_HAMMER = r"""
import sys, threading
import sympy
from torch.utils._sympy import functions as tf
from verishape.solvers import Prover

x, y = sympy.symbols("x y", integer=True)
queries = []
for k in range(int(sys.argv[1])):
    queries.append((sympy.Ge(x * y + k, x), (sympy.Ge(y, 1), sympy.Ge(x, 0))))            # proved
    queries.append((sympy.Gt(x, k), (sympy.Gt(x, -k),)))                                   # refuted
    queries.append((sympy.Le(tf.FloorDiv(x + k, 2) * 2, x + k), (sympy.Ge(x, k),)))       # proved
    queries.append((sympy.Eq(tf.PythonMod(x, k + 2), 0), (sympy.Eq(tf.PythonMod(x, 2 * k + 4), 0),)))

def answer(prover, goal, assumptions):
    r = prover.prove(goal, assumptions)
    return (r.status, tuple(sorted((r.counterexample or {}).items())))

sequential = [answer(Prover(store=None), g, a) for g, a in queries]
results, errors = {}, []

def hammer(name, order):
    try:
        prover = Prover(store=None)
        results[name] = {i: answer(prover, *queries[i]) for i in order}
    except BaseException as exc:
        errors.append(repr(exc))

n = len(queries)
threads = [threading.Thread(target=hammer, args=(i, list(range(n))[::1 if i % 2 else -1])) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
for name, got in results.items():
    assert [got[i] for i in range(n)] == sequential, name
assert "unknown" not in {s for s, _ in sequential}
print("ok", n)
"""


def test_provers_on_several_threads_answer_as_sequentially(tmp_path):
    """Each prover has its own cache lock, but all of them translate queries in Z3's
    one shared context.  A subprocess, so that a crash inside Z3 fails this test only."""
    import subprocess
    import sys

    script = tmp_path / "hammer.py"
    script.write_text(_HAMMER)
    done = subprocess.run([sys.executable, str(script), "12"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok 48")


def test_shared_context_work_is_never_concurrent(monkeypatch):
    """Building a query creates terms in Z3's shared context: two provers on two threads
    must not do it at the same time (the window is widened here by a short sleep)."""
    import threading
    import time

    from verishape.solvers import prover as prover_module

    active, overlaps = [0], [0]
    count = threading.Lock()
    real_build = prover_module.build_query

    def slow_build(*args, **kwargs):
        with count:
            active[0] += 1
            overlaps[0] = max(overlaps[0], active[0])
        try:
            time.sleep(0.01)
            return real_build(*args, **kwargs)
        finally:
            with count:
                active[0] -= 1

    monkeypatch.setattr(prover_module, "build_query", slow_build)

    def work(p, offset):
        for k in range(10):
            p.prove(sympy.Gt(x * x, k + offset), [sympy.Gt(x, k + offset + 1)])

    threads = [threading.Thread(target=work, args=(Prover(store=None), 100 * i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps[0] == 1


def test_torch_mod_with_a_symbolic_divisor_shares_the_floor_quotient():
    """Tiny GPT-2's attention reshape asks ``Eq(8*s, n*((8*s)//n))`` knowing
    ``Eq(Mod(8*s, n), 0)``.  With Z3's own ``mod`` this came back unknown after up to a
    second; sharing the quotient with the ``FloorDiv`` makes it linear in one fresh
    integer.  The refutation next to it checks the premise still carries weight."""
    s = sympy.Symbol("s", integer=True, positive=True)
    n = sympy.Symbol("n", integer=True, positive=True)
    goal = sympy.Eq(8 * s, n * tf.FloorDiv(8 * s, n))
    p = Prover(store=None)
    assert p.prove(goal, [sympy.Eq(tf.Mod(8 * s, n), 0)]).status == "proved"
    refuted = p.prove(goal, [sympy.Eq(tf.Mod(8 * s, n), 1)])
    assert refuted.status == "refuted"
    cx = refuted.counterexample
    assert (8 * cx["s"]) % cx["n"] == 1 and 8 * cx["s"] != cx["n"] * (8 * cx["s"] // cx["n"])


def test_a_point_inside_the_assumptions_is_asked_by_name():
    """``solvers.point``: a point where every assumption holds (the fuzz sampler's question),
    None where there is none."""
    s = sympy.Symbol("s", integer=True, positive=True)
    n = sympy.Symbol("n", integer=True, positive=True)
    p = Prover(store=None)
    got = solvers.point([sympy.Eq(tf.Mod(s, 8), 3), sympy.Gt(s, 20), sympy.Eq(n, 2 * s)], prover=p)
    assert got is not None and got["s"] % 8 == 3 and got["s"] > 20 and got["n"] == 2 * got["s"]
    assert solvers.point([sympy.Gt(s, 5), sympy.Lt(s, 3)], prover=p) is None


def test_questions_over_floats_get_the_float_resource_limit_in_a_compiles_scope():
    """PyTorch's ``test_unspec_float_precision`` asked Z3 about ``TruncToInt(zf * ToFloat(s))``
    under the default limit, half a second to a second each, and never settled one: in a
    scope bound to a budget (a compile's), a question over IEEE doubles gets the budget's
    float limit, a function of the question and the scope (the cache and the store key on
    it); outside one, the caller's limits whole."""
    from verishape.solvers import classes

    zf = sympy.Symbol("zf0", real=True)
    floaty = sympy.Ge(tf.TruncToInt(zf * tf.ToFloat(s0)), 0)
    default, cut = solvers.Limits(), classes.FLOAT_RLIMIT
    assert classes.limits_for(floaty, [sympy.Ge(s0, 2)], default, cut).rlimit == cut
    assert classes.limits_for(sympy.Ge(s0, 2), [floaty], default, cut).rlimit == cut  # in a premise
    ceil_div = sympy.Ge(tf.CeilToInt(tf.IntTrueDiv(s0 + 4, 2)), 2)  # conv1d's padding: integer arithmetic
    assert classes.limits_for(ceil_div, [], default, cut) == default
    assert classes.limits_for(sympy.Ge(tf.IntTrueDiv(s0 + 4, 2), 2), [], default, cut).rlimit == cut  # a double
    assert classes.limits_for(sympy.Ge(tf.FloorDiv(s0 + 4, 2), 2), [], default, cut) == default  # integers only
    low = solvers.Limits(rlimit=100)
    assert classes.limits_for(floaty, [], low, cut) == low  # never raised
    p = Prover(store=None)
    with solvers.spending(solvers.Budget(5)):
        r = p.prove(floaty, [sympy.Ge(s0, 2)])
        settled = p.prove(sympy.Ne(tf.TruncToInt(zf * tf.ToFloat(s0)), 0), [sympy.Ge(tf.TruncToInt(zf * tf.ToFloat(s0)), 2)])
    assert r.status == "unknown" and r.reason in solvers.RLIMIT_STOPS and r.time_s < 0.5  # zf may be negative
    assert settled.proved  # what Z3 settles quickly is still settled
    outside = Prover(solvers.Limits(rlimit=5000), store=None)
    assert outside.prove(floaty, [sympy.Ge(s0, 2)]).status == "unknown"
    assert (floaty, frozenset({sympy.Ge(s0, 2)}), solvers.Limits(rlimit=5000)) in outside._cache  # its own limits


def test_a_spent_budget_answers_unknown_without_the_solver():
    """Note [A scope's solver budget]: once the resource limit stopped ``stops_allowed``
    solver calls of a scope, later questions are unknown at once (stock's answer); the cache
    and other scopes still answer."""
    hard = [sympy.Ge(x * x * y * y - 2 * x * y + k, 0) for k in (1, 2, 3)]
    p = Prover(solvers.Limits(rlimit=1000), store=None)
    budget = solvers.Budget(2)
    with solvers.spending(budget):
        first = [p.prove(g) for g in hard]
        easy = p.prove(*EASY)
        again = p.prove(hard[0])
    assert [r.reason for r in first[:2]] == ["solver: canceled"] * 2 and budget.stops == 2 and budget.spent
    assert first[2].status == "unknown" and first[2].reason == solvers.OVER_BUDGET
    assert easy.reason == solvers.OVER_BUDGET  # the budget is spent: even an easy question is stock's
    assert again.cached and again.reason == "solver: canceled"  # a cached answer costs nothing
    assert budget.declined == 2 and p.stats.solver_calls == 2 and p.stats.over_budget == 2
    # outside the scope: asked.  Whether the solver proves EASY under this tight limit depends on
    # what the process asked Z3 before (alone in a fresh process it is canceled, after this file's
    # other tests proved; the compat run's worker got it first), so only the asking is asserted
    outside = p.prove(*EASY)
    assert outside.reason != solvers.OVER_BUDGET and not outside.cached and p.stats.solver_calls == 3
    assert p.prove(hard[2]).reason == "solver: canceled"  # a declined answer is not cached
