"""What a size-1 call must prove before it runs a generic artifact: the generic frame's
guards, the generic ranges of its other sizes and every recorded lowering answer, all at
1, from the guards and ranges the size-1 trace installs (:mod:`verishape.compiler.widen.reuse`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import sympy
from torch.utils._sympy.value_ranges import bound_sympy

from verishape.core.premises import Premises, range_facts
from verishape.proofs.kinds import Decision

from . import lowered_sizes
from .canon import NotWidened
from .binding import Binding
from .sizes import at_one, by_source, source_names

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from .kept import Kept


def goal_of(expr: sympy.Basic, answer: sympy.Basic) -> sympy.Basic:
    if answer is sympy.true:
        return expr
    if answer is sympy.false:
        return sympy.Not(expr)
    return sympy.Eq(expr, answer)


def answer_goals(k: Kept, sub: dict[sympy.Symbol, sympy.Basic]) -> list[tuple[sympy.Basic, list[sympy.Basic], str]]:
    """Per recorded lowering answer: (goal at 1, its own extra premises, description).
    A broadcast's "not size 1" is also harmless where the two sizes compared are equal."""
    out = []
    for q in (k.questions.questions if k.questions is not None else ()):
        goal = goal_of(q.expr, q.answer)
        if (moot := q.moot(sub)) is not None:
            goal = sympy.Or(goal, moot[1])
        # index variables as plain integers first: SymPy folds ``q0 >= 0`` of a non-negative q0 to
        # True, a premise lost once the prover renames symbols to plain ones (a ModularIndexing unproved)
        plain = {s: sympy.Symbol(s.name, integer=True) for s, _ in q.extra_ranges if isinstance(s, sympy.Symbol)}
        extra = [*(a.xreplace(plain) for a in q.axioms),
                 *(bound(plain.get(s, s), end) for s, vr in q.extra_ranges
                   for bound, end in ((sympy.Ge, vr.lower), (sympy.Le, vr.upper)) if end.is_finite)]
        what = q.describe()
        out.append((at_one(goal.xreplace(plain), sub, f"the lowering's answer {what}"),
                    [at_one(e, sub, f"a premise of the lowering's answer {what}") for e in extra], what))
    return out


@dataclasses.dataclass(frozen=True)
class AtOne:
    """What :func:`prove_at_one` proved, built once when it holds."""

    #: the proof record of the goals together (None: nothing was left to prove)
    record: Any
    #: the goals proved (generic guards, ranges, lowering answers, sizes), at the point
    goals: tuple[sympy.Basic, ...]
    #: how many of them are the lowering's recorded answers
    answers: int
    #: goals the new trace did not imply (generic guards, unguarded answers) carried into its guards: descriptions
    carried: tuple[str, ...] = ()
    #: those guards in the new trace's symbols, for the new entry to install once the reuse holds
    install: tuple[sympy.Basic, ...] = ()
    #: how many of a candidate's unguarded answers were proved with the rest, standing in for
    #: its AOT trace (Note [A candidate's answers stand in for its AOT trace]); None: not proved
    unguarded: int | None = None


def prove_at_one(k: Kept, binding: Binding, nested_env: ShapeEnv, prover: Any, what: str,
                 unguarded: bool = False) -> AtOne:
    """The module docstring's goals at the binding's point, from the new trace's guards and ranges (symbols
    renamed to the generic ones by source): what was proved (``what`` names the reuse in the record), or
    :class:`NotWidened`.  ``unguarded``: the candidate's unguarded answers too (:func:`unguarded_goals`)."""
    env = k.env
    to_generic = _to_generic(env, binding.names, nested_env)
    nested_ranges = {to_generic[s]: vr for s, vr in nested_env.var_to_range.items() if s in to_generic}
    sub = binding.point(env)
    guard_goals = _generic_goals(env, sub, set(binding.widened), set(to_generic.values()))
    replaced = {**{s: at_one(env.replace(s), sub, f"the replacement of {s}") for s in env.replacements}, **sub}
    answers = answer_goals(k, replaced)
    goals = [*guard_goals, *((goal, f"the lowering's answer {why}") for goal, extra, why in answers if not extra),
             *size_goals(k, set(binding.widened), replaced, nested_ranges)]
    goals = [(g, why) for g, why in goals if g is not sympy.true]
    if false := [why for g, why in goals if g is sympy.false]:
        raise NotWidened(f"false at size 1: {false[0]}")
    stand_in = unguarded_goals(k, replaced) if unguarded else None
    # what the new entry checks, once, over plain symbols covering every goal and extra premise
    covered = [*(g for g, _ in goals), *(e for goal, extra, _ in answers for e in (goal, *extra))]
    premises = Premises.of_trace(nested_env, to_generic, [*covered, *(stand_in or ())])
    if premises is None and stand_in is not None:
        stand_in, premises = None, Premises.of_trace(nested_env, to_generic, covered)
    if premises is None:
        raise NotWidened("the new trace's facts cannot be stated over plain symbols (two would merge)")
    # answers with premises of their own (index-variable bounds) one by one; the rest join the guards
    for goal, extra, why in answers:
        if extra and goal is not sympy.true and _prove_one(prover, premises, goal, why, extra) is None:
            raise NotWidened(f"a shape answer the lowering acted on is not proved at 1: {why}")
    proved = AtOne(None, (), len(answers))
    if goals:  # generic guards the new trace does not imply are carried, never the answers
        proved = _carrying(proved, goals, {id(g) for g, _ in guard_goals}, premises, to_generic, prover, what)
    if stand_in is None or sympy.false in stand_in:
        return proved
    return _standing_in(proved, stand_in, premises, to_generic, prover, what)


def _standing_in(proved: AtOne, stand_in: tuple[sympy.Basic, ...], premises: Premises,
                 to_generic: dict[sympy.Symbol, sympy.Symbol], prover: Any, what: str) -> AtOne:
    """``proved`` with the candidate's unguarded answers proved too (:func:`_carrying`, each answer carriable), or
    ``proved`` as it is (the AOT graph is then compared): Note [A candidate's answers stand in for its AOT trace]."""
    if not stand_in:
        return dataclasses.replace(proved, unguarded=0)
    answers = [(g, f"the candidate's unguarded answer {g}") for g in stand_in]
    try:
        return dataclasses.replace(_carrying(proved, answers, {id(g) for g in stand_in}, premises, to_generic,
                                             prover, what), unguarded=len(stand_in))
    except NotWidened:
        return proved


def unguarded_goals(k: Kept, sub: dict[sympy.Symbol, sympy.Basic]) -> tuple[sympy.Basic, ...] | None:
    """Note [A candidate's answers stand in for its AOT trace]: at the point ``sub``, the candidate's unguarded answers
    (:attr:`Kept.unguarded`) and the lower bound 2 of each size it kept symbolic at 1; None where there are none (not a
    candidate lowered here) or one cannot be stated there (a division by a size that is 0)."""
    if k.unguarded is None or k.at_one is None:
        return None
    env = k.env
    asked = [sympy.Ge(env.replace(s), 2) for s in sorted(k.at_one.symbols, key=str)]
    asked += [goal_of(env.replace(e), sympy.true if a else sympy.false) for e, a in k.unguarded]
    try:
        goals = [at_one(g, sub, "a candidate's unguarded answer") for g in asked]
    except NotWidened:
        return None
    return tuple(dict.fromkeys(g for g in goals if g is not sympy.true))


def _to_generic(env: ShapeEnv, names: dict[str, str], nested_env: ShapeEnv) -> dict[sympy.Symbol, sympy.Symbol]:
    """Each symbol of the new trace -> the generic symbol its first source binds to (``names``:
    :attr:`Binding.names`; a view's unread base is not in it, ``binding._unread_bases``)."""
    by_name = by_source(env, env.var_to_sources)
    return {s: by_name[names[ns[0]]] for s in nested_env.var_to_sources
            if (ns := source_names(nested_env, s)) and ns[0] in names}


def _generic_goals(env: ShapeEnv, sub: dict[sympy.Symbol, sympy.Basic], widened: set[sympy.Symbol],
                   matched: set[sympy.Symbol]) -> list[tuple[sympy.Basic, str]]:
    """The generic guards and the generic ranges of the sizes not widened, at the point."""
    goals = [(at_one(env.replace(g.expr), sub, f"the generic guard {g.expr}"), f"the generic guard {g.expr}")
             for g in env.guards]
    # left out: a view input's base sized in the generic trace alone (``binding._unread_bases``: nothing
    # reads it), whose range is about nothing the artifact computes with
    others = {s: vr for s, vr in env.var_to_range.items() if s not in widened and env.var_to_sources.get(s)
              and (s in matched or not all("._base." in n for n in source_names(env, s)))}
    # a replaced symbol's range is about what replaced it (the premises name sources by the
    # symbol that replaced theirs): written in the replacement, as the guards are
    return goals + [(at_one(env.replace(r), sub, f"the generic range {r}"), f"the generic range {r}{_named(env, r)}")
                    for r in range_facts(others.keys(), others)]


def _carrying(proved: AtOne, goals: list[tuple[sympy.Basic, str]], carriable: set[int], premises: Premises,
              to_generic: dict[sympy.Symbol, sympy.Symbol], prover: Any, what: str) -> AtOne:
    """``proved`` with ``goals`` proved too, together with its own (the guards it carries premises); where not, each of
    ``goals`` alone, or a refusal naming the first goal that fails.  One the new trace does not imply is carried into
    its guards (:attr:`AtOne.install`, checked once the proof holds) where ``carriable`` names it, it holds at this call
    and names only sizes the new trace has (docs/compile.md, "What the generic artifact depends on, carried")."""
    together = (*proved.goals, *(g for g, _ in goals))
    # a goal -> (its description, the guard the new entry installs): those ``proved`` carries
    # already (generic guards the call's trace does not imply), then those carried here
    carried = {guard.xreplace(to_generic): (why, guard) for why, guard in zip(proved.carried, proved.install)}
    before = len(carried)
    record = _prove_one(prover, premises, sympy.And(*together), what, carried)
    if record is None:
        # the new call's values of the generic symbols (the premises' witness, from plain symbols)
        from_plain = {p: s for s, p in premises.to_plain.items()}
        hints = {from_plain.get(s, s): int(v) for s, v in (premises.witness or {}).items()}
        to_nested = {g: n for n, g in to_generic.items()}
        for g, why in goals:
            if _prove_one(prover, premises, g, why, carried) is not None:
                continue
            if id(g) not in carriable or not g.free_symbols <= to_nested.keys() or g.xreplace(hints) is not sympy.true:
                raise NotWidened(f"not implied at size 1 by the size-1 trace's guards: {why}")
            carried[g] = (why, g.xreplace(to_nested))
        if len(carried) > before:
            record = _prove_one(prover, premises, sympy.And(*together), what, carried)
        if record is None:
            raise NotWidened("the generic guards and answers at 1 are not proved together (solver unknown)")
    return dataclasses.replace(proved, record=record, goals=together, carried=tuple(w for w, _ in carried.values()),
                               install=tuple(guard for _, guard in carried.values()))


def _named(env: ShapeEnv, fact: sympy.Basic) -> str:
    """`` (s5: L['x'].size()[0])``: the input sources of a fact's symbols, for a refusal."""
    named = [f"{s}: {source_names(env, s)[0]}" for s in sorted(fact.free_symbols, key=str) if source_names(env, s)]
    return f" ({', '.join(named)})" if named else ""


def install(env: ShapeEnv, guards: list[sympy.Basic]) -> None:
    """Install :attr:`AtOne.install` once the proof is done, each checked to hold at this call first."""
    for g in guards:
        if g.xreplace(env.backed_var_to_val) is not sympy.true:
            raise NotWidened(f"{g} does not hold at this call: not installed as a guard")
    for g in guards:
        if env.evaluate_expr(g) is not sympy.true:
            raise NotWidened(f"{g} was not installed as a guard of this trace")


def size_goals(k: Kept, merged: set[sympy.Symbol], sub: dict[sympy.Symbol, sympy.Basic],
               ranges: dict[sympy.Symbol, Any]) -> list[tuple[sympy.Basic, str]]:
    """For an Inductor artifact: every size it computes with is at least 1 at 1
    (:mod:`verishape.compiler.widen.lowered_sizes`), less those the size-1 trace's ranges bound (a
    cheap tier).  :class:`NotWidened` where the lowering's sizes were not all read."""
    if k.backend != "inductor":
        return []  # no lowering: the graph runs op by op, with eager's own checks at every size
    uses = k.questions.sizes if k.questions is not None else None
    if uses is None or not uses.graph_read:
        raise NotWidened("the sizes of the AOT graph Inductor lowered were not read")
    if uses.scheduled == 0 and not uses.graph_calls:
        return []  # nothing to compute: Inductor runs such a graph as it is, without lowering it
    if uses.scheduled == 0:
        raise NotWidened("the sizes Inductor's generated code computes with were not read")
    if uses.incomplete:
        raise NotWidened(f"the sizes Inductor's generated code computes with were not all read: {uses.incomplete}")
    return [(goal, what) for goal, what in lowered_sizes.goals(uses.entries, merged, sub)
            if not (isinstance(goal, sympy.Ge) and goal.rhs == 1 and goal.lhs.free_symbols <= ranges.keys()
                    and bound_sympy(goal.lhs, ranges).lower >= 1)]


def _prove_one(prover: Any, premises: Premises, goal: sympy.Basic, what: str,
               extra: Iterable[sympy.Basic] = ()) -> Any:
    """A proof record when ``premises`` and ``extra`` imply ``goal``, not vacuously; else None."""
    with premises.assuming(*extra):
        return premises.ask(goal, Decision.SPECIALIZATION_WIDENED, where=what, prover=prover)
