"""The ``verishape`` command: its parser and subcommands (``verify-guards``, ``fuzz-meta``,
``proofs``, ``demo``), and the one place a user-facing error becomes a line and exit 2."""
