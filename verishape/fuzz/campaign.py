"""Fuzz many ops: in parallel across processes, resumable, with a progress line.

Each op is fuzzed independently (its own derived seed), so the set of ops, the seed and the
example budget decide every result, and ``jobs`` only changes the wall time.  Finished ops
are appended to a JSON-lines progress file as they complete; a rerun with the same file
skips them, so a campaign killed halfway loses at most the ops in flight.
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

from .fuzzer import FuzzConfig, fuzz_target
from .ops import by_full_name
from .report import build_report


def _init_worker(imports: Sequence[str]) -> None:
    import torch

    torch.set_num_threads(1)
    by_full_name([], imports)   # import op_db and the user's modules once per worker


def fuzz_one(full_name: str, cfg: FuzzConfig, imports: Sequence[str]) -> dict[str, Any]:
    """Fuzz one op by full name.  A crash of the fuzzer itself on one op is recorded with
    its traceback (status ``crash``) rather than losing the whole campaign."""
    (target,) = by_full_name([full_name], imports)
    try:
        return fuzz_target(target, cfg)
    except Exception as exc:  # noqa: BLE001 - reported in full, per op, never swallowed
        return {"op": target.name, "variant": target.variant, "status": f"crash: {type(exc).__name__}",
                "seeds": 0, "examples": 0, "findings": 0, "notes": {}, "finding_records": [],
                "traceback": traceback.format_exc(limit=8)}


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
        done[name] = {"op": name, "variant": "", "status": "crash: process died", "seeds": 0,
                      "examples": 0, "findings": 0, "notes": {}, "finding_records": []}
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
                 progress_file: str | None = None, stream: TextIO | None = sys.stderr) -> dict[str, Any]:
    """Fuzz ``full_names`` and return the merged report."""
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
        if jobs <= 1:
            for name in todo:
                if sink is not None:
                    sink.write(json.dumps({"full_name": name, "started": True}) + "\n")
                    sink.flush()
                record(name, fuzz_one(name, cfg, imports))
        else:
            ctx = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker,
                                                        initargs=(tuple(imports),)) as pool:
                futures = {pool.submit(fuzz_one, name, cfg, tuple(imports)): name for name in todo}
                for fut in concurrent.futures.as_completed(futures):
                    record(futures[fut], fut.result())
    finally:
        if sink is not None:
            sink.close()
    report = build_report(results[n] for n in full_names if n in results)
    report["summary"]["time_s"] = round(sum(r.get("time_s", 0.0) for r in results.values()), 1)
    report["summary"]["config"] = {"max_examples": cfg.max_examples, "seed": cfg.seed, "modes": list(cfg.modes),
                                   "time_budget_s": cfg.time_budget_s}
    return report
