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

Standard library only: the command's input checks import this before torch.
"""

from __future__ import annotations


class VerishapeError(Exception):
    """Bad input or an unusable environment, said in one line with its fix."""


def render(exc: BaseException) -> str:
    """The line the command prints for ``exc`` (a :class:`VerishapeError`)."""
    return f"verishape: error: {exc}"
