"""Proof obligations and the records of their decisions (printable, JSON, SMT-LIB2)."""

from .record import Obligation, ProofRecord, dump_expr, load_expr

__all__ = ["Obligation", "ProofRecord", "dump_expr", "load_expr"]
