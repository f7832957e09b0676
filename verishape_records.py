"""Where verishape's widening records live, and their type in torch's mega-cache: a leaf.

A widening record (``verishape.compiler.widen.record``) is a file beside torch's own caches,
named by a digest of its artifact's key.  Two callers need that place: the package, which
writes and reads records, and verishape's plug-in (:mod:`verishape_autoload`), which at
``import torch`` registers the record's artifact type with ``torch.compiler``'s mega-cache so
that ``load_cache_artifacts()`` in a process that never imported verishape still accepts a
blob holding one, and writes such a record where the package will look for it.

This module imports nothing of verishape, so both may import it without an import cycle
(the plug-in imports the package only to turn verishape on; the package imports this, never
the plug-in).  It lives outside the package for the plug-in's reason: a process that never
asked for verishape imports none of it at ``import torch``.
"""

from __future__ import annotations

import os
import tempfile

#: the mega-cache type of a widening record
ARTIFACT_TYPE = "verishape_widen"
#: a record's name: a SHA-256 digest in hex
NAME_LENGTH = 64


def directory() -> str:
    """Where records live: beside torch's own caches (``TORCHINDUCTOR_CACHE_DIR``)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return os.path.join(cache_dir(), "verishape", "widen")


def record_path(name: str) -> str:
    """The file of the record named ``name``."""
    return os.path.join(directory(), name[:2], name + ".rec")


def write_record(name: str, content: bytes) -> None:
    """Write a record atomically (a temporary file, then a rename: a reader sees a whole
    record or none).  A name that is not a digest is refused (a mega-cache entry of this
    type that is not verishape's); what is written is checked when read, like any record."""
    if not isinstance(name, str) or len(name) != NAME_LENGTH or any(c not in "0123456789abcdef" for c in name):
        raise ValueError(f"verishape: a widening record named {str(name)[:80]!r} is not one")
    path = record_path(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def register_cache_artifact() -> bool:
    """Register the widening record's artifact type with torch's mega-cache (idempotent);
    False where this torch has no such registry (records then do not travel in saved
    artifacts)."""
    try:
        from torch.compiler._cache import CacheArtifact, CacheArtifactFactory
    except ImportError:
        return False
    if ARTIFACT_TYPE in getattr(CacheArtifactFactory, "_artifact_types", {}):
        return True

    class WidenRecordArtifact(CacheArtifact):
        """A widening record in torch's mega-cache: its key is the record's name, its
        content the record; loading it writes the record to the local cache folder."""

        def populate_cache(self) -> None:
            write_record(self.key, self.content)

        @staticmethod
        def type() -> str:
            return ARTIFACT_TYPE

    CacheArtifactFactory.register(WidenRecordArtifact)
    return True
