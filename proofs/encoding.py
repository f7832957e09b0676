"""What an answer's meaning depends on: a hash of the SMT encoding's source.

An answer the solver gave is a fact about a formula, and the formula is whatever
:mod:`verishape.solvers` made of a sympy expression.  Change the translation of ``//`` and
the same expression becomes another formula, so every stored answer must name the encoding
it was decided under.  :data:`ENCODING_HASH` hashes the text of every module of
``verishape.solvers`` (the whole package rather than a hand-picked list: a new module is
covered without anyone remembering to add it).  The proof store keys its records with it;
the compiler's cache tag (:mod:`verishape.compiler.backend`) hashes a wider set of packages
with the same helpers.

This module lives in ``proofs`` (the bottom layer) and reads the solver package's files
by locating them (``importlib.util.find_spec``), without importing them: the store needs
the hash, and the solver layer sits above the store.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

def package_dir(package: str) -> Path:
    """The folder of ``package`` (a dotted name), found without importing it.  Where a
    package comes from is the installer's business (``verishape.solvers`` is the
    repository's ``solvers/`` folder in an editable install and ``verishape/solvers`` in
    a wheel), so the files are found the way ``import`` would find them."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"verishape bug: package {package!r} is not installed next to verishape")
    return Path(list(spec.submodule_search_locations)[0])


def package_sources(packages: Iterable[str]) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every ``*.py`` module of each package and its subpackages (a
    dotted name; the file's name is ``package/path/module.py``, the same in every kind of
    install), sorted by name, so the hash does not depend on directory listing order."""
    out = []
    for pkg in packages:
        root = package_dir(pkg)
        out += [(f"{pkg}/{p.relative_to(root).as_posix()}", p.read_bytes()) for p in root.rglob("*.py")]
    return sorted(out)


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


#: The hash of the SMT encoding in this installation (every module of ``verishape.solvers``).
ENCODING_HASH = encoding_hash(package_sources(("verishape.solvers",)))
