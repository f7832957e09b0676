"""Fuzz many ops: in parallel across processes, resumable, with a progress line.

Each op is fuzzed independently (its own derived seed), so the set of ops, the seed and the
example budget decide every result, and ``jobs`` or the executor (local processes or Ray
tasks, :mod:`verishape.fuzz.executors`) only changes the wall time.  Finished ops
are appended to a JSON-lines progress file as they complete; a rerun with the same file
skips them, so a campaign killed halfway loses at most the ops in flight.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .executors import Executor, LocalExecutor, crash_result, fuzz_one
from .fuzzer import FuzzConfig
from .report import build_report


def _load_progress(path: str | None) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    started: set[str] = set()
    if path and os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue   # a line cut short by a kill: that op is simply redone
                if "result" in rec:
                    started.discard(rec["full_name"])
                    done[rec["full_name"]] = rec["result"]
                else:
                    started.add(rec["full_name"])
    for name in started:
        # Started in a sequential run and never finished: the op killed the process
        # (segfault, abort, out of memory).  Record it instead of dying on it again.
        done[name] = crash_result(name)
    return done


class _Progress:
    """One status line: redrawn in place on a terminal, one line per op otherwise."""

    def __init__(self, total: int, stream: TextIO | None) -> None:
        self.total, self.stream, self.done, self.findings = total, stream, 0, 0
        self.start = time.monotonic()
        self.tty = bool(stream is not None and stream.isatty())

    def update(self, name: str, result: dict[str, Any]) -> None:
        self.done += 1
        self.findings += result.get("findings", 0)
        if self.stream is None:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        line = (f"[{bar}] {self.done}/{self.total} findings={self.findings} "
                f"elapsed={elapsed:.0f}s eta={eta:.0f}s {name}")
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def run_campaign(full_names: Sequence[str], cfg: FuzzConfig, *, jobs: int = 1, imports: Sequence[str] = (),
                 progress_file: str | None = None, stream: TextIO | None = sys.stderr,
                 executor: Executor | None = None, known: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Fuzz ``full_names`` and return the merged report.  ``executor`` runs the ops
    elsewhere (Ray tasks, worker processes); None: ``jobs`` local processes, or this
    process when ``jobs`` is 1.  The progress file and line are written here, in the
    driver, as results arrive, whichever runs the ops."""
    done = _load_progress(progress_file)
    todo = [n for n in full_names if n not in done]
    results = {n: done[n] for n in full_names if n in done}
    bar = _Progress(len(todo), stream)
    sink = open(progress_file, "a") if progress_file else None

    def record(name: str, result: dict[str, Any]) -> None:
        results[name] = result
        if sink is not None:
            sink.write(json.dumps({"full_name": name, "result": result}) + "\n")
            sink.flush()
        bar.update(name, result)

    try:
        if executor is None and jobs > 1:
            executor = LocalExecutor(jobs)
        if executor is None:
            for name in todo:
                if sink is not None:
                    sink.write(json.dumps({"full_name": name, "started": True}) + "\n")
                    sink.flush()
                record(name, fuzz_one(name, cfg, imports))
        elif todo:
            for name, result in executor.results(todo, cfg, tuple(imports)):
                record(name, result)
    finally:
        if sink is not None:
            sink.close()
    report = build_report((results[n] for n in full_names if n in results), known)
    report["summary"]["time_s"] = round(sum(r.get("time_s", 0.0) for r in results.values()), 1)
    report["summary"]["config"] = {"max_examples": cfg.max_examples, "seed": cfg.seed, "modes": list(cfg.modes),
                                   "time_budget_s": cfg.time_budget_s,
                                   "python_dispatcher": "backed: drawn per example (recorded per finding, with a "
                                                        "retry under it when a trace fails without it); unbacked: on",
                                   "duck_shape": False, "known_issues": len(known)}
    return report
