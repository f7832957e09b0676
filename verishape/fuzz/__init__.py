"""Property-based fuzzing of meta / fake implementations (``verishape fuzz-meta``).

Modules, one job each: ``inputs`` (tensor recipes), ``ops`` (what to fuzz), ``strategies``
(hypothesis), ``trace`` (symbolic and unbacked fake runs), ``sizes`` (solver-picked points),
``compare`` and ``check`` (what counts as a finding), ``fuzzer`` (hypothesis driver),
``report``, ``campaign`` (many ops, parallel, resumable), ``cli``.
"""

from .fuzzer import FuzzConfig, fuzz_target

__all__ = ["FuzzConfig", "fuzz_target"]
