"""Symbols map back to Dynamo sources; the verishape logger reports decisions."""

from __future__ import annotations

import logging
import types

import sympy
import torch

import verishape
from compile_helpers import capturing
from verishape.core.sources import describe, source_name, symbol_sources


def test_source_name_property_and_method():
    assert source_name(types.SimpleNamespace(name="L['x']")) == "L['x']"  # torch >= 2.11
    assert source_name(types.SimpleNamespace(name=lambda: "L['y']")) == "L['y']"  # older


def test_symbols_map_to_input_sources():
    envs = []

    def f(x, y):
        return x.sum() + y.sum() + x.shape[0] * y.shape[1]

    verishape.compile(f, backend=capturing(envs), dynamic=True)(torch.ones(3, 4), torch.ones(5, 6))
    torch._dynamo.reset()
    names = symbol_sources(envs[0])
    flat = {n for v in names.values() for n in v}
    assert {"L['x'].size()[0]", "L['y'].size()[1]"} <= flat
    sym = next(s for s, v in names.items() if "L['x'].size()[0]" in v)
    assert describe(sympy.Symbol(sym, integer=True, positive=True) >= 2, envs[0]) == "L['x'].size()[0] >= 2"


def test_logger_debug_per_decision_info_per_frame(caplog):
    def f(x):
        a, b = x[0].item(), x[1].item()
        torch._check(a >= 0)
        torch._check(b >= 1)
        if a * b >= a:
            return torch.ones(a)
        return torch.zeros(1)

    with torch._dynamo.config.patch(capture_scalar_outputs=True), caplog.at_level(logging.DEBUG, logger="verishape"):
        verishape.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)(torch.tensor([2, 3]))
    torch._dynamo.reset()
    msgs = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "verishape"]
    assert any(lvl == logging.DEBUG and "verishape decision: [dde_avoided]" in m for lvl, m in msgs), msgs
    assert any(lvl == logging.INFO and m.startswith("verishape frame f:") for lvl, m in msgs), msgs
