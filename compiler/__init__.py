"""torch.compile and torch.export integration: VeriShapeEnv chosen per frame or per export,
caches kept apart.  (``verishape.compiler.export`` is the module; its function is ``verishape.compiler.export.export``.)"""

from .api import compile
from .backend import CACHE_TAG, VerishapeBackend
from .export import ExportShapeEnv, export_decisions
from .frames import install, is_verishape_backend

__all__ = ["CACHE_TAG", "ExportShapeEnv", "VerishapeBackend", "compile", "export_decisions", "install",
           "is_verishape_backend"]
