"""Kept for older imports: the torch probe now lives in :mod:`verishape.torch_seam`, next
to the patches it checks (one list of private names, not two that drift apart)."""

from __future__ import annotations

from .torch_seam import MIN_VERSION, Features, UnsupportedTorch, parse_version, probe, require

__all__ = ["MIN_VERSION", "Features", "UnsupportedTorch", "parse_version", "probe", "require"]
