"""Fresh Z3 contexts, made ahead of need.

Every check runs in its own ``z3.Context`` so that its answer depends on the query and
the limits alone, never on the queries asked before it (see :mod:`verishape.solvers.prover`).
Making a context costs a few milliseconds of C++ set-up, which would double the cost of
a typical guard query.  A daemon thread keeps a small stock of contexts ready; ctypes
releases the GIL while Z3 builds one, so the work overlaps with the compiler's Python.
When the stock is empty (a burst of queries, or a forked child whose thread did not
survive the fork), the caller simply makes its own.
"""

from __future__ import annotations

import os
import queue
import threading

import z3


class ContextSupply:
    """Hands out never-used Z3 contexts; each one is for exactly one check."""

    def __init__(self, depth: int = 4) -> None:
        self._depth = depth
        self._lock = threading.Lock()
        self._pid = -1
        self._stock: queue.Queue[z3.Context] = queue.Queue(maxsize=depth)
        self._wanted = threading.Event()

    def take(self) -> z3.Context:
        self._ensure_producer()
        try:
            ctx = self._stock.get_nowait()
        except queue.Empty:
            ctx = z3.Context()
        self._wanted.set()
        return ctx

    def _ensure_producer(self) -> None:
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            # A new process (first use, or a fork): contexts made by the parent's
            # thread are never shared with the child, start over.
            self._stock = queue.Queue(maxsize=self._depth)
            self._wanted = threading.Event()
            self._wanted.set()
            thread = threading.Thread(target=self._produce, args=(self._stock, self._wanted),
                                      name="verishape-z3-contexts", daemon=True)
            thread.start()
            self._pid = os.getpid()

    @staticmethod
    def _produce(stock: queue.Queue[z3.Context], wanted: threading.Event) -> None:
        while True:
            wanted.wait()
            wanted.clear()
            while not stock.full():
                stock.put(z3.Context())


_supply = ContextSupply()


def fresh_context() -> z3.Context:
    """A Z3 context no term has ever been created in."""
    return _supply.take()
