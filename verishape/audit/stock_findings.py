"""What stock torch adds to a frame on its own, audited: 0/1 specialization (``2 <= s``)
and duck sizing (sources that share one symbol), each reported only when the declared space
admits the values it excludes, and the widening proofs (``widen_specializations``) that ran
this frame's artifact at such a value instead.  Functions of the frame's
:class:`verishape.audit.declared.DeclaredSpace`: they keep no state.
"""

from __future__ import annotations

import re
from typing import Any

import sympy

import verishape.solvers as solvers

from .declared import DeclaredSpace
from .records import Finding
from .space import DEFAULT_BACKED, Bounds

_WIDENED = re.compile(r"^(?P<source>.+?) widened to admit (?P<value>-?\d+)")


def widenings(space: DeclaredSpace) -> list[dict[str, Any]]:
    """Proofs of specialization equivalence (``widen_specializations``) this frame
    takes part in: ``reuses`` (this frame, traced at size ``v``, runs an earlier
    frame's artifact) and ``reused_by`` (a later frame at size ``v`` runs this frame's
    artifact, so a call at ``v`` did not compile).  Read from the decision logs, so a
    run without them (no widening asked, or no size-1 call) shows nothing."""
    out = [_widening(ev, "reuses", None) for ev in space.env.verishape_log.widened]
    out += [_widening(ev, "reused_by", index) for index, ev in getattr(space.frame, "reused_by", ())]
    return out


def _widening(ev: Any, role: str, frame: int | None) -> dict[str, Any]:
    text = ev.describe(timed=False)
    m = _WIDENED.match(text)
    return {"kind": "specialization_widened", "role": role, "frame": frame, "evidence": text,
            "status": solvers.PROVED, "source": m.group("source") if m else None,
            "sources": list(ev.sources), "value": int(ev.value) if ev.value is not None else None,
            "record": ev.proof.to_json() if ev.proof is not None else None}


def _widened_to(space: DeclaredSpace, group: list[str]) -> int | None:
    """The smallest value at which a later frame proved it may run this frame's
    artifact for a size of ``group``, if any."""
    values = [w["value"] for w in widenings(space) if w["role"] == "reused_by" and w["value"] is not None
              and any(src in group for src in w["sources"])]
    return min(values) if values else None


def specializations(space: DeclaredSpace) -> list[Finding]:
    """One finding per size the artifact specialized away from 0/1 (``2 <= s``) where
    the declared space admits a smaller value.  The counterexample assigns the size,
    so every source tied to it gets the value (``input_ids`` and ``attention_mask``
    alike), and sizes derived from it are rebuilt (:meth:`DeclaredSpace.keyed`)."""
    out = []
    for group in space.size_groups():
        syms = {space.symbol_of_source[src] for src in group}
        ranges = [space.env.var_to_range.get(sym) for sym in syms]
        if any(vr is None or int(vr.lower) < 2 for vr in ranges):
            continue
        bounds = [space.declared_bounds.get(src, DEFAULT_BACKED) for src in group]
        lowest = max(b.lower if b.lower is not None else 0 for b in bounds)
        uppers = [b.upper for b in bounds if b.upper is not None]
        if lowest >= 2 or (uppers and min(uppers) < lowest):
            continue
        widened = _widened_to(space, group)
        if widened is not None and widened <= lowest:
            continue  # a call at that size ran this artifact, on a proof reported with the frame
        values: dict[str, int | float] = {str(sym): lowest for sym in syms}
        # An input of the whole declared space at that size, so that sizes the
        # ``--assume`` facts tie to it (another input's batch) follow it too.
        pin = sympy.Ne(next(iter(syms)), lowest, evaluate=False)  # a positive symbol folds it
        facts = space.facts()
        r = space.prove(pin, facts)
        if r.status == solvers.PROVED:
            continue  # the declared space (its other facts) excludes that size
        if r.status == solvers.REFUTED:
            r = space.small_refutation(pin, facts, r)
        if r.status == solvers.REFUTED and r.counterexample:
            # only the sizes an --assume fact ties to this one; the rest keep their size
            tied_syms = set(syms)
            while grown := {x for f in space.assumptions if f.free_symbols & tied_syms
                            for x in f.free_symbols} - tied_syms:
                tied_syms |= grown
            tied = {str(x) for x in tied_syms}
            values = {k: v for k, v in r.counterexample.items() if k in tied} | values
        named = group[0] if len(group) == 1 else f"{group[0]} (and {', '.join(group[1:])}, the same size)"
        out.append(Finding("specialization_01", space.frame.index, f"2 <= {named}", None, space.keyed(values),
                           detail="sizes 0 and 1 are specialized: this artifact requires >= 2"))
    return out


def duck_sizing(space: DeclaredSpace) -> list[Finding]:
    """Sources that share one symbol (duck sizing): a finding when the declared space,
    ``--assume`` facts included, admits them unequal.  Each source is its own unknown
    here (in the frame they are one symbol, so an ``--assume`` equality of the pair
    would read ``s == s``); the counterexample is the solver's."""
    out = []
    for srcs in space.sources.values():
        if len(srcs) < 2:
            continue
        own = {src: sympy.Symbol(f"duck_{i}", integer=True) for i, src in enumerate(srcs)}
        premises = _space_per_source(space, own)
        first, *rest = srcs
        for other in rest:
            goal = sympy.Eq(own[first], own[other])
            r = space.prove(goal, premises)
            if r.status == solvers.REFUTED:
                r = space.small_refutation(goal, premises, r)
            if r.status == solvers.PROVED:
                continue
            cex = {src: r.counterexample[str(sym)] for src, sym in own.items()
                   if r.counterexample and str(sym) in r.counterexample and src in (first, other)}
            if r.status != solvers.REFUTED or len(cex) < 2:
                pair = _distinct_values(space.declared_bounds.get(first, DEFAULT_BACKED),
                                        space.declared_bounds.get(other, DEFAULT_BACKED))
                if pair is None:
                    continue
                cex = {first: pair[0], other: pair[1]}
            out.append(Finding("duck_sizing", space.frame.index, f"Eq({first}, {other})", None, cex,
                               detail="equal at trace time, so the artifact requires them equal"))
    return out


def _space_per_source(space: DeclaredSpace, own: dict[str, sympy.Symbol]) -> list[sympy.Basic]:
    """The declared space over one unknown per source in ``own``: each source's bounds,
    and the ``--assume`` facts whose sources are all in ``own``."""
    facts: list[sympy.Basic] = []
    for src, sym in own.items():
        facts += space.declared_bounds.get(src, DEFAULT_BACKED).facts(sym)
    for a, _ in space.frame_assumptions:
        if all(src in own for src in a.sources.values()):
            facts.append(a.expr.xreplace({ph: own[src] for ph, src in a.sources.items()}))
    return facts


def _distinct_values(a: Bounds, b: Bounds) -> tuple[int, int] | None:
    """Two different values, one in each declared range, if any exist."""
    va = a.lower if a.lower is not None else 2
    if a.upper is not None and va > a.upper:
        return None
    base = b.lower if b.lower is not None else 2
    for vb in (base, base + 1):
        if vb != va and (b.upper is None or vb <= b.upper):
            return va, vb
    return None
