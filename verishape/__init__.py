"""verishape: proved, not hoped, dynamic-shape reasoning for torch.compile.

The public API is re-exported here; implementation lives in internal modules and in the
top-level ``solvers``, ``compiler`` and ``proofs`` packages.
"""

from ._version import __version__

__all__ = ["__version__"]
