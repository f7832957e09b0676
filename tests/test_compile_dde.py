"""The proved ``torch._check`` named in a data-dependent error of ``verishape.compile``: the
frame Dynamo was tracing is replayed through a non-strict export with its inputs, and the
check that export finds is appended to the error, kept as ``err.verishape_suggestion`` and
printed by ``verishape.explain(err)``."""

from __future__ import annotations

import pytest
import torch

import verishape
from dde_corpus import PROGRAMS as DDE_PROGRAMS
from export_corpus import PROGRAMS
from verishape.compiler.export import suggest

BY_NAME = {p.name: p for p in PROGRAMS}
DDE = {p.name: p for p in DDE_PROGRAMS}


@pytest.fixture(autouse=True)
def _scalars_captured():
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        yield


def _compile_error(fn, args, **kw):
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        verishape.compile(fn, fullgraph=True, **kw)(*args)
    return info.value


def test_a_module_s_data_dependent_error_names_the_proved_check():
    program = BY_NAME["validate_range"]
    err = _compile_error(program.module(), program.inputs[0])
    found = err.verishape_suggestion
    assert found.check == "torch._check(start >= 0)"
    assert found.check in str(err) and verishape.explain(err) == found.text()
    assert "GuardOnDataDependentSymNode" in type(err.__context__).__name__


@pytest.mark.xfail(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13), strict=True,
                   reason="torch 2.11's C++ codegen divides by a loop range's optimization hint, 0 for the window "
                          "length u1 - u0 the checks prove (decide_parallel_depth: ZeroDivisionError); 2.13 does not")
def test_applied_checks_make_the_compiled_module_run_and_match_eager():
    program = BY_NAME["validate_range"]
    cls, applied = program.module, []
    for _ in range(4):
        torch._dynamo.reset()
        compiled = verishape.compile(cls(), fullgraph=True)
        try:
            compiled(*program.inputs[0])
            break
        except Exception as exc:  # noqa: BLE001 - the next suggestion is read from it
            found = exc.verishape_suggestion
            assert found is not None, exc
            applied.append(found.check)
            cls = type("Patched", (cls,), {"forward": suggest.apply_to_function(cls.forward, found)})
    else:
        pytest.fail(f"still failing after {applied}")
    assert applied == ["torch._check(start >= 0)", "torch._check(stop <= x.shape[0])", "torch._check(start <= stop)"]
    for args in program.inputs:
        torch.testing.assert_close(compiled(*args), program.module()(*args))


def test_a_function_s_error_names_a_check_that_pasted_compiles_and_matches_eager():
    program = DDE["control_no_facts"]
    args = program.inputs[0]  # a = 3: the example takes the branch a > 5 is False
    err = _compile_error(program.fn, args, dynamic=True)
    found = err.verishape_suggestion
    assert found.condition == "a <= 5" and found.lineno == program.fn.__code__.co_firstlineno + 2
    assert found.rejects_nothing_eager_accepts is False and "torch.cond" in found.eager
    torch._dynamo.reset()
    patched = suggest.apply_to_function(program.fn, found)
    got = verishape.compile(patched, fullgraph=True, dynamic=True)(*args)
    torch.testing.assert_close(got, program.fn(*args))


def test_an_error_that_is_not_data_dependent_is_left_as_it_is():
    def f(x):
        if x.shape[0] > 2:
            raise ValueError("too many rows")
        return x + 1

    err = _compile_error(f, (torch.randn(4),))
    assert not hasattr(err, "verishape_suggestion")
    assert "too many rows" in str(err)


def test_a_graph_break_on_a_data_dependent_question_still_runs_as_stock():
    program = DDE["control_no_facts"]
    torch._dynamo.reset()
    compiled = verishape.compile(program.fn, dynamic=True)
    for args in program.inputs:
        torch.testing.assert_close(compiled(*args), program.fn(*args))


def test_the_returned_function_is_still_torch_s_compiled_function():
    def f(x):
        return x * 2

    compiled = verishape.compile(f)
    assert compiled._torchdynamo_orig_callable is f
    compiled(torch.randn(3))
    assert "1 frame(s) compiled with verishape" in verishape.explain(compiled)


def test_the_named_backend_s_error_is_explained_on_request():
    """``torch.compile(backend="verishape")`` returns torch's own function: the check is not
    in the message, but ``verishape.explain(err)`` finds it from the inputs the error kept."""
    program = BY_NAME["validate_range"]
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(program.module(), backend="verishape", fullgraph=True)(*program.inputs[0])
    err = info.value
    assert not hasattr(err, "verishape_suggestion")
    assert verishape.explain(err).startswith("verishape: add `torch._check(start >= 0)` before")
    assert err.verishape_suggestion.check == "torch._check(start >= 0)"
