"""The export corpus (``tests/export_corpus.py``): a few programs through stock
``torch.export.export`` and ``verishape.export`` (the full run is ``benchmarks/export_corpus.py``)."""

from __future__ import annotations

import pytest
import torch

import verishape
from export_corpus import PROGRAMS

BY_NAME = {p.name: p for p in PROGRAMS}


def export(exporter, program):
    torch._dynamo.reset()
    return exporter(program.module(), program.inputs[0], dynamic_shapes=program.dynamic_shapes, strict=False)


def assert_nodes(ep) -> list[str]:
    return [str(n.args[1]) for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]


def test_corpus_shape():
    provable = [p for p in PROGRAMS if p.provable]
    controls = [p for p in PROGRAMS if not p.provable]
    assert len(PROGRAMS) >= 28 and len(controls) >= 5
    assert all(len(p.inputs) >= 2 for p in PROGRAMS)
    assert sum(bool(p.bad) for p in provable) >= 20
    # every bad input breaks the user's own torch._check: eager raises on it
    for p in provable:
        for args in p.bad:
            with pytest.raises(RuntimeError):
                p.module()(*args)


@pytest.mark.parametrize("name", ["mul_eq_bound", "chain3", "split_tolist"])
def test_provable_stock_fails_verishape_exports_and_matches_eager(name):
    program = BY_NAME[name]
    with pytest.raises(Exception) as info:
        export(torch.export.export, program)
    assert "data-dependent" in str(info.value) or "GuardOnDataDependentSymNode" in repr(info.value)
    ep = export(verishape.export, program)
    assert type(ep) is torch.export.ExportedProgram
    module = ep.module()
    for args in program.inputs:
        torch.testing.assert_close(module(*args), program.module()(*args))
    for args in program.bad:  # the user's checks stay in the program
        with pytest.raises(RuntimeError):
            module(*args)
    assert assert_nodes(ep), "the user's torch._check facts must stay as runtime asserts"
    assert verishape.export_decisions(ep).counts().get("dde_avoided", 0) >= 1


@pytest.mark.parametrize("name", ["chain3_gap", "mul_eq_bound_loose"])
def test_undecidable_controls_fail_in_both(name):
    program = BY_NAME[name]
    for exporter in (torch.export.export, verishape.export):
        with pytest.raises(Exception) as info:
            export(exporter, program)
        assert "GuardOnDataDependentSymNode" in repr(info.value) or "data-dependent" in str(info.value)
