"""The widening record and the AOT verdict themselves (compiler/widen/record.py,
compiler/widen/verdict.py): what they hold, how they are keyed, written whole and read back
only by their own key."""

from __future__ import annotations

import glob
import os
import pickle

import pytest
import sympy
import torch

from verishape.compiler.widen import questions, record
from widen_warm_helpers import (Evil, RecordEnv, broadcasts, flip_last_byte, make, question_log, records, sweep,
                                verdicts)


def test_a_record_round_trips_the_question_log():
    log, ranges = question_log()
    env = RecordEnv(ranges)
    back = record.loads(record.dumps(log, env), env, log.candidates)
    assert back.questions == log.questions and back.heuristic_hints == log.heuristic_hints
    assert back.sizes.entries == log.sizes.entries and back.candidates == log.candidates


def test_an_extern_kernel_call_is_recorded_by_its_operators_name():
    """A question asked inside an extern kernel's fake run keeps that run (to rerun it at 1):
    the kernel travels as ``aten.mm.default`` and comes back as the operator itself; a kernel
    that is not an operator makes the log unrecordable (the record is not written)."""
    from torch.utils import _pytree as pytree

    from verishape.compiler.widen.kernel_call import KernelCall

    log, ranges = question_log()
    s0 = next(iter(log.candidates))
    flat, spec = pytree.tree_flatten({"args": (torch.ones(2, 3), torch.ones(3, 4)), "kwargs": {}})
    call = KernelCall(torch.ops.aten.mm.default, [("tensor", (s0, 3), (3, 1), torch.float32, torch.device("cpu")),
                                                  ("tensor", (3, 4), (4, 1), torch.float32, torch.device("cpu"))],
                      spec, outputs=[("tensor", (s0, 4), (4, 1), torch.float32, torch.device("cpu"))], done=True)
    log.questions.append(questions.Question(sympy.Eq(s0, 1), sympy.false, (), (), ("process_kernel",),
                                            computed_in=call))
    env = RecordEnv(ranges)
    back = record.loads(record.dumps(log, env), env, log.candidates).questions[-1].computed_in
    assert back.kernel is torch.ops.aten.mm.default and back.spec == spec and back.outputs == call.outputs
    assert back.right_at({s0: sympy.Integer(1)})
    call.kernel = lambda a, b: a @ b
    with pytest.raises(record.Unrecordable, match="not an operator"):
        record.dumps(log, env)


def test_a_record_is_checked_against_the_live_trace():
    log, ranges = question_log()
    data = record.dumps(log, RecordEnv(ranges))
    s0 = next(iter(log.candidates))
    narrower = {**ranges, s0: (2, 64)}
    with pytest.raises(record.Dropped, match="bound to other inputs"):
        record.loads(data, RecordEnv(narrower), log.candidates)
    with pytest.raises(record.Dropped, match="other sizes"):
        record.loads(data, RecordEnv(ranges), frozenset())
    with pytest.raises(record.Dropped, match="digest"):
        record.loads(data[:-1], RecordEnv(ranges), log.candidates)  # truncated
    with pytest.raises(record.Dropped, match="is not one"):
        record.loads(b"\x00" * 10, RecordEnv(ranges), log.candidates)


def test_guards_compare_in_a_form_that_does_not_depend_on_how_they_were_written():
    """torch re-installs a cached entry's guards from their printed form (Eq(s - 1, 1) comes
    back as Eq(s, 2)): the record compares them normalized, and different facts still differ."""
    s = sympy.Symbol("s17", integer=True, positive=True)
    assert record._normal(sympy.Eq(s - 1, 1)) == record._normal(sympy.Eq(s, 2)) == record._normal(sympy.Eq(2, s))
    assert record._normal(sympy.Ge(s, 2)) == record._normal(sympy.Le(2, s))
    assert record._normal(sympy.Gt(s, 2)) != record._normal(sympy.Ge(s, 2))
    assert record._normal(sympy.Eq(s, 3)) != record._normal(sympy.Eq(s, 2))
    # an integer's strict bound comes back as a weak one (the warm fuzzer, seed 13: a sort's
    # ``s < 32767`` read back as ``s <= 32766`` lost the reuse at 1 in the restarted process)
    assert record._normal(sympy.Lt(s, 32767)) == record._normal(sympy.Le(s, 32766)) == record._normal(
        sympy.Ge(32766, s)) == record._normal(sympy.Gt(32767, s))
    assert record._normal(sympy.Lt(s, 32767)) != record._normal(sympy.Le(s, 32767))
    # a bound on a multiple comes back divided (the warm layout fuzzer, seed 83: 8*s <= 4104
    # cold, s <= 513 warm), rounded as integers round, and an equation only where it divides
    assert record._normal(sympy.Le(8 * s, 4104)) == record._normal(sympy.Le(s, 513))
    assert record._normal(sympy.Le(8 * s, 4100)) == record._normal(sympy.Le(s, 512))
    assert record._normal(sympy.Ge(8 * s, 4100)) == record._normal(sympy.Ge(s, 513))
    assert record._normal(sympy.Le(8 * s, 4104)) != record._normal(sympy.Le(s, 512))
    assert record._normal(sympy.Eq(4 * s, 8)) == record._normal(sympy.Eq(s, 2))
    assert record._normal(sympy.Ne(4 * s, 6)) != record._normal(sympy.Ne(2 * s, 3))
    x = sympy.Symbol("x", real=True)  # a float: no such rewriting
    assert record._normal(sympy.Lt(x, 3)) != record._normal(sympy.Le(x, 2))
    assert record._normal(sympy.Le(8 * x, 4104)) != record._normal(sympy.Le(x, 513))


def test_a_bound_on_a_floor_division_compares_as_the_bound_it_is_on_the_dividend():
    """``s // 2 <= 1`` cold comes back ``s <= 3`` warm (the warm phased fuzzer, seed 1202: ``v[:v.shape[0] // 2]``
    lost its reuse at 1 in the restarted process).  The rewriting is exact over the integers: each form below
    holds at the same points as its normal form, and other bounds still differ."""
    from torch.utils._sympy.functions import FloorDiv

    s = sympy.Symbol("s77", integer=True, positive=True)
    assert record._normal(sympy.Le(FloorDiv(s, 2) - 1, 0)) == record._normal(sympy.Le(s, 3))
    assert record._normal(sympy.Ge(FloorDiv(s, 2), 3)) == record._normal(sympy.Ge(s, 6))
    assert record._normal(sympy.Lt(FloorDiv(s, 4), 3)) == record._normal(sympy.Le(s, 11))
    assert record._normal(sympy.Le(FloorDiv(s, 2), 1)) != record._normal(sympy.Le(s, 2))
    for c in (2, 3, 5):
        for k in range(1, 6):  # (k <= 0: SymPy decides some of these alone, s being positive)
            for rel in (sympy.Le, sympy.Ge, sympy.Lt, sympy.Gt):
                diff, op, _ = record._normal(rel(FloorDiv(s, c), k)).rsplit(" ", 2)
                assert op == "<=" and "//" not in diff
                expr = sympy.sympify(diff, locals={"s77": s})
                assert all(bool(expr.subs(s, v) <= 0) == bool(rel(v // c, k)) for v in range(1, 40)), (c, k, rel)


def test_a_record_cannot_name_code():
    env = RecordEnv({})
    payload = pickle.dumps(Evil())
    import hashlib

    data = record._MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    with pytest.raises(record.Dropped, match="posix.system|os.system|nt.system"):
        record.loads(data, env, frozenset())
    payload = pickle.dumps(sympy.sympify)  # a SymPy function (it evaluates text): refused too
    data = record._MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    with pytest.raises(record.Dropped, match="which no record may contain"):
        record.loads(data, env, frozenset())


def test_records_are_written_whole(tmp_path, monkeypatch):
    """save() renames a finished file into place: no temporary file is left, and a second
    writer of the same key replaces the first."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    log, ranges = question_log()
    env = RecordEnv(ranges)
    record.save(["aot:k"], log, env)
    record.save(["aot:k"], log, env)
    files = glob.glob(str(tmp_path / "verishape" / "widen" / "*" / "*"))
    assert len(files) == 1 and files[0].endswith(".rec")
    assert record.load("aot:k", env, log.candidates).questions == log.questions
    with pytest.raises(record.Dropped, match="no widening record"):
        record.load("aot:other", env, log.candidates)


def _write_many(folder, n):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    log, ranges = question_log()
    for _ in range(n):
        record.save(["aot:shared"], log, RecordEnv(ranges))


def test_two_processes_writing_one_key_never_leave_a_partial_record(tmp_path, monkeypatch):
    """Two writer processes race on one key while this process reads it: every read sees a
    whole record (or none yet), never a torn one."""
    import multiprocessing

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    log, ranges = question_log()
    import time

    ctx = multiprocessing.get_context("spawn")  # no fork of a process with torch's threads
    writers = [ctx.Process(target=_write_many, args=(str(tmp_path), 200)) for _ in range(2)]
    for w in writers:
        w.start()
    seen, deadline = 0, time.monotonic() + 240
    while any(w.is_alive() for w in writers):
        assert time.monotonic() < deadline, "the writer processes did not finish"
        try:
            assert record.load("aot:shared", RecordEnv(ranges), log.candidates).questions == log.questions
            seen += 1
        except record.Dropped as exc:
            assert "no widening record" in str(exc), exc  # not written yet: never a torn one
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    assert record.load("aot:shared", RecordEnv(ranges), log.candidates).questions == log.questions
    assert not glob.glob(str(tmp_path / "verishape" / "widen" / "*" / "*.tmp"))


def test_the_key_hook_is_torchs_own_function():
    """The seam names AOTAutograd's key function, which this torch has."""
    from verishape.core import torch_names

    module, name = torch_names.AOT_CACHE_KEY
    import importlib

    assert callable(getattr(importlib.import_module(module), name))


# ---------------------------------------------------------------------------- verdicts


def _traced(fn, *args):
    """The Dynamo graph of ``fn`` at ``args`` (automatic dynamic's first, static trace)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, dynamic=False)(*args)
    return graphs[0]


def _binding(value=1):
    from verishape.compiler.widen.binding import Binding

    s = sympy.Symbol("s0", integer=True, positive=True)
    return Binding((s,), value, {"L['x'].size()[0]": "L['x'].size()[0]"}, {}, frozenset({s}))


def test_a_verdicts_key_names_what_the_new_aot_graph_and_the_renaming_depend_on():
    """Note [A record belongs to its artifact], for verdicts: another input size, dtype or
    grad mode, another binding, another option or relaid input, another global state the
    kept compile was made under is another key."""
    from types import SimpleNamespace

    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from verishape.compiler.widen import verdict

    def env_with(guard=None):
        env = ShapeEnv()
        if guard is not None:
            env.guards.append(SimpleNamespace(expr=guard))
        return env

    state = torch._C._dynamo.guards.GlobalStateGuard().__getstate__()
    kept, env = SimpleNamespace(env=env_with(), global_state=state), env_with()
    opts = {"keep_inference_input_mutations": True}

    def key(gm=None, options=opts, binding=None, relaid=frozenset(), k=kept, e=env):
        return verdict.key(k, e, gm if gm is not None else base_gm, options, binding or _binding(), relaid)

    base_gm = _traced(broadcasts, *make(2))
    base = key()
    assert base == key()
    others = [
        key(gm=_traced(broadcasts, *make(3))),
        key(gm=_traced(broadcasts, *(a.double() for a in make(2)))),
        key(options={"keep_inference_input_mutations": False}),
        key(options={**opts, "decompositions": {torch.ops.aten.mm.default: len}}),
        key(binding=_binding(2)),
        key(relaid=frozenset({0})),
        # the facts either trace decided by (torch files entries with other guards under one key)
        key(k=SimpleNamespace(env=env_with(sympy.Symbol("s0") > 5), global_state=state)),
        key(k=SimpleNamespace(env=kept.env, global_state=state.replace('"num_threads":', '"num_threads":1'))),
        key(e=env_with(sympy.Symbol("s1") > 5)),
    ]
    with torch.enable_grad():
        grad = key()
    with torch.no_grad():
        no_grad = key()
    assert len({base, *others}) == len(others) + 1 and grad != no_grad


def test_a_verdict_is_read_back_only_by_its_own_key(tmp_path, monkeypatch):
    """Filed under each of the artifact's keys; a verdict for another trace, another
    artifact, or one edited, is a miss (the comparison then runs)."""
    from types import SimpleNamespace

    from verishape.compiler.widen import verdict

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    cold = SimpleNamespace(cache_key=None, artifact_keys=("aot:A", "fx:F"))
    verdict.remember(cold, "T", "0123abcd")
    assert verdict.lookup(SimpleNamespace(cache_key="aot:A"), "T") == "0123abcd"
    assert verdict.lookup(SimpleNamespace(cache_key="fx:F"), "T") == "0123abcd"
    assert verdict.lookup(SimpleNamespace(cache_key="aot:A"), "U") is None
    assert verdict.lookup(SimpleNamespace(cache_key="aot:B"), "T") is None
    for path in verdicts(str(tmp_path)):
        flip_last_byte(path)
    assert verdict.lookup(SimpleNamespace(cache_key="aot:A"), "T") is None


@pytest.mark.slow
def test_a_comparison_that_adds_a_fact_is_not_filed(tmp_path, monkeypatch):
    """A size-1 AOT trace that changed the new trace's env (a guard the entry then checks)
    is not remembered: a lookup would skip that guard."""
    from verishape.compiler.widen import reuse

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    calls = iter(range(1000))
    monkeypatch.setattr(reuse, "facts", lambda env: next(calls))  # every look differs
    assert sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    assert records(str(tmp_path)) and not [
        p for p in glob.glob(os.path.join(str(tmp_path), "verishape", "widen", "*", "*.rec"))
        if open(p, "rb").read(21) == b"verishape-aot-verdict"]
