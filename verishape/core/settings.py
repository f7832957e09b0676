"""Every setting of a verishape compile, as one frozen value hashed whole.

Why one value: the cache tag (:func:`verishape.compiler.backend.cache_tag`) must change
whenever anything that can change an artifact changes.  When it was assembled from the
settings one by one, a new setting was covered only if its author remembered to add it to
the tag; a field added here is in :meth:`Settings.digest` without anyone remembering, and
a test checks that flipping any field moves it.

Where each field is set (one way each):

* ``limits``: the prover's, scoped with :func:`verishape.core.premises.use_prover`;
* ``minimize_guards``: :func:`verishape.core.shape_env.guard_minimization`;
* ``widen_specializations``, ``generic_recompiles``: per backend, the arguments of
  ``verishape.compile`` or the named backend's ``options`` (``VerishapeBackend.settings``).

The proof store keys an obligation by the solver's part alone (``limits``, whole): whether
goal follows from premises does not depend on what the compile does with the answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from verishape.proofs.result import Limits


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a verishape compile was asked to do (the defaults are ``verishape.compile``'s)."""

    #: the solver's deterministic limits
    limits: Limits = Limits()
    #: drop guards implied by the rest (equivalence proved) at the end of a trace
    minimize_guards: bool = True
    #: serve size-1 calls (and other layouts) from a kept generic compile, proved
    widen_specializations: bool = True
    #: a frame's second and later compiles give shared input sizes a symbol
    generic_recompiles: bool = True

    def digest(self) -> str:
        """A short hash of every field (nested dataclasses included), stable across
        processes and Python versions (JSON of the fields, keys sorted)."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:8]


#: ``verishape.compile()``'s settings; a compile under them keeps the bare cache tag
DEFAULT = Settings()
