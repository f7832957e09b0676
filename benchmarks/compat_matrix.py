"""Compatibility matrix: verishape's demo and test suite on several torch releases.

For each torch version it uses one virtual environment, ``<venv-dir>/venv-torch-<version>``
(made when missing, reused otherwise), and

1. installs ``torch==<version>`` first, only when another version is there (so an existing
   venv costs nothing and a user's build - CPU or CUDA - is kept);
2. installs this checkout with ``--no-deps``, then the project's other dependencies (the
   ``dependencies`` and ``dev`` extra of pyproject.toml, torch left out) under a constraint
   that pins the installed torch, so nothing in this step can replace torch;
3. asks pip, with ``--dry-run``, what ``pip install -e ".[dev,triton]"`` would install, and
   records whether that would replace torch or its Triton (the packaging check of issue 14);
4. runs ``python -m verishape demo`` and the test suite (``-m "not slow"``; ``--full`` for all),
   in that venv, from this checkout.

It writes JSON and a markdown table (default ``benchmarks/results/compat_matrix.{json,md}``).
Failures are data, not errors: a version whose demo or tests fail is still a row.

    python benchmarks/compat_matrix.py [VERSION ...] [--full] [--venv-dir /tmp]
        [--index-url URL] [--jobs N] [--out benchmarks/results/compat_matrix]

Default versions: 2.11.0 2.13.0 2.15.0.  ``--index-url`` passes an index to the torch
install only (e.g. https://download.pytorch.org/whl/cpu for CPU builds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VERSIONS = ("2.11.0", "2.13.0", "2.15.0")
# Packages pip must never touch in a matrix venv: the torch under test and its Triton.
PROTECTED = ("torch", "triton")


@dataclass
class Row:
    """One torch version's results; every field is filled even when a step fails."""

    requested: str
    torch: str = ""
    build: str = ""
    triton: str = ""
    python: str = ""
    setup_ok: bool = False
    setup_error: str = ""
    setup_s: float = 0.0
    pip_would_replace: list[str] = field(default_factory=list)
    demo_ok: bool = False
    demo_summary: str = ""
    demo_s: float = 0.0
    tests_selection: str = ""
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    tests_s: float = 0.0
    failing: list[str] = field(default_factory=list)


def _run(cmd: list[str], timeout: float | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run a command, capturing text output; a timeout is reported as exit code 124."""
    try:
        return subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        return subprocess.CompletedProcess(cmd, 124, out, f"timed out after {timeout} s")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _installed_version(py: Path, dist: str) -> str:
    """The installed distribution's version from its metadata (no import, no torch start-up)."""
    proc = _run([str(py), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"])
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _project_requirements() -> list[str]:
    """The project's dependencies plus the dev extra, without torch and Triton.

    Read from pyproject.toml so the matrix installs what a user's ``pip install -e .[dev]``
    would, minus the one package whose version is the variable under test.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"].get("dev", []))
    return [r for r in reqs if _req_name(r) not in PROTECTED]


def _req_name(req: str) -> str:
    return re.split(r"[<>=!~\[;\s]", req, maxsplit=1)[0].strip().lower()


def _ensure_venv(venv: Path, version: str, index_url: str | None) -> Path:
    """Make (or reuse) the venv and put ``torch==version`` in it; return its python."""
    py = venv / "bin" / "python"
    if not py.exists():
        proc = _run([sys.executable, "-m", "venv", str(venv)])
        if proc.returncode != 0:
            raise RuntimeError(f"venv: {_last_line(proc.stderr)}")
    if _installed_version(py, "torch").split("+")[0] != version:
        cmd = [str(py), "-m", "pip", "install", "--quiet", f"torch=={version}"]
        if index_url:
            cmd += ["--index-url", index_url]
        proc = _run(cmd)
        if proc.returncode != 0:
            raise RuntimeError(f"pip install torch=={version}: {_last_line(proc.stderr)}")
    return py


def _install_project(py: Path) -> None:
    """This checkout without dependencies, then its non-torch dependencies, torch pinned."""
    proc = _run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(ROOT)])
    if proc.returncode != 0:
        raise RuntimeError(f"pip install --no-deps -e: {_last_line(proc.stderr)}")
    pins = [f"{name}=={v}" for name in PROTECTED if (v := _installed_version(py, name))]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(pins) + "\n")
        constraints = fh.name
    try:
        proc = _run([str(py), "-m", "pip", "install", "--quiet", "-c", constraints, *_project_requirements()])
    finally:
        os.unlink(constraints)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install dependencies: {_last_line(proc.stderr)}")


def _would_replace(py: Path) -> list[str]:
    """What a plain ``pip install -e .[dev,triton]`` would change among torch and Triton.

    pip's ``--dry-run`` prints ``Would install a-1 b-2 ...``; any protected name in that
    list would replace (or add) the build the user chose.
    """
    proc = _run([str(py), "-m", "pip", "install", "--dry-run", "-e", f"{ROOT}[dev,triton]"], timeout=600)
    if proc.returncode != 0:
        return [f"(dry run failed: {_last_line(proc.stderr)})"]
    planned = " ".join(ln for ln in proc.stdout.splitlines() if ln.startswith("Would install"))
    return [p for p in planned.split()[2:] if p.rsplit("-", 1)[0].lower() in PROTECTED]


def _describe_torch(py: Path, row: Row) -> None:
    """Fill in the torch version actually imported, its build (cpu / cuda X) and Triton."""
    code = (
        "import sys, importlib.metadata as m, torch\n"
        "cuda = torch.version.cuda\n"
        "try:\n    tr = m.version('triton')\nexcept m.PackageNotFoundError:\n    tr = ''\n"
        "print(torch.__version__, 'cuda ' + cuda if cuda else 'cpu', tr or '-', sys.version.split()[0], sep='|')"
    )
    proc = _run([str(py), "-c", code])
    if proc.returncode == 0:
        row.torch, row.build, row.triton, row.python = proc.stdout.strip().split("|")


def _run_demo(py: Path, row: Row, timeout: float) -> None:
    start = time.perf_counter()
    proc = _run([str(py), "-m", "verishape", "demo"], timeout=timeout)
    row.demo_s = round(time.perf_counter() - start, 1)
    row.demo_ok = proc.returncode == 0
    row.demo_summary = _last_line(proc.stdout) if row.demo_ok else _last_line(proc.stderr or proc.stdout)


def _run_tests(py: Path, row: Row, full: bool, jobs: int, timeout: float) -> None:
    """Run pytest with a JUnit report and count outcomes from it (not from the summary text)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        cmd += ["-n", str(jobs)] if jobs > 1 else ["-p", "no:xdist"]
        if not full:
            cmd += ["-m", "not slow"]
        row.tests_selection = "all" if full else "not slow"
        start = time.perf_counter()
        proc = _run(cmd, timeout=timeout)
        row.tests_s = round(time.perf_counter() - start, 1)
        if not report.exists():
            row.errors = 1
            row.failing = [f"(pytest exited {proc.returncode}: {_last_line(proc.stderr or proc.stdout)})"]
            return
        _count_junit(report, row)


def _count_junit(report: Path, row: Row) -> None:
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            row.failed += 1
            row.failing.append(name)
        elif case.find("error") is not None:
            row.errors += 1
            row.failing.append(name)
        elif case.find("skipped") is not None:
            row.skipped += 1
        else:
            row.passed += 1


def measure(version: str, args: argparse.Namespace) -> Row:
    """One row: set-up, packaging check, demo, tests.  A failing step leaves the rest empty."""
    row = Row(requested=version)
    start = time.perf_counter()
    try:
        py = _ensure_venv(Path(args.venv_dir) / f"venv-torch-{version}", version, args.index_url)
        _install_project(py)
    except RuntimeError as exc:
        row.setup_error = str(exc)
        row.setup_s = round(time.perf_counter() - start, 1)
        return row
    row.setup_ok = True
    row.setup_s = round(time.perf_counter() - start, 1)
    _describe_torch(py, row)
    if not args.skip_pip_check:
        row.pip_would_replace = _would_replace(py)
    _run_demo(py, row, args.timeout)
    if not args.skip_tests:
        _run_tests(py, row, args.full, args.jobs, args.timeout)
    return row


def markdown(rows: list[Row]) -> str:
    head = (
        "| torch | build | triton | demo | demo (s) | tests | passed | failed | errors | skipped | tests (s) "
        "| `.[dev,triton]` would change |\n|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---|\n"
    )
    lines = []
    for r in rows:
        if not r.setup_ok:
            lines.append(f"| {r.requested} | set-up failed: {r.setup_error} | | | | | | | | | | |")
            continue
        demo = "ok" if r.demo_ok else "FAIL"
        change = ", ".join(r.pip_would_replace) or "nothing"
        selection = r.tests_selection or "not run"
        lines.append(
            f"| {r.torch} | {r.build} | {r.triton} | {demo} | {r.demo_s} | {selection} | {r.passed} | {r.failed} "
            f"| {r.errors} | {r.skipped} | {r.tests_s} | {change} |"
        )
    notes = [f"- {r.torch or r.requested}: {', '.join(r.failing)}" for r in rows if r.failing]
    tail = ("\n\nFailing tests:\n" + "\n".join(notes)) if notes else ""
    return head + "\n".join(lines) + tail + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=list(DEFAULT_VERSIONS))
    parser.add_argument("--full", action="store_true", help="run every test, slow ones included")
    parser.add_argument("--venv-dir", default="/tmp", help="where venv-torch-<version> folders live")
    parser.add_argument("--index-url", default=None, help="package index for the torch install only")
    parser.add_argument("--jobs", type=int, default=1, help="pytest-xdist workers (1: no xdist)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per demo / test run")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-pip-check", action="store_true", help="no pip --dry-run packaging check")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compat_matrix"))
    args = parser.parse_args(argv)

    rows = []
    for version in args.versions:
        row = measure(version, args)
        rows.append(row)
        print(f"torch {version}: setup={'ok' if row.setup_ok else row.setup_error} demo={row.demo_ok} "
              f"passed={row.passed} failed={row.failed} errors={row.errors} skipped={row.skipped}",
              flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "full": args.full,
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2))
    table = markdown(rows)
    out.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
