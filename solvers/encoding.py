"""What an answer's meaning depends on: a hash of the SMT encoding's source.

An answer the solver gave is a fact about a formula, and the formula is whatever
``solvers/`` made of a sympy expression.  Change the translation of ``//`` and the same
expression becomes another formula, so every stored answer must name the encoding it was
decided under.  :data:`ENCODING_HASH` hashes the text of every ``solvers/*.py`` module
(the whole package rather than a hand-picked list: a new module is covered without anyone
remembering to add it).  The proof store keys its records with it; the compiler's cache tag
(:mod:`compiler.backend`) hashes a wider set of files with the same helpers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

#: The directory that holds the top-level packages (``solvers``, ``compiler``, ...).
ROOT = Path(__file__).resolve().parent.parent


def package_sources(packages: Iterable[str], root: Path = ROOT) -> list[tuple[str, bytes]]:
    """``(path relative to root, bytes)`` of every top-level ``*.py`` module of each
    package, sorted by path, so the hash does not depend on directory listing order."""
    files = sorted(p for pkg in packages for p in (root / pkg).glob("*.py"))
    return [(p.relative_to(root).as_posix(), p.read_bytes()) for p in files]


class _Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...


def hash_sources(h: _Hasher, sources: Iterable[tuple[str, bytes]]) -> None:
    """Feed ``sources`` into ``h``: each file's name and the digest of its bytes, so
    that renaming a file changes the hash as much as editing it."""
    for name, text in sources:
        h.update(b"file\0" + name.encode() + b"\0" + hashlib.sha256(text).digest())


def encoding_hash(sources: Iterable[tuple[str, bytes]]) -> str:
    """A short hex digest of ``sources`` (16 hex digits: 64 bits)."""
    h = hashlib.sha256(b"verishape-encoding\0")
    hash_sources(h, sources)
    return h.hexdigest()[:16]


#: The hash of the SMT encoding in this installation (``solvers/*.py``).
ENCODING_HASH = encoding_hash(package_sources(("solvers",)))
