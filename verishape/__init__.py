"""verishape: proved, not hoped, dynamic-shape reasoning for torch.compile.

Public API (re-exported here; the implementation lives in internal modules and in the
``verishape.compiler``, ``verishape.solvers`` and ``verishape.proofs`` subpackages, which
the repository keeps in its top-level folders ``compiler/``, ``solvers/``, ``proofs/``):

* :func:`compile` - a drop-in for ``torch.compile``;
* :class:`VeriShapeEnv` - the ShapeEnv that asks Z3 where SymPy gives up;
* :func:`export` - a drop-in for ``torch.export.export``; :func:`export_decisions` gives
  the proof records of an export;
* :func:`explain` - what verishape changed in a compiled function's frames or an export;
* :func:`proved_guard_filter` - a ``guard_filter_fn`` that drops the shape guard of a
  ``shapes_spec`` compile only where it is proved on the declared space;
* :func:`enable` / :func:`disable` - verishape for every ``torch.compile`` in the process,
  whatever backend it names (for frameworks that vet the backend's name);
* :class:`VerishapeError` - the base of every error verishape raises to a user on purpose
  (:class:`UnsupportedTorch` among them).
"""

from __future__ import annotations

# No torch check here: ``import verishape`` (and ``verishape --version``) must work on any
# torch.  The probe of torch's internals (verishape.core.torch_seam) runs when the first module
# that needs them is imported, and refuses in one line (UnsupportedTorch).
from ._version import __version__
from verishape.core.errors import VerishapeError
from verishape.core.torch_seam import UnsupportedTorch

__all__ = ["UnsupportedTorch", "VeriShapeEnv", "VerishapeError", "__version__", "compile", "disable", "enable", "explain", "export",
           "export_decisions", "proved_guard_filter"]


def __getattr__(name: str):  # lazy: `verishape --version` should not import torch
    if name == "VeriShapeEnv":
        from verishape.core.shape_env import VeriShapeEnv

        return VeriShapeEnv
    if name == "compile":
        from verishape.compiler import compile

        return compile
    if name in ("export", "export_decisions"):
        import importlib

        return getattr(importlib.import_module("verishape.compiler.export.program"), name)
    if name in ("enable", "disable"):
        from verishape.compiler import switch

        return getattr(switch, name)
    if name == "proved_guard_filter":
        from verishape.compiler.guard_filter import proved_guard_filter

        return proved_guard_filter
    if name == "explain":
        from .explanation import explain

        return explain
    raise AttributeError(f"module 'verishape' has no attribute {name!r}")
