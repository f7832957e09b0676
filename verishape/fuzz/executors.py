"""Where a campaign's ops run: local worker processes or Ray tasks, behind one interface.

Why an interface: every op is fuzzed on its own with a seed derived from the base seed and
the op's name (:func:`verishape.fuzz.fuzzer.fuzz_target`), so *where* it runs cannot change
its result.  The campaign (:mod:`verishape.fuzz.campaign`) therefore only needs "run these
ops, hand me each result as it arrives"; it writes the progress file and draws the progress
line itself, in the driver, whatever the executor.

``local``: a pool of spawned processes on this machine.  ``ray``: one Ray task per op, on
a local Ray started here (and shut down afterwards) or on an existing cluster
(``address``).  A worker (local process or Ray worker) that dies on an op (segfault,
abort, out of memory) is that op's crash, not the end of the campaign; it is not retried,
because a retry would crash again.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import socket
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from verishape.core.errors import UsageError

if TYPE_CHECKING:   # the fuzzer imports torch and hypothesis: not for ``--help`` and usage checks
    from .fuzzer import FuzzConfig

#: The install hint in every "ray is missing" message.
RAY_HINT = "pip install 'verishape[ray]'"

Result = dict[str, Any]


class Executor(Protocol):
    """Runs ops, yielding ``(full_name, result)`` in completion order."""

    def results(self, names: Sequence[str], cfg: FuzzConfig, imports: Sequence[str]) -> Iterator[tuple[str, Result]]:
        ...


def crash_result(name: str, status: str = "crash: process died") -> Result:
    """The per-op record of an op whose process died under it (same shape as a fuzzed op's)."""
    return {"op": name, "variant": "", "status": status, "seeds": 0, "examples": 0, "findings": 0,
            "notes": {}, "finding_records": []}


# ---------------------------------------------------------------------- worker side


def fuzz_one(full_name: str, cfg: FuzzConfig, imports: Sequence[str]) -> Result:
    """Fuzz one op by full name.  A crash of the fuzzer itself on one op is recorded with
    its traceback (status ``crash``) rather than losing the whole campaign."""
    from .fuzzer import fuzz_target
    from .ops import by_full_name

    (target,) = by_full_name([full_name], imports)
    try:
        return fuzz_target(target, cfg)
    except Exception as exc:  # noqa: BLE001 - reported in full, per op, never swallowed
        return {"op": target.name, "variant": target.variant, "status": f"crash: {type(exc).__name__}",
                "seeds": 0, "examples": 0, "findings": 0, "notes": {}, "finding_records": [],
                "traceback": traceback.format_exc(limit=8)}

_prepared: tuple[tuple[str, ...], tuple[str, ...]] | None = None


def prepare_worker(imports: Sequence[str], path_entries: Sequence[str] = ()) -> None:
    """Once per worker process: one torch thread (the workers share the cores), the
    driver's import folders first on ``sys.path`` (so ``--import`` finds modules of the
    current folder, like ``python -m``), then op_db and the user's modules."""
    global _prepared
    key = (tuple(imports), tuple(path_entries))
    if _prepared == key:
        return
    import torch

    from .ops import by_full_name

    torch.set_num_threads(1)
    for entry in reversed(path_entries):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    by_full_name([], imports)
    _prepared = key


def _fuzz_in_worker(name: str, cfg: FuzzConfig, imports: Sequence[str], path_entries: Sequence[str]) -> Result:
    prepare_worker(imports, path_entries)
    return fuzz_one(name, cfg, imports)


def _fuzz_in_ray_task(name: str, cfg: FuzzConfig, imports: Sequence[str], path_entries: Sequence[str]) -> Result:
    """:func:`_fuzz_in_worker`, then the proof store's counters and ``runs`` row written:
    Ray kills its workers at shutdown without running ``atexit``, where a local worker
    process would write them."""
    from verishape.proofs.store import close_process_store

    try:
        return _fuzz_in_worker(name, cfg, imports, path_entries)
    finally:
        close_process_store()


def _driver_path_entries() -> tuple[str, ...]:
    """The folders the driver added for ``--import`` (the current folder): a worker's own
    ``sys.path`` lacks them when it was not started from the driver's folder."""
    cwd = os.getcwd()
    return (cwd,) if cwd in sys.path or "" in sys.path else ()


# ---------------------------------------------------------------------- local processes


class LocalExecutor:
    """``jobs`` spawned processes on this machine (spawn, not fork: torch and threads), each
    given one op at a time over its own pipe.  The driver knows which op each worker runs,
    so a worker that dies (segfault, abort in an eager kernel) is that op's crash, as under
    Ray: the worker is replaced and every other op still runs.  A process pool cannot do
    this: one dead worker breaks the whole pool."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def results(self, names: Sequence[str], cfg: FuzzConfig, imports: Sequence[str]) -> Iterator[tuple[str, Result]]:
        ctx = multiprocessing.get_context("spawn")
        setup = (cfg, tuple(imports), _driver_path_entries())
        queue = list(names)
        workers = [_Worker(ctx, setup) for _ in range(min(self.jobs, len(queue)))]
        try:
            while workers:
                ready = multiprocessing.connection.wait([w.conn for w in workers])
                for worker in [w for w in workers if w.conn in ready]:
                    done = worker.receive()
                    if done is not None:
                        yield done
                    if worker.alive:
                        worker.give(queue.pop(0) if queue else None)
                    if not worker.alive or worker.op is None:
                        worker.close()
                        workers.remove(worker)
                        if worker.died and queue:
                            workers.append(_Worker(ctx, setup))
        finally:
            for worker in workers:
                worker.close()


class _Worker:
    """One local worker process and the op it runs (None: setting up, or idle)."""

    def __init__(self, ctx: Any, setup: tuple[Any, ...]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_local_worker_main, args=(child, *setup), daemon=True)
        self.process.start()
        child.close()   # only the worker holds its end now: its death is EOF here
        self.op: str | None = None
        self.alive, self.died = True, False

    def give(self, op: str | None) -> None:
        """The next op, or None: no more work (the worker exits)."""
        self.op = op
        self.conn.send(op)
        if op is None:
            self.alive = False

    def receive(self) -> tuple[str, Result] | None:
        """The finished ``(op, result)``, if the message is one; a dead worker's op is its crash."""
        try:
            kind, payload = self.conn.recv()
        except EOFError:
            self.alive, self.died = False, True
            self.process.join()
            if self.op is None:
                raise RuntimeError(f"internal error (a bug): a fuzz worker died while setting up "
                                   f"(exit code {self.process.exitcode})") from None
            return self.op, crash_result(self.op)
        if kind == "setup_error":
            raise UsageError(f"a worker process cannot set up: {payload} (are the --import modules "
                             "importable from the current folder?)")
        if kind == "bug":
            raise RuntimeError(f"internal error (a bug) in a fuzz worker on {self.op}:\n{payload}")
        if kind == "ready":
            return None
        assert kind == "result" and self.op is not None, kind
        return self.op, payload

    def close(self) -> None:
        """Wait briefly for a worker told to stop; end one not told to stop (the
        campaign was interrupted or failed)."""
        if self.alive:
            self.process.terminate()
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _local_worker_main(conn: Any, cfg: FuzzConfig, imports: Sequence[str], path_entries: Sequence[str]) -> None:
    """A local worker: set up once, then fuzz the ops the driver sends until it sends None.
    The user's setup failing is said to the driver as such; anything else this raises
    outside :func:`fuzz_one`'s per-op record is a bug, sent with its traceback."""
    from .ops import UnknownOp

    try:
        prepare_worker(imports, path_entries)
    except (ImportError, UnknownOp) as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        conn.send(("setup_error", f"{type(exc).__name__}: {first}"))
        return
    conn.send(("ready", None))
    while (name := conn.recv()) is not None:
        try:
            result = fuzz_one(name, cfg, imports)
        except Exception:  # noqa: BLE001 - forwarded with its traceback and raised in the driver
            conn.send(("bug", traceback.format_exc(limit=8)))
            return
        conn.send(("result", result))


# ---------------------------------------------------------------------- Ray


def import_ray() -> Any:
    """``ray``, or a one-line usage error that names the fix."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise UsageError(f"--executor ray needs Ray, which is not installed: {RAY_HINT}") from None


def _check_reachable(address: str) -> None:
    """A quick TCP check of ``HOST:PORT``: Ray itself retries an unreachable address for
    a long time and logs each attempt; the user gets one line at once instead."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UsageError(f"--ray-address must be HOST:PORT, ray://HOST:PORT or auto, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise UsageError(f"--ray-address {address}: cannot reach a Ray cluster there "
                         f"({exc.strerror or type(exc).__name__})") from None


class RayExecutor:
    """One Ray task per op.  ``jobs``: at most that many ops at once (and, for a local
    Ray started here, that many CPUs); None: as many as the cluster has CPUs."""

    def __init__(self, jobs: int | None, address: str | None) -> None:
        self.jobs, self.address = jobs, address
        self.ray = import_ray()

    @contextlib.contextmanager
    def _session(self) -> Iterator[Any]:
        ray = self.ray
        if ray.is_initialized():   # the caller runs Ray already (a notebook, a test): use it
            yield ray
            return
        options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR,
                                   "include_dashboard": False}
        if self.address is not None:
            _check_reachable(self.address)
            options["address"] = self.address
        else:
            options["num_cpus"] = self.jobs
        try:
            ray.init(**options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            where = f"--ray-address {self.address}" if self.address else "a local Ray"
            raise UsageError(f"{where}: cannot start or join Ray: {first}") from None
        try:
            yield ray
        finally:
            ray.shutdown()

    def results(self, names: Sequence[str], cfg: FuzzConfig, imports: Sequence[str]) -> Iterator[tuple[str, Result]]:
        with self._session() as ray:
            task = ray.remote(num_cpus=1, max_retries=0)(_fuzz_in_ray_task)
            paths = _driver_path_entries()
            queue = list(names)
            limit = self.jobs or len(queue)
            pending: dict[Any, str] = {}
            while queue or pending:
                while queue and len(pending) < limit:
                    name = queue.pop(0)
                    pending[task.remote(name, cfg, tuple(imports), paths)] = name
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                name = pending.pop(ref)
                yield name, self._get(ref, name)

    def _get(self, ref: Any, name: str) -> Result:
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except (exceptions.WorkerCrashedError, exceptions.OutOfMemoryError, exceptions.NodeDiedError):
            return crash_result(name)
        except exceptions.RayTaskError as exc:
            _raise_setup_error(exc, name)
            raise


def _raise_setup_error(exc: Any, name: str) -> None:
    """A worker that cannot import the ``--import`` modules or find the op runs on a node
    set up differently from the driver's: the user's setup to fix, said in one line.
    Anything else a task raised is left to propagate (a bug, with its traceback)."""
    from .ops import UnknownOp

    cause = getattr(exc, "cause", None)
    if isinstance(cause, (ImportError, UnknownOp)):
        first = (str(cause).strip().splitlines() or [""])[0]
        raise UsageError(f"a Ray worker cannot fuzz {name}: {type(cause).__name__}: {first} (every node needs "
                         "the same torch, verishape and --import modules, importable by the same names)") from None


def make_executor(kind: str, jobs: int | None, address: str | None = None) -> Executor | None:
    """The executor for ``--executor kind``; None: run in this process, one op at a time."""
    if kind == "ray":
        return RayExecutor(jobs, address)
    if kind != "local":
        raise ValueError(f"unknown executor {kind!r}")
    return LocalExecutor(jobs) if jobs is not None and jobs > 1 else None
