"""The ``verishape`` command.

Every user-facing failure is one line on stderr and a non-zero exit (2 for usage and
input errors); a traceback means a verishape bug, and says so.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from verishape._version import __version__
from verishape.core.errors import VerishapeError, check_script, check_writable, render


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verishape",
        description="Proved dynamic-shape reasoning for torch.compile.",
    )
    parser.add_argument("--version", action="version", version=f"verishape {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="compile a small dynamic-shape program with verishape and show what the solver decided",
    )
    demo.add_argument("--verbose", action="store_true", help="print each decision with its premises")
    demo.add_argument("--backend", default="aot_eager",
                      help="torch.compile backend to use (default aot_eager; 'inductor' builds C++ kernels)")
    audit = sub.add_parser(
        "verify-guards",
        help="audit a script's compiled guards against the declared input space",
        description="Run SCRIPT as __main__ with every compiled frame audited: which shape guards and runtime "
        "asserts are implied by the declared input space (mark_dynamic/mark_unbacked min/max, --assume), "
        "and counterexamples, replayed without guards, for those that are not. "
        "Exit 0: no findings; 1: findings; 2: usage or input error.",
    )
    audit.add_argument("script", help="the Python script to run")
    audit.add_argument("--json", metavar="REPORT.json", help="also write the report as JSON")
    audit.add_argument("--assume", action="append", metavar="EXPR",
                       help="a fact about input sizes, e.g. \"2 <= x.size(0) <= 64\" (repeatable)")
    audit.add_argument("script_args", nargs="*", help="arguments for the script, after --")
    explain = sub.add_parser(
        "explain", help="run a script and explain what verishape changed in each frame",
        description="Run SCRIPT as __main__ and explain, per compiled frame (numbered in compile order), "
        "what verishape changed and why, at the user's source lines. "
        "Exit 0: the script ran to its end; 1: a compile error stopped it; 2: usage or input error.",
    )
    explain.add_argument("script", help="the Python script to run")
    explain.add_argument("script_args", nargs="*", help="arguments for the script, after --")
    from verishape.fuzz.cli import add_parser as add_fuzz_meta_parser

    add_fuzz_meta_parser(sub)
    from .proofs import add_parser as add_proofs_parser

    add_proofs_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        # Each command checks its arguments before importing torch, sympy or z3 (seconds):
        # bad input is refused at once, and never after the work it would spoil.
        if args.command == "explain":
            check_script(args.script)
            from verishape.explanation import explain_script

            text, status, stopped = explain_script(args.script, args.script_args)
            print(text)
            if stopped:
                print(f"verishape: explain: {stopped}", file=sys.stderr)
            return status
        if args.command == "verify-guards":
            check_script(args.script)
            if args.json is not None:
                check_writable(args.json, "--json")
            from verishape.audit.run import main as verify_main

            return verify_main(args)
        if args.command == "fuzz-meta":
            from verishape.fuzz.cli import run as run_fuzz_meta

            return run_fuzz_meta(args)
        if args.command == "proofs":
            from .proofs import run as run_proofs

            return run_proofs(args)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(verbose=args.verbose, backend=args.backend)
    except VerishapeError as exc:
        # bad input, or UnsupportedTorch: the probe of torch's internals failed (one line
        # naming what is missing and the torch version); nothing ran with the stock ShapeEnv
        print(render(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("verishape: interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
