"""Property-based fuzzing of meta / fake implementations (``verishape fuzz-meta``).

Modules, one job each: ``inputs`` (tensor recipes), ``ops`` (what to fuzz), ``strategies``
(hypothesis), ``trace`` (symbolic and unbacked fake runs), ``sizes`` (solver-picked points),
``compare`` and ``check`` (what counts as a finding), ``fuzzer`` (hypothesis driver),
``report``, ``campaign`` (many ops, parallel, resumable), ``cli``.
"""

from typing import Any

__all__ = ["FuzzConfig", "fuzz_target"]


def __getattr__(name: str) -> Any:  # lazy: `verishape --help` must not import torch
    if name in __all__:
        from . import fuzzer

        return getattr(fuzzer, name)
    raise AttributeError(f"module 'verishape.fuzz' has no attribute {name!r}")
