"""Errors the ``verishape`` command reports as one line (no traceback)."""


class UsageError(Exception):
    """Bad input from the user (a missing script, a malformed option): exit status 2."""
