"""``verishape.proved_guard_filter()``: a ``guard_filter_fn`` that drops a guard about
declared sizes only where it is proved to hold on the whole declared space.

Serving engines compile once and drop every guard (vLLM passes
``guard_filter_fn=torch.compiler.skip_all_guards_unsafe``), so a graph that does not hold at
some size runs there anyway: the prefill's graph at a decode step's length 1 gives wrong
tokens.  The guards fall in two kinds, and this filter treats them apart:

* **Guards about declared inputs**: Dynamo's one shape guard (``SHAPE_ENV``: every symbolic
  size's range, the equalities of sizes one symbol stands for, and every shape guard the
  trace added), and the guards on an input the spec declares (a tensor's ``TENSOR_MATCH``:
  its dtype, its strides, its static sizes, a declared size this compile specialized; a
  declared int's value).  The shape guard is dropped when everything it checks is proved
  over the declared ranges and assumptions of ``verishape.compile(..., shapes_spec=...)``
  (:mod:`verishape.compiler.declared`); the guards on declared inputs are always kept (a
  served decoder's KV cache is transposed on the first decode step and contiguous after:
  its strides, checked there, are not declared sizes).  So a compile generic for sizes from 2, where the space declares 1, keeps
  its shape guard (``2 <= batch`` fails at 1): the size-1 call misses the entry and is served
  by a proved reuse or a compile of its own, never by a graph nobody checked at 1.
* **Every other guard** (module identities, parameters, globals, grad mode): the declaration
  says nothing about them.  They are kept, or, where the caller passes ``unsafe=`` (one of
  torch's ``*_unsafe`` filters, or their own), decided by it: that is the caller's promise,
  as it is with torch's filters.

The rule is Note [A dropped guard is a proved guard] (docs/architecture.md): the filter
returns False for the shape guard only with a proof record of everything it checks over the
declared space; the decision, with the first unproved fact and its counterexample where the
guard stays, is in ``verishape.explain``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import sympy

from verishape.core import torch_seam
from verishape.core.errors import UsageError
from verishape.core.premises import Premises, Verdict, finite
from verishape.core.sources import describe
from verishape.proofs.kinds import Decision

from . import declared as declared_sizes

log = logging.getLogger("verishape")

#: the guard type of Dynamo's one guard over every symbolic size
SHAPE_GUARD = "SHAPE_ENV"


class GuardEntry(Protocol):
    """What torch passes a guard filter per guard (``torch._dynamo.types.GuardFilterEntry``)."""

    name: str
    guard_type: str
    orig_guard: Any


GuardFilter = Callable[[Sequence[Any]], Sequence[bool]]


def proved_guard_filter(unsafe: GuardFilter | None = None) -> ProvedGuardFilter:
    """A ``guard_filter_fn`` for ``verishape.compile(..., shapes_spec=...,
    options={"guard_filter_fn": ...})``: the shape guard is dropped where it is proved to hold
    on the declared space, the guards on declared inputs stay, and every other guard is kept,
    or decided by ``unsafe`` (a torch guard filter: its promise)."""
    if unsafe is not None and not callable(unsafe):
        raise UsageError(f"verishape.proved_guard_filter: unsafe={unsafe!r} is not a guard filter (a function of "
                         "torch's guard entries, such as torch.compiler.skip_guard_on_all_nn_modules_unsafe)")
    return ProvedGuardFilter(unsafe)


@dataclasses.dataclass(frozen=True)
class ProvedGuardFilter:
    """See :func:`proved_guard_filter` and Note [A dropped guard is a proved guard]."""

    unsafe: GuardFilter | None = None

    def __call__(self, entries: Sequence[GuardEntry]) -> list[bool]:
        site = torch_seam.guard_build_site()
        others = self._others(entries)
        if site is None:
            _say_once("verishape.proved_guard_filter was called outside Dynamo's guard builder: every guard "
                      "about sizes kept")
            return [True if _about_sizes(e) else keep for e, keep in zip(entries, others)]
        frame = Frame.of(site)
        return [frame.keeps(e) if _about_sizes(e) else True if frame.pins(e) else keep
                for e, keep in zip(entries, others)]

    def _others(self, entries: Sequence[GuardEntry]) -> list[bool]:
        if self.unsafe is None:
            return [True] * len(entries)
        out = list(self.unsafe(entries))
        if len(out) != len(entries) or not all(type(k) is bool for k in out):
            raise UsageError(f"verishape.proved_guard_filter: unsafe={getattr(self.unsafe, '__name__', self.unsafe)!r} "
                             f"returned {len(out)} value(s) for {len(entries)} guard(s), not one bool each (a guard filter "
                             "returns one True or False per guard)")
        return out


def _about_sizes(entry: GuardEntry) -> bool:
    return entry.guard_type == SHAPE_GUARD


@dataclasses.dataclass(frozen=True)
class Frame:
    """The frame whose guards are filtered: its declaration, env and inputs."""

    code: Any
    declared: declared_sizes.Declared | None
    env: Any
    #: each input Dynamo tracked: its source and fake value, by the source's name
    fakes: dict[str, tuple[Any, Any]]

    @classmethod
    def of(cls, site: torch_seam.GuardBuildSite) -> Frame:
        graph = site.output_graph
        declared = declared_sizes.of_backend(getattr(graph, "compiler_fn", None))
        fakes = {torch_seam.source_name(tf.source): (tf.source, tf.fake) for tf in getattr(graph, "tracked_fakes", ())}
        return cls(site.code, declared, getattr(graph, "shape_env", None), fakes)

    def pins(self, entry: GuardEntry) -> bool:
        """Whether ``entry`` is a guard on an input the spec declares (its dtype, layout and
        static sizes, a declared size this compile specialized, a declared int's value):
        always kept, whatever ``unsafe`` says (Note [A dropped guard is a proved guard])."""
        source = getattr(entry.orig_guard, "originating_source", None)
        return self.declared is not None and source is not None and self.declared.leaf(source, self.code) is not None

    def keeps(self, entry: GuardEntry) -> bool:
        """Whether the shape guard stays (Note [A dropped guard is a proved guard]).  A
        failure here is a verishape bug: said loudly, and the guard stays."""
        if self.env is None:
            return True
        try:
            return self._keeps()
        except Exception as exc:  # noqa: BLE001 - reported as a bug; keeping the guard is stock's behaviour
            log.warning("verishape: proved_guard_filter failed on the shape guard of %s, kept (this is a verishape "
                        "bug): %r", self.code.co_name, exc)
            return True

    def _keeps(self) -> bool:
        if self.declared is None:
            self._note("the shape guard kept: this compile declares no sizes (verishape.compile(..., "
                       "shapes_spec=...))")
            return True
        checked = self._checked()
        if isinstance(checked, str):
            self._note(f"the shape guard kept: {checked}")
            return True
        checked, witness = checked
        # the call's own sizes as the witness: a fact a nearby declared size breaks (``2 <=
        # batch`` at 1) is refuted without the solver (solvers/refute.py)
        premises = Premises.stated(self._space(), witness=witness)
        answer = premises.answer(sympy.And(*(fact for fact, _ in checked)), Decision.GUARD_FILTERED,
                                 where=f"the shape guard of {self.code.co_name}")
        if answer.verdict is Verdict.PROVED and answer.record is not None:
            self.env.verishape_log.add(answer.record)  # (a declaration is a verishape backend's: a VeriShapeEnv)
            self._note(f"the shape guard dropped: its {len(checked)} fact(s) proved over the declared space")
            return False
        if answer.verdict is Verdict.CONTRADICTORY:
            self._note("the shape guard kept: the declared space is empty")
            return True
        self._note(f"the shape guard kept: {self._first_open(premises, checked)}")
        return True

    def _sources(self) -> dict[sympy.Symbol, list[Any]]:
        return dict(getattr(self.env, "var_to_sources", {}) or {})

    def _term(self, source: Any) -> sympy.Basic | None:
        """A size's declared variable (or declared constant), None where it is not declared."""
        from torch._dynamo.source import TensorProperty, TensorPropertySource

        assert self.declared is not None
        if isinstance(source, TensorPropertySource):
            if source.prop is not TensorProperty.SIZE or source.idx is None:
                return None
            leaf = self.declared.leaf(source.base, self.code)
            fake = self.fakes.get(torch_seam.source_name(source.base), (None, None))[1]
            if not isinstance(leaf, tuple) or fake is None or len(leaf) != fake.dim() or source.idx >= len(leaf):
                return None
            leaf = leaf[source.idx]
        else:
            leaf = self.declared.leaf(source, self.code)
        if isinstance(leaf, declared_sizes.Dim):
            return sympy.Symbol(leaf.name, integer=True)
        return sympy.Integer(leaf) if isinstance(leaf, int) and not isinstance(leaf, bool) else None

    def _checked(self) -> tuple[list[tuple[sympy.Basic, str]], dict[sympy.Symbol, int]] | str:
        """What the shape guard checks, over the declared variables, each with its words:
        every input's symbolic size, stride and storage offset equals its expression (so the
        sizes one symbol stands for are equal; a symbolic stride is a layout, never a
        declared size), each replaced size equals its replacement, each shape guard holds,
        each symbol lies in its range; with the call's value of each declared variable the
        frame binds.  A string (why not) where something it checks is not a declared size."""
        #: (source, its value's expression in the env's symbols): what the guard equates
        equal: list[tuple[Any, sympy.Basic]] = [(src, symbol) for symbol, sources in self._sources().items()
                                                 for src in sources]
        for source, fake in self.fakes.values():
            equal += _symbolic_properties(source, fake)
        terms = [self._term(src) for src, _ in equal]
        for (src, _), term in zip(equal, terms):
            if term is None:
                return f"it checks {torch_seam.source_name(src)}, which no declared size states"
        sub: dict[sympy.Symbol, sympy.Basic] = {}
        for (_, expr), term in zip(equal, terms):
            if isinstance(expr, sympy.Symbol):
                sub.setdefault(expr, term)
        #: in the env's symbols, renamed to the declared variables (one ``xreplace`` each)
        own: list[tuple[sympy.Basic, str]] = [
            (sympy.Eq(symbol, replacement), f"the replacement {symbol} -> {replacement}")
            for symbol, replacement in self.env.replacements.items() if symbol in sub and replacement != symbol]
        own += [(g.expr, f"the guard {describe(g.expr, self.env)}") for g in self.env.guards]
        for symbol in sub:
            vr = self.env.var_to_range.get(symbol)
            if vr is not None and finite(vr.lower):
                own.append((sympy.Le(int(vr.lower), symbol), f"the range {vr.lower} <= {describe(symbol, self.env)}"))
            if vr is not None and finite(vr.upper):
                own.append((sympy.Le(symbol, int(vr.upper)), f"the range {describe(symbol, self.env)} <= {vr.upper}"))
        stated = [(sympy.Eq(term, sympy.sympify(expr).xreplace(sub)), f"{torch_seam.source_name(src)} == "
                   f"{describe(expr, self.env)}") for (src, expr), term in zip(equal, terms)]
        stated += [(sympy.sympify(fact).xreplace(sub), why) for fact, why in own]
        names = {sympy.Symbol(d.name, integer=True) for d in self.declared.dims()}
        unique: dict[sympy.Basic, str] = {}
        for fact, why in stated:
            if not fact.free_symbols <= names:
                return f"{why} names a size that is not declared"
            if fact is not sympy.true:
                unique.setdefault(fact, why)
        hints = getattr(self.env, "backed_var_to_val", {}) or {}
        witness = {term: int(hints[symbol]) for symbol, term in sub.items()
                   if isinstance(term, sympy.Symbol) and symbol in hints}
        return list(unique.items()), witness

    def _space(self) -> list[sympy.Basic]:
        """The declared space: each declared variable in its range, and the assumptions."""
        assert self.declared is not None
        facts: list[sympy.Basic] = []
        for d in self.declared.dims():
            v = sympy.Symbol(d.name, integer=True)
            facts.append(sympy.Le(d.low, v))
            if d.high is not None:
                facts.append(sympy.Le(v, d.high))
        return facts + list(self.declared.assumptions)

    def _first_open(self, premises: Premises, checked: list[tuple[sympy.Basic, str]]) -> str:
        """The first fact not proved on its own, with the solver's counterexample."""
        for fact, why in checked:
            answer = premises.answer(fact, Decision.GUARD_FILTERED)
            if answer.verdict is not Verdict.PROVED:
                result = answer.result
                at = (f", false at {', '.join(f'{k}={v}' for k, v in sorted(result.counterexample.items()))}"
                      if result is not None and result.counterexample else
                      f" ({result.status}: {result.reason})" if result is not None else "")
                return f"{why} is not implied by the declared space{at}"
        return "the facts are proved one by one, not together (solver unknown)"

    def _note(self, line: str) -> None:
        decisions = getattr(self.env, "verishape_log", None)  # (a stock ShapeEnv: torch.compile's own frame)
        if decisions is not None:
            decisions.filtered.append(line)
        log.info("verishape: %s: %s", self.code.co_name, line)


_said: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        log.warning(line)


def _symbolic_properties(source: Any, value: Any) -> list[tuple[Any, sympy.Basic]]:
    """An input's symbolic sizes, strides and storage offset (an int input's value), each
    with its source: the shape guard checks each equals its expression."""
    import torch
    from torch._dynamo.source import TensorProperty, TensorPropertySource
    from torch._subclasses.fake_tensor import FakeTensor

    def symbolic(n: Any) -> sympy.Basic | None:
        return n.node.expr if isinstance(n, torch.SymInt) and n.node.maybe_as_int() is None else None

    if isinstance(value, torch.SymInt):
        expr = symbolic(value)
        return [(source, expr)] if expr is not None else []
    if not isinstance(value, torch.Tensor):
        return []
    if type(value) is not FakeTensor:
        # a tensor subclass: the guard checks its inner tensors' sizes too, under sources
        # no declaration names (kept)
        return [(source, sympy.Symbol(f"{torch_seam.source_name(source)} (a tensor subclass)"))]
    out = []
    for prop, values in ((TensorProperty.SIZE, value.shape), (TensorProperty.STRIDE, value.stride())):
        for i, n in enumerate(values):
            if (expr := symbolic(n)) is not None:
                out.append((TensorPropertySource(source, prop, i), expr))
    if (expr := symbolic(value.storage_offset())) is not None:
        out.append((TensorPropertySource(source, TensorProperty.STORAGE_OFFSET), expr))
    return out
