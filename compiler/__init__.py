"""torch.compile and torch.export integration: VeriShapeEnv chosen per frame or per export,
caches kept apart.  Widening (a size-1 call running the batch-N artifact) lives in
``widen/``, ``verishape.export`` and what it adds to an export in ``export/``."""

from .api import compile
from .backend import CACHE_TAG, VerishapeBackend
from .export.program import ExportShapeEnv, export_decisions
from .frames import install, is_verishape_backend

__all__ = ["CACHE_TAG", "ExportShapeEnv", "VerishapeBackend", "compile", "export_decisions", "install",
           "is_verishape_backend"]
