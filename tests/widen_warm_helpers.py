"""What the widening tests across a restart share (``test_widen_warm``, ``test_widen_remote``,
``test_widen_record``): a program swept under verishape with each call checked against eager,
the records and verdicts a cold process leaves in a cache folder, and a stand-in shape env
and question log for the record's own tests."""

from __future__ import annotations

import glob
import os

import sympy
import torch
from torch._dynamo.utils import counters

import verishape
from verishape.compiler import frames
from verishape.compiler.widen import questions


def broadcasts(x, y, bias):
    return torch.relu(x + y) * bias + x.sum(1, keepdim=True)


def make(b):
    return torch.randn(b, 6), torch.randn(b, 6), torch.randn(6)


#: the last function sweep compiled (for verishape.explain)
LAST: dict = {}


def sweep(fn, sizes, make=make):
    """Run ``fn`` compiled with verishape (Inductor, automatic dynamic) at ``sizes``, each
    call checked against eager; return (Inductor compiles, reuses at size 1, refusals)."""
    torch._dynamo.reset()
    counters.clear()
    frames._envs_by_code.clear()
    compiled = LAST["compiled"] = verishape.compile(fn)
    torch.manual_seed(0)
    with torch.no_grad():
        for b in sizes:
            args = make(b)
            torch.testing.assert_close(compiled(*args), fn(*args))
    lowered = counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_bypass"]
    refusals = [why for env in frames.envs_for(fn.__code__) for _, why in env.verishape_log.not_widened]
    return lowered, counters["verishape"]["reused_at_size_1"], refusals


def records(folder, magic=b"verishape-widen-record"):
    """The widening records (or, with another ``magic``, the verdicts) in ``folder``."""
    found = [p for p in sorted(glob.glob(os.path.join(folder, "verishape", "widen", "*", "*.rec")))
             if open(p, "rb").read(len(magic)) == magic]
    assert found, f"the cold process wrote no {magic.decode()}"
    return found


def verdicts(folder):
    return records(folder, b"verishape-aot-verdict")


def flip_last_byte(path):
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    open(path, "wb").write(bytes(data))


class RecordEnv:
    """What a record reads of a shape env: its symbols, their sources and ranges."""

    def __init__(self, ranges):
        from torch._dynamo.source import LocalSource, TensorProperty, TensorPropertySource
        from torch.utils._sympy.value_ranges import ValueRanges

        self.var_to_range = {s: ValueRanges(lo, hi) for s, (lo, hi) in ranges.items()}
        self.var_to_sources = {s: [TensorPropertySource(LocalSource(f"x{i}"), TensorProperty.SIZE, 0)]
                               for i, s in enumerate(ranges)}
        self.replacements = {}
        self.guards = []


def question_log():
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    s1 = sympy.Symbol("s1", integer=True, positive=True)
    log = questions.QuestionLog(frozenset({s0}))
    log.questions.append(questions.Question(sympy.Gt(s0, 1), sympy.true, (), (), ("pick_tiling", "lower"),
                                            (s0, s1), None, "true"))
    log.heuristic_hints["decide_parallel_depth"] = 3
    log.sizes.add_all([s0 * s1], "size", "buf0")
    return log, {s0: (2, 4096), s1: (2, sympy.oo)}


class Evil:
    """A pickle that would run code when loaded: no record may contain one."""

    def __reduce__(self):
        return (os.system, ("true",))
