"""The one base of the errors verishape raises to a user on purpose, and the one place that
renders them.

A :class:`VerishapeError` is bad input or an unusable environment, never a bug: its message
is one line that names what was wrong (the argument, its value) and what to do instead.  The
command line prints it with :func:`render` and exits 2, without a traceback; a program that
catches ``VerishapeError`` catches every such refusal and nothing else.  Each subclass keeps
the standard type it also is (``ImportError`` for a torch verishape cannot use,
``ValueError`` for a bad option), so code written against those keeps working.

Signals verishape raises and catches inside itself (a refused widening, an opaque term, an
undefined value in concrete evaluation) are not errors to a user and do not derive from it.

The checks of a user's input that can run before anything heavy is imported live here too,
next to the error they raise: a missing script or an unwritable report path must be
refused in a fraction of a second, not after importing torch (seconds) or, worse, after
running a whole audit whose report would then be lost.  Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path


class VerishapeError(Exception):
    """Bad input or an unusable environment, said in one line with its fix."""


def render(exc: BaseException) -> str:
    """The line the command prints for ``exc`` (a :class:`VerishapeError`)."""
    return f"verishape: error: {exc}"


class UsageError(VerishapeError):
    """Bad input from the user (a missing script, a malformed option): exit status 2."""


def check_script(path: str | os.PathLike[str]) -> None:
    """Refuse a script Python itself would not run: missing, not a file, unreadable, not
    decodable in its declared encoding (PEP 263 coding line, else UTF-8), or a syntax error.

    The bytes go to ``compile`` as they are, so the encoding is read exactly as the
    interpreter reads it (a latin-1 script with a coding line is fine).
    """
    p = Path(path)
    if not p.exists():
        raise UsageError(f"script not found: {p}")
    if not p.is_file():
        raise UsageError(f"not a file: {p}")
    try:
        source = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {p}: {exc.strerror}") from None
    try:
        compile(source, str(p), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise UsageError(f"syntax error in {p.name} line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        raise UsageError(f"{p.name} cannot be compiled by Python: {type(exc).__name__}: {exc}") from None


def check_writable(path: str | os.PathLike[str], option: str) -> None:
    """Refuse an output path that cannot be written, before the work whose result it would
    hold.  It is really opened for appending (permission bits say little when running as
    root, or on a read-only mount); a file this check creates is removed again, and an
    existing one is left untouched."""
    p = Path(path)
    existed = p.exists()
    try:
        with open(p, "a"):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise UsageError(f"{option} {path}: cannot write there: {why}") from None
    if not existed:
        try:
            p.unlink()
        except OSError:  # pragma: no cover - we just created it; an empty file left behind is harmless
            pass
