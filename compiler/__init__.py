"""torch.compile integration: VeriShapeEnv chosen per frame, caches kept apart."""

from .api import compile
from .backend import CACHE_TAG, VerishapeBackend
from .frames import install, is_verishape_backend

__all__ = ["CACHE_TAG", "VerishapeBackend", "compile", "install", "is_verishape_backend"]
