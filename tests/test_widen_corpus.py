"""The adversarial corpus (``tests/widen_corpus.py``) on both backends: no call that reused
a generic artifact at 1 may differ from eager, and the programs that reuse keep reusing."""

from __future__ import annotations

import pytest

from verishape.fuzz.widen_check import run_sweep

from widen_corpus import CASES, REUSES

BY_NAME = {c.name: c for c in CASES}


def test_the_corpus_is_large_and_covers_every_group():
    assert len(CASES) >= 60 and len(BY_NAME) == len(CASES)
    groups = {c.group for c in CASES}
    assert {"layout", "aliasing", "branching", "empty reduction", "size-1 reduction", "norm", "attention",
            "graph break", "relayout"} <= groups
    assert set(REUSES["inductor"]) | set(REUSES["aot_eager"]) <= BY_NAME.keys()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_no_reuse_differs_from_eager(name, backend):
    c = BY_NAME[name]
    sweep = run_sweep(c.fn, c.make, c.sweep, backend=backend)
    assert sweep.wrong == [], sweep.to_dict()
    if name in REUSES[backend]:
        assert sweep.reuses >= 1, sweep.refusals
