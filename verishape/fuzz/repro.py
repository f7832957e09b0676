"""Standalone repro files for ``fuzz-meta`` findings: a bug report a user can paste upstream.

A repro imports only torch (and the user's ``--import`` modules that register custom ops),
builds the input tensors explicitly, runs the call in eager and under the fake/symbolic (or
compiled) mode that shows the difference, prints both sides and the difference in words, and
exits 1 while the difference is there (0, "does not reproduce", once it is fixed).

It is generated from a finding's JSON record alone, so repros can be written for a saved
campaign report later (:func:`write_repros`).  A file is written only after it reproduced in
a fresh Python process: a candidate that does not (a point that only the fuzzer's own trace
reaches, say) is tried in its next, longer form, and reported when none works.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import torch

from .repro_source import FAMILIES, MARKER, ReproBug, plans, render

DEFAULT_TIMEOUT_S = 180.0


def file_name(record: dict[str, Any]) -> str:
    """Deterministic: op, variant, mode and kind, which identify a finding in a report."""
    full = f"{record['op']}.{record['variant']}" if record.get("variant") else record["op"]
    stem = re.sub(r"[^A-Za-z0-9]+", "_", full).strip("_")
    return f"{stem}-{record['mode']}-{record['kind']}.py"


def resolve_fn(fn_source: str, import_lines: Sequence[str]) -> Any:
    """The callable of a finding, as the fuzzer got it (modules imported as ``python -m`` would)."""
    cwd = os.getcwd()
    if sys.path[:1] not in ([cwd], [""]):
        sys.path.insert(0, cwd)
    namespace: dict[str, Any] = {"torch": torch}
    for line in import_lines:
        exec(line, namespace)  # noqa: S102 - import lines recorded by the fuzzer
    return eval(fn_source, namespace)


def public_expr(fn: Any) -> str | None:
    """A short public name for an OpInfo's callable (``torch.index_select``), so the repro does
    not import torch's test suite; None when there is none (a lambda, a private helper)."""
    name = getattr(fn, "__name__", None)
    if not name or name == "<lambda>":
        return None
    owner = getattr(fn, "__objclass__", None)
    if owner is not None and getattr(torch.Tensor, name, None) is not None and \
            getattr(torch._C.TensorBase, name, None) is fn:
        return f"torch.Tensor.{name}"
    for module in ("torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special",
                   getattr(fn, "__module__", None) or ""):
        if not module.startswith("torch") or "._" in module or "testing" in module:
            continue
        for qual in (name, getattr(fn, "__qualname__", name)):
            if "<" in qual or qual.startswith("_"):
                continue
            try:
                obj: Any = importlib.import_module(module)
                for part in qual.split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError):
                continue
            if obj is fn:
                return f"{module}.{qual}"
    return None


# ----------------------------------------------------------------------------- checking, writing


def check_file(path: str, cwd: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[bool, str]:
    """Run ``path`` in a fresh Python process: (reproduces, why not or the difference)."""
    try:
        out = subprocess.run([sys.executable, path], check=False, capture_output=True, text=True, cwd=cwd, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout_s:.0f} s"
    lines = out.stdout.strip().splitlines()
    if out.returncode == 1 and lines and lines[-1].startswith(MARKER):
        return True, lines[-1][len(MARKER):].strip()
    tail = (out.stderr.strip().splitlines() or lines or [""])[-1]
    return False, f"exit {out.returncode}: {tail[:300]}"


OP_DB_MODULE = "torch.testing._internal.common_methods_invocations"


def _fn_source_of(record: dict[str, Any]) -> str:
    """How the fuzzer names the callable (``ops.py``), for reports saved before records
    carried ``fn_source``: a custom op ``ns::name`` or an OpInfo entry."""
    op, variant = record["op"], record.get("variant", "")
    if "::" in op:
        ns, _, name = op.partition("::")
        return f"torch.ops.{ns}.{name.split('.')[0]}.default"
    return f"next(o for o in op_db if o.name == {op!r} and o.variant_test_name == {variant!r}).op"


def _fn_expr(record: dict[str, Any], import_lines: list[str]) -> tuple[str, list[str]]:
    """A short public expression for the callable where one exists (no test-suite import)."""
    source = record.get("fn_source") or _fn_source_of(record)
    if "op_db" in source and not any("op_db" in line for line in import_lines):
        import_lines = [*import_lines, f"from {OP_DB_MODULE} import op_db"]
    if "op_db" not in source:
        return source, import_lines
    expr = public_expr(resolve_fn(source, import_lines))
    if expr is None:
        return source, import_lines
    return expr, [line for line in import_lines if "op_db" not in line]


def write_repro(record: dict[str, Any], directory: str, meta: dict[str, Any], imports: Sequence[str] = (),
                cwd: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[str | None, str]:
    """Write the first candidate that reproduces; (path or None, the difference or why not)."""
    lines = list(record.get("imports") or ())
    lines += [f"import {m}" for m in imports if f"import {m}" not in lines]
    fn_expr, lines = _fn_expr(record, lines)
    name = file_name(record)
    path = os.path.join(directory, name)
    trial = os.path.join(directory, f".checking-{name}")
    why = "no candidate"
    try:
        for plan in plans(record):
            with open(trial, "w") as fh:
                fh.write(render(record, plan, fn_expr, lines, meta, name))
            ok, why = check_file(trial, cwd=cwd, timeout_s=timeout_s)
            if ok:
                os.replace(trial, path)
                return path, why
    finally:
        if os.path.exists(trial):
            os.unlink(trial)
    return None, why


def write_repros(report: dict[str, Any], directory: str, imports: Sequence[str] = (), *,
                 cwd: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, jobs: int = 1) -> list[str]:
    """One checked repro file per finding of ``report`` (a fresh or a saved campaign report).

    Returns the paths written; ``report["summary"]["repros"]`` gets the counts and, for each
    finding whose repro did not reproduce in a fresh process, why (nothing is written for it).
    ``imports``: the modules given to ``--import`` (custom ops), for reports that lack them.
    ``jobs``: files checked at once (each check is its own process; the files do not depend on it).
    """
    unknown = sorted({f["kind"] for f in report["findings"]} - FAMILIES.keys())
    if unknown:
        raise ReproBug(f"verishape bug: no repro generator for finding kinds {unknown}; "
                       f"add them to verishape/fuzz/repro.py")
    os.makedirs(directory, exist_ok=True)
    from .._version import __version__

    config = report.get("summary", {}).get("config", {})
    meta = {"version": __version__, "seed": config.get("seed", "?")}
    written: list[str] = []
    failed: list[dict[str, Any]] = []
    # Resolve every callable here first (imports, op_db): threads then only wait on processes.
    for record in report["findings"]:
        _fn_expr(record, list(record.get("imports") or ()))
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(lambda r: write_repro(r, directory, meta, imports, cwd=cwd, timeout_s=timeout_s),
                                report["findings"]))
    for record, (path, why) in zip(report["findings"], results):
        if path is None:
            failed.append({k: record[k] for k in ("op", "variant", "mode", "kind")} | {"why": why})
        else:
            written.append(path)
    report.setdefault("summary", {})["repros"] = {
        "dir": directory, "written": len(written), "verified": len(written),
        "not_reproduced": len(failed), "failures": failed,
    }
    return written


def summary_line(report: dict[str, Any]) -> str:
    r = report["summary"]["repros"]
    line = (f"repros: {r['written']} written to {r['dir']}, each verified to reproduce in a fresh process"
            f"; {r['not_reproduced']} did not reproduce (not written)")
    for f in r["failures"]:
        full = f"{f['op']}.{f['variant']}" if f["variant"] else f["op"]
        line += f"\n  [{f['kind']}] {full} ({f['mode']}): {f['why']}"
    return line
