"""Proof obligations and the records of their decisions (printable, JSON, SMT-LIB2), and the
store that keeps every decision on disk (:mod:`verishape.proofs.store`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .record import Obligation, ProofRecord, dump_expr, load_expr
    from .store import ProofStore, StoredProof, open_store, process_store

#: Exported name -> the submodule defining it, imported on first use (PEP 562):
#: ``verishape.proofs.record`` needs torch, ``verishape.proofs.store`` does not, and ``verishape proofs``
#: reads the store without importing torch.
_EXPORTS = {
    **dict.fromkeys(("Obligation", "ProofRecord", "dump_expr", "load_expr"), "record"),
    **dict.fromkeys(("ProofStore", "StoredProof", "open_store", "process_store"), "store"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["Obligation", "ProofRecord", "ProofStore", "StoredProof", "dump_expr", "load_expr", "open_store",
           "process_store"]
