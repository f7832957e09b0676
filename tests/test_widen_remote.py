"""Widening across machines: the record beside an artifact torch's remote cache (Redis)
serves, read by a second cache folder, and a remote cache that is down, absent or slow giving
stock behaviour with the reason (compiler/widen/record.py)."""

from __future__ import annotations

import glob
import pathlib
import sys

import pytest
import torch

from verishape.compiler.widen import record
from widen_warm_helpers import RecordEnv, broadcasts, question_log, sweep

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import redis_server  # noqa: E402  (benchmarks/: shared with warm_restart.py)


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
    assert sweep(broadcasts, (2, 3, 1))[:2] == (2, 1)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "second"))
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
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
    lowered, reused, refusals = sweep(broadcasts, (2, 3, 1))
    assert (lowered, reused) == (2, 1), refusals
    assert any("Redis" in why and "not written" in why for why in refusals), refusals


def test_remote_cache_on_without_the_redis_package_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "redis", None)  # "import redis" raises ImportError
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch._functorch.config.enable_remote_autograd_cache = True
    log, ranges = question_log()
    (why,) = record.save(["aot:k"], log, RecordEnv(ranges))  # the local copy is written all the same
    assert "redis package is not installed" in why
    assert record.load("aot:k", RecordEnv(ranges), log.candidates).questions == log.questions
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
