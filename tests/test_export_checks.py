"""Self-checking exported programs: every declared bound and every fact a proof assumed is
checked by the program's own graph (``ep.module()``, a saved and re-loaded program, a
decomposed one), under every way of declaring sizes."""

from __future__ import annotations

import io

import pytest
import torch
from torch.export import Dim

import verishape
from export_corpus import PROGRAMS
from verishape.compiler.export.program import export_program_checks

BY_NAME = {p.name: p for p in PROGRAMS}


class Rows(torch.nn.Module):
    def forward(self, x):
        return x.mean(0)


def _export(exporter, mod, args, spec, strict=False):
    torch._dynamo.reset()
    return exporter(mod, args, dynamic_shapes=spec, strict=strict)


def _rejects(module, *args) -> str:
    with pytest.raises(RuntimeError) as info:
        module(*args)
    return str(info.value)


@pytest.mark.parametrize("strict", [False, True])
def test_a_declared_min_of_two_is_checked_stock_accepts_size_one(strict):
    spec = {"x": {0: Dim("rows", min=2, max=16)}}
    stock = _export(torch.export.export, Rows(), (torch.randn(4, 3),), spec, strict)
    assert stock.module()(torch.randn(1, 3)).shape == (3,)  # stock: out of range, silently run
    ep = _export(verishape.export, Rows(), (torch.randn(4, 3),), spec, strict)
    for size in (0, 1):
        message = _rejects(ep.module(), torch.randn(size, 3))
        assert "x.size(0) >= 2" in message and "Dim 'rows' has min=2" in message
    torch.testing.assert_close(ep.module()(torch.randn(5, 3).fill_(2.0)), torch.full((3,), 2.0))
    assert {c.origin for c in export_program_checks(ep)} == {"declared"}


def test_checks_survive_save_load_and_decompositions():
    ep = _export(verishape.export, Rows(), (torch.randn(4, 3),), {"x": {0: Dim("rows", min=2, max=16)}})
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    for program in (torch.export.load(buffer), ep.run_decompositions()):
        assert "x.size(0) >= 2" in _rejects(program.module(), torch.randn(1, 3))
        assert program.module()(torch.randn(3, 3)).shape == (3,)


@pytest.mark.parametrize("how", ["dim_hint_min", "shapes_collection", "dim_max"])
def test_every_way_of_declaring_sizes_goes_through_the_same_rule(how):
    x = torch.randn(4, 3)
    if how == "dim_hint_min":
        spec, bad, needle = {"x": {0: Dim.DYNAMIC(min=1)}}, torch.randn(0, 3), "Dim.DYNAMIC has min=1"
    elif how == "shapes_collection":
        spec = torch.export.ShapesCollection()
        spec[x] = {0: Dim("n", min=2)}
        bad, needle = torch.randn(1, 3), "Dim 'n' has min=2"
    else:
        spec, bad, needle = {"x": {0: Dim("n", max=8)}}, torch.randn(9, 3), "Dim 'n' has max=8"
    ep = _export(verishape.export, Rows(), (x,), spec)
    messages = [str(n.args[1]) for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]
    assert any(needle in m for m in messages), messages
    with pytest.raises((RuntimeError, AssertionError)):  # ep.module() checks an upper bound first itself
        ep.module()(bad)


@pytest.mark.parametrize("name,fact", [("auto_product_bound", ">= 1"), ("auto_pairs", ">= 2")])
def test_a_traced_bound_a_proof_needs_becomes_a_check(name, fact):
    program = BY_NAME[name]
    with pytest.raises(Exception, match="data-dependent|GuardOnDataDependentSymNode"):
        _export(torch.export.export, program.module(), program.inputs[0], program.dynamic_shapes)
    ep = _export(verishape.export, program.module(), program.inputs[0], program.dynamic_shapes)
    checks = export_program_checks(ep)
    assert [c.origin for c in checks] == ["premise"] and str(checks[0].fact).endswith(fact)
    assert "a proof of this export assumed it" in checks[0].why and "export_corpus.py" in checks[0].why
    module = ep.module()
    for args in program.inputs:
        torch.testing.assert_close(module(*args), program.module()(*args))
    low = int(fact.split()[-1])
    message = _rejects(module, torch.randn(low - 1), torch.tensor(1))
    assert f"x.size(0) {fact}" in message
    assert "program checks: premise" in verishape.explain(ep)


def test_a_declared_bound_is_a_premise_once_checked():
    """``sum_below_size_min2`` needs ``a.size(0) >= 2``, declared: stock cannot use it."""
    program = BY_NAME["sum_below_size_min2"]
    ep = _export(verishape.export, program.module(), program.inputs[0], program.dynamic_shapes)
    assert "a.size(0) >= 2" in _rejects(ep.module(), torch.randn(1), torch.randn(6), torch.tensor(4))
    assert all(c.origin == "declared" for c in export_program_checks(ep))


def test_a_program_without_declared_bounds_gets_no_checks():
    ep = _export(verishape.export, Rows(), (torch.randn(4, 3),), {"x": {0: Dim.AUTO}})
    assert export_program_checks(ep) == []
    assert not [n for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]


def test_a_min_of_one_survives_save_load_and_decompositions_in_tensor_form():
    """``size >= 1`` holds for every positive size, so a lowering folds its scalar check:
    it gets a tensor-form check too (``_assert_async`` on the size as a tensor), which every
    form of the program runs, with the same message."""
    ep = _export(verishape.export, Rows(), (torch.randn(4, 3),), {"x": {0: Dim("rows", min=1, max=16)}})
    tensor_checks = [n for n in ep.graph.nodes if n.target is torch.ops.aten._assert_async.msg]
    assert len(tensor_checks) == 1 and "x.size(0) >= 1" in tensor_checks[0].args[1]
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    for program in (ep, torch.export.load(buffer), ep.run_decompositions()):
        assert "x.size(0) >= 1 (Dim 'rows' has min=1)" in _rejects(program.module(), torch.randn(0, 3))
        assert program.module()(torch.randn(1, 3)).shape == (3,)
    two = _export(verishape.export, Rows(), (torch.randn(4, 3),), {"x": {0: Dim("rows", min=2, max=16)}})
    assert not [n for n in two.graph.nodes if n.target is torch.ops.aten._assert_async.msg]


@pytest.mark.slow
def test_an_aoti_package_rejects_size_zero_below_a_min_of_one_with_our_message(tmp_path):
    """Measured before the tensor form (torch 2.13): the package ran size 0 and returned
    zeros, its ``size >= 1`` check folded away by the lowering."""
    ep = _export(verishape.export, Rows(), (torch.randn(4, 3),), {"x": {0: Dim("rows", min=1, max=16)}})
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "rows.pt2"))
    run = torch._inductor.aoti_load_package(path)
    torch.testing.assert_close(run(torch.full((2, 3), 2.0)), torch.full((3,), 2.0))
    assert "verishape: input check failed: x.size(0) >= 1 (Dim 'rows' has min=1)" in _rejects(run, torch.randn(0, 3))
