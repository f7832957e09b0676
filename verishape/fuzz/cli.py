"""``verishape fuzz-meta``: property-based fuzzing of meta/fake implementations.

Exit status: 1 when there are findings, 0 when none, 2 for usage errors (one line on
stderr).  ``add_parser`` and ``run`` are the hooks ``verishape/cli/main.py`` calls; heavy imports
(torch, hypothesis, the OpInfo database) wait until ``run`` so other commands stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import sys
from typing import Any

from verishape.core.errors import UsageError, check_writable


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "fuzz-meta",
        help="fuzz meta/fake implementations of OpInfo or custom ops against eager",
        description="Draw shapes, layouts and parameters with hypothesis, trace the op with symbolic "
                    "and unbacked sizes, check the prediction against eager at solver-picked sizes.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--ops", help="comma-separated OpInfo names (NAME matches all variants, NAME.variant one) "
                                     "or custom ops namespace::name")
    which.add_argument("--all", action="store_true", help="every OpInfo entry that runs on CPU")
    p.add_argument("--mode", choices=("backed", "unbacked", "both"), default="both",
                   help="backed (with and without the python dispatcher), unbacked, or both (default)")
    p.add_argument("--max-examples", type=int, default=50, metavar="N", help="hypothesis examples per op and mode")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="base seed; each op derives its own")
    p.add_argument("--jobs", type=int, default=None, metavar="J",
                   help="ops at once: worker processes, or Ray tasks and a local Ray's CPUs (results do not depend on it)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where ops run: local processes (default) or Ray tasks (needs the 'ray' extra)")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="join this Ray cluster (HOST:PORT, ray://HOST:PORT or auto) instead of starting a local Ray")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (it registers torch.library custom ops); repeatable")
    p.add_argument("--json", metavar="REPORT.json", help="write the JSON report here")
    p.add_argument("--repro-dir", metavar="DIR",
                   help="write one standalone repro file per finding here (created if missing); each is "
                        "run in a fresh process first and written only if it reproduces")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="per-op time limit (makes results depend on machine speed; for campaigns)")
    p.add_argument("--known-issues", metavar="KNOWN.json",
                   help="JSON list of known upstream issues ({issue, ops, match, kinds}); root causes matching "
                        "one are marked known (read locally, never fetched)")
    p.add_argument("--resume", metavar="PROGRESS.jsonl", help="append finished ops here and skip those already in it")
    return p


def _check_arguments(args: argparse.Namespace) -> None:
    """Everything that can be checked without torch: refused in a fraction of a second,
    never after a campaign whose results it would lose."""
    if args.max_examples < 1:
        raise UsageError(f"--max-examples must be at least 1, got {args.max_examples}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    _check_executor(args)
    if args.time_budget is not None and not (math.isfinite(args.time_budget) and args.time_budget > 0):
        raise UsageError(f"--time-budget must be a positive number of seconds, got {args.time_budget}")
    if not args.all and not any(n.strip() for n in args.ops.split(",")):
        raise UsageError("--ops needs at least one op name")
    if args.resume is not None:
        check_writable(args.resume, "--resume")
    if args.json is not None:
        check_writable(args.json, "--json")
    if args.repro_dir is not None:
        _check_repro_dir(args.repro_dir)
    if args.known_issues is not None:
        from .rootcause import KnownIssuesError, load_known

        try:
            args.known = load_known(args.known_issues)
        except KnownIssuesError as exc:
            raise UsageError(str(exc)) from None


def _check_repro_dir(directory: str) -> None:
    """Create ``--repro-dir`` and prove a file can be written there, before any fuzzing."""
    probe = os.path.join(directory, f".verishape-write-check-{os.getpid()}")
    try:
        os.makedirs(directory, exist_ok=True)
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise UsageError(f"--repro-dir {directory}: cannot write there: {why}") from None


def _check_executor(args: argparse.Namespace) -> None:
    """``--executor ray`` needs Ray importable (looked up, not imported: that takes a
    second) and ``--ray-address`` only means something with it."""
    if args.ray_address is not None and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    if args.executor == "ray":
        from .executors import RAY_HINT

        try:
            found = importlib.util.find_spec("ray") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"--executor ray needs Ray, which is not installed: {RAY_HINT}")


def _import_user_modules(modules: list[str]) -> None:
    """Import each ``--import`` module as ``python -m`` would find it: the current folder
    comes first on ``sys.path`` (the installed ``verishape`` script does not put it there;
    worker processes are spawned with the parent's ``sys.path``, so they find it too).
    Whatever the module raises is the user's error, reported in one line."""
    cwd = os.getcwd()
    if sys.path[:1] not in ([cwd], [""]):
        # First, as with ``python -m``: a local module shadows an installed one of its name.
        sys.path.insert(0, cwd)
    for module in modules:
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module failed: one line, exit 2
            text = str(exc).strip().splitlines()
            raise UsageError(f"--import {module}: {type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")) from None


def _dump(report: dict[str, Any], path: str | None) -> None:
    from .report import dump

    if path:
        try:
            dump(report, path)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    _check_arguments(args)
    _import_user_modules(args.imports)
    from .campaign import run_campaign
    from .executors import make_executor
    from .fuzzer import MODES, FuzzConfig
    from .ops import UnknownOp, resolve
    from .report import text_summary

    names = None if args.all else [n.strip() for n in args.ops.split(",") if n.strip()]
    try:
        targets = resolve(names, args.imports)
    except UnknownOp as exc:
        raise UsageError(str(exc)) from None
    cfg = FuzzConfig(max_examples=args.max_examples, seed=args.seed, modes=MODES[args.mode],
                     time_budget_s=args.time_budget)
    executor = make_executor(args.executor, args.jobs, args.ray_address)
    report = run_campaign([t.full_name for t in targets], cfg, jobs=args.jobs or 1, imports=args.imports,
                          progress_file=args.resume, stream=sys.stderr if len(targets) > 1 else None,
                          executor=executor, known=getattr(args, "known", ()))
    _dump(report, args.json)
    if args.repro_dir is not None:
        from .repro import summary_line, write_repros

        # After the first dump, so a bug in a repro generator cannot lose the campaign.
        write_repros(report, args.repro_dir, args.imports, cwd=os.getcwd(), jobs=args.jobs or 1)
        _dump(report, args.json)
    print(text_summary(report))
    if args.repro_dir is not None:
        print(summary_line(report))
    return 1 if report["findings"] else 0
