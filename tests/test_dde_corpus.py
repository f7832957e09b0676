"""The data-dependent corpus, compiled with torch.compile and with verishape.compile."""

from __future__ import annotations

import pytest
import torch

from verishape import solvers
from compile_helpers import guard_fingerprint, stock, vs
from dde_corpus import PROGRAMS
from verishape.core.premises import use_prover
from verishape.core.shape_env import VeriShapeEnv


@pytest.fixture(autouse=True)
def _dynamo_config():
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield
    torch._dynamo.reset()


PROVABLE = [p for p in PROGRAMS if p.provable]
CONTROLS = [p for p in PROGRAMS if not p.provable]


def test_corpus_size():
    assert len(PROVABLE) >= 25 and len(CONTROLS) >= 3
    assert all(len(p.inputs) >= 3 for p in PROGRAMS)


@pytest.mark.parametrize("program", PROVABLE, ids=lambda p: p.name)
def test_verishape_compiles_and_matches_eager(program):
    out = vs(program.fn, program.inputs)
    assert out.results == ["ok"] * len(program.inputs), out.results
    assert out.envs and all(isinstance(e, VeriShapeEnv) for e in out.envs)


@pytest.mark.parametrize("program", CONTROLS, ids=lambda p: p.name)
def test_undecidable_controls_still_raise(program):
    out = vs(program.fn, program.inputs)
    assert out.kinds == {"DDE"}, out.results
    assert stock(program.fn, program.inputs).kinds == {"DDE"}


class _Unknown(solvers.Prover):
    def prove(self, goal, assumptions=(), **kw):
        return solvers.SolveResult("unknown", reason="injected")


class _Raises(solvers.Prover):
    def prove(self, goal, assumptions=(), **kw):
        raise RuntimeError("injected solver crash")


class _TimesOut(solvers.Prover):
    """Z3 stopped at once, and no proving tier before it (Note [A bound the premises state]
    proves ``a * b <= 64`` from ``0 <= a, b <= 8`` without any solver: not a fault)."""

    def __init__(self) -> None:
        super().__init__(solvers.Limits(rlimit=1, timeout_ms=1))

    def _implied(self, goal, assumptions, witness):
        return None


FAULTS = {
    "timeout": _TimesOut,
    "unknown": _Unknown,
    "raises": _Raises,
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_faulty_solver_behaves_exactly_like_stock(fault):
    """With a solver that never answers, every program behaves as under stock torch:
    same outcome per input, same guards, same runtime asserts."""
    for program in PROGRAMS:
        want = stock(program.fn, program.inputs)
        with use_prover(FAULTS[fault]()):
            got = vs(program.fn, program.inputs)
        assert got.results == want.results, (program.name, got.results, want.results)
        assert [guard_fingerprint(e) for e in got.envs] == [guard_fingerprint(e) for e in want.envs], program.name


def test_a_bound_the_premises_state_is_proved_where_z3_gives_up_at_once():
    """``a * b <= 64`` from ``0 <= a, b <= 8``: the proving tier's interval product, no solver."""
    program = next(p for p in PROGRAMS if p.name == "product_bound")
    assert "DDE" in stock(program.fn, program.inputs).kinds
    prover = solvers.Prover(solvers.Limits(rlimit=1, timeout_ms=1))
    with use_prover(prover):
        got = vs(program.fn, program.inputs)
    assert got.kinds == {"ok"}, got.results
    assert prover.stats.proved_by_bounds >= 1


def test_decisions_are_recorded_with_kinds_and_sources():
    program = next(p for p in PROGRAMS if p.name == "mul_ge")
    out = vs(program.fn, program.inputs[:1])
    log = out.envs[0].verishape_log
    counts = log.counts()
    assert counts.get("dde_avoided", 0) >= 1, counts
    rec = next(r for r in log.records if r.obligation.kind == "dde_avoided")
    assert rec.result.status == "proved"
    assert rec.obligation.source and "dde_corpus.py" in rec.obligation.source
    assert "dde_avoided" in log.summary()
