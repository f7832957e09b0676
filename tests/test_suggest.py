"""The proved ``torch._check`` named in a data-dependent error of ``verishape.export``."""

from __future__ import annotations

import pytest
import torch

import verishape
from export_corpus import PROGRAMS
from verishape import solvers
from verishape.compiler.export import suggest
from verishape.core.premises import use_prover

BY_NAME = {p.name: p for p in PROGRAMS}


def _error(program, cls=None):
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        verishape.export((cls or program.module)(), program.inputs[0], dynamic_shapes=program.dynamic_shapes)
    assert "GuardOnDataDependentSymNode" in type(info.value).__name__
    return info.value


def test_a_validation_gets_a_check_that_rejects_nothing_eager_accepts():
    err = _error(BY_NAME["validate_count"])
    found = err.verishape_suggestion
    assert found.check == "torch._check(k <= x.shape[0])"
    assert found.statement == "if k > x.shape[0]:" and found.decides is False
    assert found.rejects_nothing_eager_accepts is True and "(proved)" in found.eager
    assert found.check in str(err) and verishape.explain(err) == found.text()
    assert found.to_dict()["check"] == found.check


def test_applied_checks_make_the_program_export_and_match_eager():
    program = BY_NAME["validate_range"]
    cls, applied = program.module, []
    for _ in range(4):
        torch._dynamo.reset()
        try:
            ep = verishape.export(cls(), program.inputs[0], dynamic_shapes=program.dynamic_shapes)
            break
        except Exception as exc:  # noqa: BLE001 - the next suggestion is read from it
            found = exc.verishape_suggestion
            applied.append(found.check)
            cls = type("Patched", (cls,), {"forward": suggest.apply_to_function(cls.forward, found)})
    else:
        pytest.fail(f"still failing after {applied}")
    assert applied == ["torch._check(start >= 0)", "torch._check(stop <= x.shape[0])", "torch._check(start <= stop)"]
    for args in program.inputs:
        torch.testing.assert_close(ep.module()(*args), program.module()(*args))
    with pytest.raises(RuntimeError):  # the applied check is in the program
        ep.module()(torch.randn(4), torch.tensor([3, 1]))


def test_a_real_branch_names_what_it_rejects_and_torch_cond():
    found = _error(BY_NAME["chain3_gap"]).verishape_suggestion
    assert found.check == "torch._check(a <= c)" and found.rejects_nothing_eager_accepts is False
    assert "a > c" in found.eager and "torch.cond" in found.eager


def test_the_weakest_sufficient_fact_is_chosen():
    """``k <= 5`` (the branch) is weaker than ``k <= x.shape[0]`` under ``k * s == 10``."""
    found = _error(BY_NAME["mul_eq_bound_loose"]).verishape_suggestion
    assert found.check == "torch._check(k <= 5)"


class _Unknown(solvers.Prover):
    def prove(self, goal, assumptions=(), **kw):
        return solvers.SolveResult("unknown", reason="injected")


def test_nothing_unproved_is_ever_suggested():
    with use_prover(_Unknown()):
        err = _error(BY_NAME["validate_count"])
    assert err.verishape_suggestion is None and "torch._check(k" not in str(err)
    assert "no torch._check was proved" in verishape.explain(err)


def test_a_check_that_fails_on_the_examples_is_not_suggested():
    """The examples take both sides of the branch: no one-sided check holds on them."""

    class Loop(torch.nn.Module):
        def forward(self, x, t):
            out = x
            for v in t.tolist():
                if v > x.shape[0]:
                    out = out + 1
            return out

    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        verishape.export(Loop(), (torch.randn(4), torch.tensor([1, 9])), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}, "t": None})
    # ``torch._check(v <= x.shape[0])`` at that line would fail in eager at the second arrival
    assert info.value.verishape_suggestion is None
