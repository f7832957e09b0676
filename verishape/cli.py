"""The ``verishape`` command.

Every user-facing failure is one line on stderr and a non-zero exit (2 for usage and
input errors); a traceback means a verishape bug, and says so.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._version import __version__


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(verbose=args.verbose, backend=args.backend)
    except UsageError as exc:
        print(f"verishape: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("verishape: interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
