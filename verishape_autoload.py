"""``VERISHAPE_ENABLE=1``: verishape for every ``torch.compile`` of a process nobody edits.

A launcher (``torchrun``, a job script, a framework's CLI) can set an environment variable
where it cannot add ``verishape.enable()`` to the program.  torch runs the functions listed
under the ``torch.backends`` entry point at the end of ``import torch`` (its plug-in
mechanism for out-of-tree backends); :func:`on_torch_import` is listed there, reads the
variable and turns the process-wide switch on (:mod:`verishape.compiler.switch`).

It also registers the type of verishape's widening records with torch's mega-cache
(:func:`verishape_records.register_cache_artifact`), whatever the variable says: ``torch.compiler.
load_cache_artifacts()`` rejects a whole blob that holds an artifact of a type it does not
know, so every process with verishape installed must know this one, whether or not it
imported verishape yet.  That defines one small class on torch's own registry, in
:mod:`verishape_records` (a leaf the package imports too: no import cycle through this plug-in).

Unset, empty or ``0``: nothing else happens, and nothing of verishape is imported (this module
lives outside the package for that reason: a program that never asked for verishape, such as
one that loads a saved export, still runs without it).  ``1``: on.  Anything else is refused in one
line with exit status 2, at ``import torch``: a launcher that asked for verishape and got
stock torch would be a silent downgrade.  torch skips every plug-in when
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``; then this hook never runs, and
:func:`verishape.compiler.switch.is_enabled` says so (docs/compile.md names both settings).
"""

from __future__ import annotations

import os
import sys

from verishape_records import register_cache_artifact

VARIABLE = "VERISHAPE_ENABLE"


def requested(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether ``VERISHAPE_ENABLE`` asks for verishape; a value other than unset, empty,
    ``0`` or ``1`` raises ValueError naming the variable, its value and the fix."""
    value = environ.get(VARIABLE, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ValueError(f"{VARIABLE}={value!r} is not a setting: use 1 (verishape for every torch.compile "
                     f"of the process) or 0 / unset (off)")


def on_torch_import() -> None:
    """The ``torch.backends`` entry point: register the record's mega-cache type, and turn
    the switch on when the variable asks."""
    register_cache_artifact()
    try:
        wanted = requested()
    except ValueError as exc:
        # SystemExit passes through torch's wrapper of plug-in errors, which would
        # otherwise print a chained traceback around this one line.
        print(f"verishape: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if wanted:
        from verishape import UnsupportedTorch

        try:
            from verishape.compiler.switch import enable

            enable()
        except UnsupportedTorch as exc:  # a torch whose internals verishape cannot use: say so, stop
            print(f"verishape: VERISHAPE_ENABLE=1 but {exc}", file=sys.stderr)
            raise SystemExit(2) from None
