"""Widening across a restart: a generic artifact served by torch's caches, reused at size 1
with the record its lowering left beside it (compiler/widen/record.py), and every way the
record can be missing or wrong giving stock behaviour with the reason.

A "warm process" is simulated in-process: Dynamo's caches and verishape's frames are dropped
(torch._dynamo.reset()), torch's on-disk caches and the records stay, in a cache folder of
the test's own (TORCHINDUCTOR_CACHE_DIR)."""

from __future__ import annotations

import glob
import os
import pathlib
import pickle
import shutil
import sys

import pytest
import sympy
import torch
from torch._dynamo.utils import counters

import verishape
from verishape.compiler import frames

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import redis_server  # noqa: E402  (benchmarks/: shared with warm_restart.py)
from verishape.compiler.widen import questions, record


def broadcasts(x, y, bias):
    return torch.relu(x + y) * bias + x.sum(1, keepdim=True)


def _make(b):
    return torch.randn(b, 6), torch.randn(b, 6), torch.randn(6)


#: the last function _sweep compiled (for verishape.explain)
_LAST: dict = {}


def _sweep(fn, sizes, make=_make):
    """Run ``fn`` compiled with verishape (Inductor, automatic dynamic) at ``sizes``, each
    call checked against eager; return (Inductor compiles, reuses at size 1, refusals)."""
    torch._dynamo.reset()
    counters.clear()
    frames._envs_by_code.clear()
    compiled = _LAST["compiled"] = verishape.compile(fn)
    torch.manual_seed(0)
    with torch.no_grad():
        for b in sizes:
            args = make(b)
            torch.testing.assert_close(compiled(*args), fn(*args))
    lowered = counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_bypass"]
    refusals = [why for env in frames.envs_for(fn.__code__) for _, why in env.verishape_log.not_widened]
    return lowered, counters["verishape"]["reused_at_size_1"], refusals


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory):
    """A cache folder after one cold process: batch 2 and 3 compiled (the generic artifact
    and its record on disk), batch 1 reused."""
    folder = str(tmp_path_factory.mktemp("cold"))
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    finally:
        torch._dynamo.reset()
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
    assert (lowered, reused) == (2, 1), refusals
    return folder


@pytest.fixture
def warm(cold_cache, tmp_path, monkeypatch):
    """A copy of the cold cache folder, in force for this test."""
    folder = str(tmp_path / "warm")
    shutil.copytree(cold_cache, folder)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", folder)
    return folder


def _records(folder, magic=b"verishape-widen-record"):
    """The widening records (or, with another ``magic``, the verdicts) in ``folder``."""
    found = [p for p in sorted(glob.glob(os.path.join(folder, "verishape", "widen", "*", "*.rec")))
             if open(p, "rb").read(len(magic)) == magic]
    assert found, f"the cold process wrote no {magic.decode()}"
    return found


def _verdicts(folder):
    return _records(folder, b"verishape-aot-verdict")


@pytest.mark.slow
def test_a_warm_process_reuses_the_cached_generic_artifact_at_batch_one(warm):
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    assert counters["aot_autograd"]["autograd_cache_hit"] == 2
    (ev,) = [ev for env in frames.envs_for(broadcasts.__code__) for ev in env.verishape_log.widened]
    assert ev.from_cache and "from the widening record" in ev.describe()


@pytest.mark.slow
def test_a_warm_process_reuses_by_looking_the_comparison_up(warm, monkeypatch):
    """The cold process filed the size-1 AOT comparison as a verdict beside the artifact
    (compiler/widen/verdict.py): the warm process reuses at 1 tracing neither AOT graph, with
    the fingerprint the cold comparison gave; where the verdicts are damaged or gone, it
    traces both again and still reuses."""
    from verishape.compiler.widen import kept, reuse

    def never(*a, **k):
        raise AssertionError("traced again where a verdict answers")

    with monkeypatch.context() as m:
        m.setattr(reuse, "_aot_inference_graph", never)
        m.setattr(kept, "_traced_again", never)
        lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    (ev,) = [ev for env in frames.envs_for(broadcasts.__code__) for ev in env.verishape_log.widened]
    looked_up = ev.aot
    for path in _verdicts(warm):
        _flip_last_byte(path)
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    (ev,) = [ev for env in frames.envs_for(broadcasts.__code__) for ev in env.verishape_log.widened]
    assert ev.aot == looked_up is not None


@pytest.mark.slow
def test_a_warm_process_reuses_a_candidate_at_a_later_batch_by_the_verdict_its_answers_filed(
        tmp_path, monkeypatch):
    """Batches 2, 1, 3: a candidate at 1, reused at 1 and, at 3, by its unguarded answers
    proved in place of an AOT trace
    (Note [A candidate's answers stand in for its AOT trace]).
    That reuse files a verdict as a comparison does: a restarted process, whose
    candidate comes from torch's cache with no answers of its AOT stage to prove, reuses at
    1 and at 3 tracing no AOT graph."""
    from verishape.compiler.widen import kept, reuse

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    lowered, reused, refusals = _sweep(broadcasts, (2, 1, 3))
    assert (lowered, reused, counters["verishape"]["aot_trace_stood_in"]) == (2, 1, 1), refusals

    def never(*a, **k):
        raise AssertionError("traced again where a verdict answers")

    monkeypatch.setattr(reuse, "_aot_inference_graph", never)
    monkeypatch.setattr(kept, "_traced_again", never)
    lowered, reused, refusals = _sweep(broadcasts, (2, 1, 3))
    assert (lowered, reused, counters["verishape"]["reused_generic"]) == (0, 1, 1), refusals
    assert counters["verishape"]["aot_trace_stood_in"] == 0  # from torch's cache: the verdict answered


@pytest.mark.slow
def test_a_retrace_that_adds_facts_spoils_the_kept_compile(warm, monkeypatch):
    """Where tracing the cached artifact's AOT graph again changes its env's facts (a guard,
    a range, a replacement the cache entry does not check), no proof uses that env: stock
    behaviour, with the reason.  (No verdict answers here: they are removed.)"""
    from verishape.compiler.widen import kept

    for path in _verdicts(warm):
        os.unlink(path)
    calls = iter(range(1000))
    monkeypatch.setattr(kept, "facts", lambda env: next(calls))  # every look differs
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (1, 0), refusals
    assert any("added a guard, range or replacement" in why for why in refusals), refusals


@pytest.mark.slow
def test_served_by_the_fx_graph_cache_alone_it_reuses_too(tmp_path, monkeypatch):
    """AOTAutograd's cache off, Inductor's on: the inference graph is traced here, its
    lowering served from the FX graph cache; the record under that cache's key supplies
    the answers."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch._functorch.config.enable_autograd_cache = False  # the conftest restores it
    assert _sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    assert counters["inductor"]["fxgraph_cache_hit"] == 2 and counters["aot_autograd"]["autograd_cache_hit"] == 0


@pytest.mark.slow
def test_the_fuzz_check_runs_a_sweep_warm():
    """verishape.fuzz.widen_check's warm mode (benchmarks/widen_fuzz.py --warm): cold, then
    served by the caches, the warm calls compared with eager."""
    from verishape.fuzz.widen_check import run_sweep

    def make(b):
        g = torch.Generator().manual_seed(b)
        return [torch.randn(b, 6, generator=g), torch.randn(b, 6, generator=g), torch.randn(6, generator=g)]

    sweep = run_sweep(broadcasts, make, [2, 3, 1], backend="inductor", warm=True)
    assert sweep.cold_reused == [False, False, True] and [c.reused for c in sweep.calls] == [False, False, True]
    assert sweep.lowered == 0 and not sweep.wrong and not sweep.other_differences


def _rewrite(path, payload_fn):
    """Write a record whose digest matches ``payload_fn(old payload)``: a record that is
    whole but says something else."""
    data = open(path, "rb").read()
    head = len(record._MAGIC)
    payload = payload_fn(data[head + record._DIGEST + 1:])
    import hashlib

    with open(path, "wb") as f:
        f.write(record._MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def _other_version(payload):
    fmt, version, torch_version, bound, log = pickle.loads(payload)
    return pickle.dumps((fmt, "0.0.1", torch_version, bound, log))


def _other_binding(payload):
    fmt, version, torch_version, (symbols, replacements, guards), log = pickle.loads(payload)
    swapped = tuple((name, sources[::-1] if len(sources) > 1 else ("L['z'].size()[0]",), vr)
                    for name, sources, vr in symbols)
    return pickle.dumps((fmt, version, torch_version, (swapped, replacements, guards), log))


def _other_guards(payload):
    fmt, version, torch_version, (symbols, replacements, guards), log = pickle.loads(payload)
    return pickle.dumps((fmt, version, torch_version, (symbols, replacements, (*guards, "Eq(Mod(s0, 8), 0)")), log))


class _Evil:
    def __reduce__(self):
        return (os.system, ("true",))


FAULTS = {
    "missing": (lambda p: os.unlink(p), "no widening record"),
    "edited": (lambda p: _flip_last_byte(p), "does not match its digest"),
    "another version": (lambda p: _rewrite(p, _other_version), "written by verishape 0.0.1"),
    "other inputs": (lambda p: _rewrite(p, _other_binding), "bound to other inputs"),
    "other guards": (lambda p: _rewrite(p, _other_guards), "its facts (ranges, guards) differ"),
    "code in it": (lambda p: _rewrite(p, lambda _: pickle.dumps(_Evil())), "which no record may contain"),
}


def _flip_last_byte(path):
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    open(path, "wb").write(bytes(data))


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_record_that_does_not_belong_gives_stock_behaviour_with_the_reason(warm, fault):
    damage, reason = FAULTS[fault]
    for path in _records(warm):
        damage(path)
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (1, 0), refusals  # batch 1 compiles, as stock compiles it
    assert any(reason in why and "torch's cache" in why for why in refusals), refusals
    (line,) = [line for line in verishape.explain(_LAST["compiled"]).splitlines() if reason in line]
    assert "not widened: the generic artifact came from torch's cache" in line  # one line, in explain


# ---------------------------------------------------------------------------- mega-cache and remote cache


@pytest.mark.slow
def test_saved_artifacts_loaded_in_another_cache_folder_carry_the_record(tmp_path, monkeypatch):
    """torch.compiler.save_cache_artifacts() in one process, load_cache_artifacts() in a
    fresh cache folder: the record travels in the blob, batch 1 reuses."""
    from torch.compiler._cache import CacheArtifactManager

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "first"))
    CacheArtifactManager.clear()
    assert _sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    blob, info = torch.compiler.save_cache_artifacts()
    assert info.verishape_widen_artifacts and info.aot_autograd_artifacts  # one per key of the artifact
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "second"))
    torch.compiler.load_cache_artifacts(blob)
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals


@pytest.fixture
def redis_port(tmp_path):
    """A real Redis server on a free localhost port, for this test only."""
    with redis_server.started(str(tmp_path)) as port:
        yield port


def _remote_on(monkeypatch, port):
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_PORT", str(port))
    torch._inductor.config.fx_graph_remote_cache = True  # the conftest restores torch's configs
    torch._functorch.config.enable_remote_autograd_cache = True


@pytest.mark.slow
def test_a_second_machine_reads_artifact_and_record_from_redis(redis_port, tmp_path, monkeypatch):
    """Two cache folders sharing one Redis (two machines of a fleet): the second is served
    the generic artifact and its record remotely, and reuses it at batch 1."""
    _remote_on(monkeypatch, redis_port)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "first"))
    assert _sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "second"))
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (0, 1), refusals
    assert glob.glob(str(tmp_path / "second" / "verishape" / "widen" / "*" / "*.rec"))  # kept locally too


@pytest.mark.slow
def test_redis_down_gives_stock_behaviour(tmp_path, monkeypatch):
    """Torch's remote cache on, nothing listening: every compile runs locally as stock's
    does, batch 1 still reuses the generic artifact compiled in this process."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    _remote_on(monkeypatch, port)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    lowered, reused, refusals = _sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (2, 1), refusals
    assert any("Redis" in why and "not written" in why for why in refusals), refusals


def test_remote_cache_on_without_the_redis_package_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "redis", None)  # "import redis" raises ImportError
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch._functorch.config.enable_remote_autograd_cache = True
    log, ranges = _log()
    (why,) = record.save(["aot:k"], log, _Env(ranges))  # the local copy is written all the same
    assert "redis package is not installed" in why
    assert record.load("aot:k", _Env(ranges), log.candidates).questions == log.questions
    with pytest.raises(record.Dropped, match="redis package is not installed"):
        record._remote_get("0" * 64)


def test_a_slow_redis_costs_a_bounded_wait(monkeypatch):
    """A server that accepts and never answers: reading a record gives up after the
    remote timeout, with the reason, instead of hanging the compile."""
    import socket
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_PORT", str(server.getsockname()[1]))
    monkeypatch.setattr(record, "REMOTE_TIMEOUT_S", 0.3)
    torch._functorch.config.enable_remote_autograd_cache = True
    try:
        start = time.perf_counter()
        with pytest.raises(record.Dropped, match="did not give the widening record.*Timeout"):
            record._remote_get("0" * 64)
        assert time.perf_counter() - start < 3
    finally:
        server.close()


# ---------------------------------------------------------------------------- the record itself (fast)


class _Env:
    """What a record reads of a shape env: its symbols, their sources and ranges."""

    def __init__(self, ranges):
        from torch._dynamo.source import LocalSource, TensorProperty, TensorPropertySource
        from torch.utils._sympy.value_ranges import ValueRanges

        self.var_to_range = {s: ValueRanges(lo, hi) for s, (lo, hi) in ranges.items()}
        self.var_to_sources = {s: [TensorPropertySource(LocalSource(f"x{i}"), TensorProperty.SIZE, 0)]
                               for i, s in enumerate(ranges)}
        self.replacements = {}
        self.guards = []


def _log():
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    s1 = sympy.Symbol("s1", integer=True, positive=True)
    log = questions.QuestionLog(frozenset({s0}))
    log.questions.append(questions.Question(sympy.Gt(s0, 1), sympy.true, (), (), ("pick_tiling", "lower"),
                                            (s0, s1), None, "true"))
    log.heuristic_hints["decide_parallel_depth"] = 3
    log.sizes.add(s0 * s1, "size", "buf0")
    return log, {s0: (2, 4096), s1: (2, sympy.oo)}


def test_a_record_round_trips_the_question_log():
    log, ranges = _log()
    env = _Env(ranges)
    back = record.loads(record.dumps(log, env), env, log.candidates)
    assert back.questions == log.questions and back.heuristic_hints == log.heuristic_hints
    assert back.sizes.entries == log.sizes.entries and back.candidates == log.candidates


def test_an_extern_kernel_call_is_recorded_by_its_operators_name():
    """A question asked inside an extern kernel's fake run keeps that run (to rerun it at 1):
    the kernel travels as ``aten.mm.default`` and comes back as the operator itself; a kernel
    that is not an operator makes the log unrecordable (the record is not written)."""
    from torch.utils import _pytree as pytree

    from verishape.compiler.widen.kernel_call import KernelCall

    log, ranges = _log()
    s0 = next(iter(log.candidates))
    flat, spec = pytree.tree_flatten({"args": (torch.ones(2, 3), torch.ones(3, 4)), "kwargs": {}})
    call = KernelCall(torch.ops.aten.mm.default, [("tensor", (s0, 3), (3, 1), torch.float32, torch.device("cpu")),
                                                  ("tensor", (3, 4), (4, 1), torch.float32, torch.device("cpu"))],
                      spec, outputs=[("tensor", (s0, 4), (4, 1), torch.float32, torch.device("cpu"))], done=True)
    log.questions.append(questions.Question(sympy.Eq(s0, 1), sympy.false, (), (), ("process_kernel",),
                                            computed_in=call))
    env = _Env(ranges)
    back = record.loads(record.dumps(log, env), env, log.candidates).questions[-1].computed_in
    assert back.kernel is torch.ops.aten.mm.default and back.spec == spec and back.outputs == call.outputs
    assert back.right_at({s0: sympy.Integer(1)})
    call.kernel = lambda a, b: a @ b
    with pytest.raises(record.Unrecordable, match="not an operator"):
        record.dumps(log, env)


def test_a_record_is_checked_against_the_live_trace():
    log, ranges = _log()
    data = record.dumps(log, _Env(ranges))
    s0 = next(iter(log.candidates))
    narrower = {**ranges, s0: (2, 64)}
    with pytest.raises(record.Dropped, match="bound to other inputs"):
        record.loads(data, _Env(narrower), log.candidates)
    with pytest.raises(record.Dropped, match="other sizes"):
        record.loads(data, _Env(ranges), frozenset())
    with pytest.raises(record.Dropped, match="digest"):
        record.loads(data[:-1], _Env(ranges), log.candidates)  # truncated
    with pytest.raises(record.Dropped, match="is not one"):
        record.loads(b"\x00" * 10, _Env(ranges), log.candidates)


def test_guards_compare_in_a_form_that_does_not_depend_on_how_they_were_written():
    """torch re-installs a cached entry's guards from their printed form (Eq(s - 1, 1) comes
    back as Eq(s, 2)): the record compares them normalized, and different facts still differ."""
    s = sympy.Symbol("s17", integer=True, positive=True)
    assert record._normal(sympy.Eq(s - 1, 1)) == record._normal(sympy.Eq(s, 2)) == record._normal(sympy.Eq(2, s))
    assert record._normal(sympy.Ge(s, 2)) == record._normal(sympy.Le(2, s))
    assert record._normal(sympy.Gt(s, 2)) != record._normal(sympy.Ge(s, 2))
    assert record._normal(sympy.Eq(s, 3)) != record._normal(sympy.Eq(s, 2))


def test_a_record_cannot_name_code():
    env = _Env({})
    payload = pickle.dumps(_Evil())
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
    log, ranges = _log()
    env = _Env(ranges)
    record.save(["aot:k"], log, env)
    record.save(["aot:k"], log, env)
    files = glob.glob(str(tmp_path / "verishape" / "widen" / "*" / "*"))
    assert len(files) == 1 and files[0].endswith(".rec")
    assert record.load("aot:k", env, log.candidates).questions == log.questions
    with pytest.raises(record.Dropped, match="no widening record"):
        record.load("aot:other", env, log.candidates)


def _write_many(folder, n):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    log, ranges = _log()
    for _ in range(n):
        record.save(["aot:shared"], log, _Env(ranges))


def test_two_processes_writing_one_key_never_leave_a_partial_record(tmp_path, monkeypatch):
    """Two writer processes race on one key while this process reads it: every read sees a
    whole record (or none yet), never a torn one."""
    import multiprocessing

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    log, ranges = _log()
    import time

    ctx = multiprocessing.get_context("spawn")  # no fork of a process with torch's threads
    writers = [ctx.Process(target=_write_many, args=(str(tmp_path), 200)) for _ in range(2)]
    for w in writers:
        w.start()
    seen, deadline = 0, time.monotonic() + 240
    while any(w.is_alive() for w in writers):
        assert time.monotonic() < deadline, "the writer processes did not finish"
        try:
            assert record.load("aot:shared", _Env(ranges), log.candidates).questions == log.questions
            seen += 1
        except record.Dropped as exc:
            assert "no widening record" in str(exc), exc  # not written yet: never a torn one
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    assert record.load("aot:shared", _Env(ranges), log.candidates).questions == log.questions
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

    base_gm = _traced(broadcasts, *_make(2))
    base = key()
    assert base == key()
    others = [
        key(gm=_traced(broadcasts, *_make(3))),
        key(gm=_traced(broadcasts, *(a.double() for a in _make(2)))),
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
    for path in _verdicts(str(tmp_path)):
        _flip_last_byte(path)
    assert verdict.lookup(SimpleNamespace(cache_key="aot:A"), "T") is None


@pytest.mark.slow
def test_a_comparison_that_adds_a_fact_is_not_filed(tmp_path, monkeypatch):
    """A size-1 AOT trace that changed the new trace's env (a guard the entry then checks)
    is not remembered: a lookup would skip that guard."""
    from verishape.compiler.widen import reuse

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    calls = iter(range(1000))
    monkeypatch.setattr(reuse, "facts", lambda env: next(calls))  # every look differs
    assert _sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    assert _records(str(tmp_path)) and not [
        p for p in glob.glob(os.path.join(str(tmp_path), "verishape", "widen", "*", "*.rec"))
        if open(p, "rb").read(21) == b"verishape-aot-verdict"]
