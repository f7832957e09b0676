"""The shape answers a lowering acted on that hold only for sizes of at least 2 (docs/compile.md, "Inductor's answers").

:class:`QuestionLog`, installed on the env while a generic compile is lowered (:func:`recording`), asks each static
answer about a candidate symbol (``ShapeEnv._maybe_evaluate_static``) again with the candidates' lower bounds 1: an
unchanged answer holds at 1 by construction; a changed one is kept with its extra premises and where it was asked, to
be decided at 1 (:func:`verishape.compiler.widen.reuse.reuse`).  Guards the lowering adds are in the env's guard list,
proved at 1 as a whole; answers asked inside a layout computation: :mod:`verishape.compiler.widen.recompute`; size
hints: :func:`_observe_hint`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import sympy
from torch.utils._sympy.value_ranges import ValueRanges

from verishape.core import torch_names, torch_seam
from verishape.core.shape_env import VeriShapeEnv

from . import lowered_sizes, recompute

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

#: Where a lowering's answer may differ at 1 without changing what the artifact computes, by the Inductor function
#: that asked (a dotted key is a qualified name, matched on Python 3.11+): why, and the local variables (or a function
#: of the locals) holding the two sizes whose equality makes the answer moot (None: moot for either answer).
SITES: dict[str, tuple[str, Any]] = {
    # "is y 1?" picks x, "is x 1?" picks y, else x == y is checked: where x == y every branch agrees
    "broadcast_symbolic_shapes": ("a broadcast between sizes equal at 1", ("x", "y")),
    # expand(input, target) when "is a 1?" != "is b 1?": an input of the target's size is the same expanded
    "broadcast_tensors": ("an expand between sizes equal at 1", ("a", "b")),
    # every branch ends in check_equals guards on the merged sizes (generic guards, proved at 1), and
    # an index modulo or divided by a size 1 is still right (torch documents it safe for unbacked sizes)
    "compare_sizes": ("reshape index math, right for either answer where its check_equals guards hold", None),
    # "is the old dimension 1?" picks stride 0 or its own: where the new size equals the old one at 1,
    # the dimension is 1 there and its stride addresses nothing
    "ExpandView.create": ("an expand of a dimension to its own size, which is 1 there",
                          lambda L: (L["new_size"][len(L["new_stride"])], L["size"])),
    "ExpandView._normalize_size": ("a sanity check of an expand's sizes, which it returns unchanged", None),
    "need_use_acc_helper": ("a summation-accuracy choice (a cascade accumulator or a plain one); both compute "
                            "the sum", None),
    # a replacement's equivalence is the pattern's own contract
    "refresh_arg": ("which sizes a pattern's retrace takes as inputs (it decides only whether a replacement "
                    "matches; a matched replacement is equivalent at every size)", None),
    "argsort_sym": ("a layout heuristic (torch documents argsort_sym's order as optimization-only)", None),
    # the values it re-derives are the AOT graph's, compared at 1 node by node (sizes, strides of
    # outputs and of every dimension larger than 1, storage sharing)
    "fake_tensor_prop": ("a re-derivation of the AOT graph's metadata, compared at 1", None),
}


CHECK_FN = "register_replacement.<locals>.check_fn"

#: Functions whose own branch conditions (the innermost site; not the functions they call) only
#: choose among results each right wherever its own checks hold: why, and which questions it covers.
DIRECT_SITES: dict[str, tuple[str, Callable[[Question], bool]]] = {
    # torch 2.11's check_fn asks in its own body what 2.13's ``refresh_arg`` asks (:data:`SITES`)
    CHECK_FN: (SITES["refresh_arg"][0], lambda q: True),
    # check_fn retraces the search pattern (``fwd_only``) only to rebuild it (``fx_to_pattern`` reads
    # ops, arguments and, from 2.15, ``meta["val"]``), then drops it: make_fx's ``meta["tensor_meta"]``
    # (contiguity per memory format: ``Eq(s, 1)`` on 2.15's decode step) is read by nothing.  Only
    # below ``fwd_only`` called by check_fn (:func:`_site` names its trace of the replacement apart)
    "_extract_tensor_metadata": ("tensor metadata of the pattern matcher's retrace, read by nothing (its pattern "
                                 "reads ops, arguments and sizes)",
                                 lambda q: ("fwd_only", CHECK_FN) in zip(q.site[1:], q.site[2:])),
    # the SIMD kernel's memory statistics, read only by ``add_persistent_rblock`` (speed only)
    "StatsForReadsOrWrites.compute": ("memory statistics for a kernel heuristic (an extra autotuning config of a "
                                      "looped reduction, which loops over any length)", lambda q: True),
    # its one size test, in its own body, is whether a value it may fold into ``full`` is contiguous
    # (``is_contiguous``: "is this dimension 1?").  "No" only makes the test stricter: a fold it allows is
    # allowed at 1 too (a dimension of 1 may have any stride), and one it refuses leaves the node as it was
    "constant_fold_uniform_value": ("a contiguity test before a uniform value is folded into a full tensor (a "
                                    "stricter test folds less; a fold computes the same value)",
                                    lambda q: q.answer is sympy.false and isinstance(q.expr, sympy.Eq)
                                    and sympy.S.One in q.expr.args),
    # every branch builds an exact decomposition index = size2*i1 + i2 of the same space, checked on its own:
    # ``add_range``'s statically_known_multiple_of and the final ``guarding_hint_or_throw(remaining) == 1`` are answers
    # proved at 1, loop ranges >= 1 the size rule.  Not "this size is 1" held True: it drops the index variable, right
    # only where the size is 1 (``Max(1, 3 - s)`` is 1 for every s >= 2, not at 1), so it is proved at 1 like any other
    "_split_iteration_ranges": ("a tiling split (which exact decomposition of the iteration space; its divisors, "
                                "its use of every group and its sizes are checked at 1 on their own)",
                                lambda q: not (isinstance(q.expr, sympy.Eq) and q.answer is sympy.true)),
}


@dataclasses.dataclass(frozen=True)
class Question:
    """One static answer that needed a lower bound of 2."""

    expr: sympy.Basic
    answer: sympy.Basic
    #: ranges the caller passed for symbols the env does not bound (index variables)
    extra_ranges: tuple[tuple[sympy.Symbol, ValueRanges], ...]
    axioms: tuple[sympy.Basic, ...]
    #: Inductor functions on the way to the question, innermost first (``sizevars.py``'s own left out)
    site: tuple[str, ...]
    #: for a site of :data:`SITES` that names two sizes: their values where it was asked
    operands: tuple[sympy.Expr, sympy.Expr] | None = None
    #: the layout computation the question was asked in, if any: the answer is moot where its result is right at 1
    computed_in: Any = None
    #: how the caller reads the answer (a value of :data:`NON_GUARDING_READS`; None: as given)
    reading: str | None = None

    def describe(self) -> str:
        where = " <- ".join(self.site[:3]) or "?"
        return f"{self.expr} answered {self.answer} (asked in {where})"

    def moot(self, sub: dict[sympy.Symbol, sympy.Basic]) -> tuple[str, sympy.Basic] | None:
        """When the answer does not matter where it was used (``sub`` sets the widened sizes): why, and the condition
        (``true``, or two sizes being equal) under which it does not.  Any one reason will do: the layout computation
        it was asked in is right at 1, or a site of :data:`DIRECT_SITES` or :data:`SITES` it was asked in says so."""
        if self.computed_in is not None and self.computed_in.right_at(sub):
            return self.computed_in.why, sympy.true
        if self.site and self.site[0] in DIRECT_SITES and DIRECT_SITES[self.site[0]][1](self):
            return DIRECT_SITES[self.site[0]][0], sympy.true
        why, names = next((SITES[name] for name in self.site if name in SITES), (None, None))
        if why is None or (names is not None and self.operands is None):
            return None
        return why, (sympy.true if names is None else sympy.Eq(*self.operands))


@dataclasses.dataclass
class QuestionLog:
    """What a lowering asked about ``candidates`` whose answer depends on their lower bound 2."""

    candidates: frozenset[sympy.Symbol]
    questions: list[Question] = dataclasses.field(default_factory=list)
    #: reads of a kept size's optimization hint, per Inductor function: heuristics (torch
    #: documents ``optimization_hint`` as for non-guarding optimizations), counted, not checked
    heuristic_hints: dict[str, int] = dataclasses.field(default_factory=dict)
    #: the sizes the lowered code computes with (:mod:`verishape.compiler.widen.lowered_sizes`)
    sizes: lowered_sizes.SizeUses = dataclasses.field(default_factory=lowered_sizes.SizeUses)
    #: the candidates' ranges with the lower bound 1: what the lowering's direct range
    #: reads (``bound_sympy``) see while the log is installed (:func:`recording`)
    widened: dict[sympy.Symbol, ValueRanges] = dataclasses.field(default_factory=dict)
    _seen: set[Any] = dataclasses.field(default_factory=set)
    #: each answer kept, by its expression and its key in ``_seen`` -> its records, one per place asked (:meth:`_again`)
    _kept: dict[sympy.Basic, dict[Any, list[Question]]] = dataclasses.field(default_factory=dict)
    _busy: bool = False

    def observe(self, env: ShapeEnv, base_static: Any, expr: sympy.Basic, answer: sympy.Basic, *,
                size_oblivious: bool, axioms: tuple[sympy.Basic, ...] | None,
                var_to_range: tuple[tuple[sympy.Symbol, ValueRanges], ...] | None, fallback: bool | None = None) -> None:
        """Called with every static answer of the env while the log is installed (``fallback``: the value a
        ``guard_or_*`` question falls back to, which its caller reads as :data:`FALLBACK_READS` says)."""
        if self._busy or not (expr.free_symbols & self.candidates):
            return
        reading = _reading() or FALLBACK_READS.get(fallback)
        key = (expr, size_oblivious, axioms, var_to_range, reading)
        if key in self._seen:
            self._again(self._kept.get(expr, {}).get(key))
            return
        self._seen.add(key)
        ranges = dict(var_to_range) if var_to_range is not None else dict(env.var_to_range)
        widened = {**ranges, **from_one(ranges, self.candidates)}
        self._busy = True
        try:
            # a size-oblivious question about a size-like candidate (kept symbolic at 1, ``candidate.py``)
            # was answered assuming it is at least 2: asked again without that assumption
            oblivious = size_oblivious and not (expr.free_symbols & self.candidates & getattr(env, "size_like", set()))
            again = base_static(env, expr, size_oblivious=oblivious, axioms=axioms, var_to_range=tuple(widened.items()))
        finally:
            self._busy = False
        if again == answer or (reading is not None and _same_action(reading, again, answer)):
            return  # the caller acts the same on both answers: the same decision with the lower bound 1
        extra = tuple((s, vr) for s, vr in ranges.items() if s not in env.var_to_range)
        site, operands = _site()
        kept = Question(expr, answer, extra, tuple(axioms or ()), site, operands, recompute.computing.get(), reading)
        self.questions.append(kept)
        self._kept.setdefault(expr, {})[key] = [kept]

    def asked(self, expr: sympy.Basic, fallback: bool | None = None) -> None:
        """``evaluate_expr`` was asked ``expr`` (``fallback``: its ``fallback_value``): torch may answer from its memo,
        below which nothing is observed, so each answer kept for it, read so, is recorded where it is asked now too."""
        by_key = self._kept.get(expr)  # (every evaluate_expr of a lowering passes here: a miss costs one lookup)
        reading = FALLBACK_READS.get(fallback)
        for key, kept in by_key.items() if by_key else ():
            if key[-1] == reading:
                self._again(kept)

    def _again(self, kept: list[Question] | None) -> None:
        """An answer kept, asked again: recorded again unless it was recorded at this site, with these operands and in
        this layout computation.  Where a question may be moot depends on where it was asked (:meth:`Question.moot`),
        so an answer asked first where it is moot and acted on elsewhere is checked at 1 there."""
        if not kept or self._busy:
            return
        site, operands = _site()
        computed_in = recompute.computing.get()
        if any(q.site == site and q.operands == operands and q.computed_in is computed_in for q in kept):
            return
        again = dataclasses.replace(kept[0], site=site, operands=operands, computed_in=computed_in)
        kept.append(again)
        self.questions.append(again)


#: Callers of ``_maybe_evaluate_static`` that never guard (named in ``torch_names.WIDENING_REGISTRY``), (file tail,
#: function) -> which answers they act on: "true" (``statically_known*``, and ``guard_or_false`` under
#: backed-size-oblivious, which falls back to False), "false", or "not_false" (``guard_or_true``: unknown falls back
#: to True).  An answer False with the lower bound 2 and unknown with 1 is read as False by a "true" caller both ways:
#: the lowering decides the same over sizes from 1, so its (general) branch holds at 1 by construction, trusting
#: nothing beyond what an unchanged answer does.
NON_GUARDING_READS: dict[tuple[str, str], str] = {
    ("_inductor/sizevars.py", "statically_known_true"): "true",
    ("_inductor/sizevars.py", "statically_known"): "true",
    ("_inductor/sizevars.py", "guard_or_false"): "true",
    ("_inductor/sizevars.py", "guard_or_true"): "not_false",
    ("experimental/symbolic_shapes.py", "statically_known_true"): "true",
    ("experimental/symbolic_shapes.py", "statically_known_false"): "false",
}
#: How a ``guard_or_false`` (fallback False) or ``guard_or_true`` (fallback True) question is read, wherever asked
#: (``symbolic_shapes._guard_or`` passes ``evaluate_expr`` its fallback): the fallback is the branch torch requires to
#: be right for every value (torch's note on ``guard_or_``), so an answer that leads there holds at 1 by that contract.
FALLBACK_READS: dict[bool | None, str] = {False: "true", True: "not_false"}
#: the answers on which a caller of each reading takes its acting branch (None: unknown)
_ACTS_ON = {"true": (True,), "false": (False,), "not_false": (True, None)}
#: the static evaluation and the functions between it and such a caller that pass its answer through
_PASS_THROUGH = ("_maybe_evaluate_static", "_static_eval_sym_bool")


def _reading() -> str | None:
    """How the caller of the static evaluation being observed reads its answer (a value of
    :data:`NON_GUARDING_READS`), or None: every answer counts as given."""
    codes = (f.f_code for f, _ in traceback.walk_stack(sys._getframe(1)))
    below = itertools.dropwhile(lambda code: code.co_name != "_maybe_evaluate_static", codes)
    caller = next(itertools.dropwhile(lambda code: code.co_name in _PASS_THROUGH, below), None)
    return next((r for (tail, name), r in NON_GUARDING_READS.items()
                 if caller is not None and _named(caller, tail, name)), None)


def _named(code: Any, tail: str, name: str) -> bool:
    """Whether ``code`` is the function ``name`` of a file whose path ends in ``tail``."""
    return code.co_name == name and code.co_filename.replace("\\", "/").endswith(tail)


def _same_action(reading: str, a: Any, b: Any) -> bool:
    """Whether a caller reading answers as ``reading`` acts the same on ``a`` and ``b``
    (both truth values or unknown; anything else is not read as a truth value: False)."""
    truth = (None, sympy.true, sympy.false, True, False)
    return a in truth and b in truth and (a in _ACTS_ON[reading]) == (b in _ACTS_ON[reading])


#: Inductor functions (the innermost one asking) whose guarding-hint reads only steer a heuristic:
#: ``mark_reuse`` realizes an input before broadcasting, repeating or unfolding it (speed only)
HEURISTIC_HINT_SITES = ("expand", "repeat", "unfold",
                        # 2.11 reads these through ``size_hint``; 2.13 as optimization hints (torch's
                        # own classification): split factor, buffer sizes, fill order, loop order,
                        # benchmark harness, autotuning size hints, tiling stride scores
                        "num_splits", "_compute_and_update_buf_size", "get_fill_order", "_apply_loop_reordering",
                        "benchmark_compiled_module", "codegen_kernel", "tile_ranges",
                        # the GPU scheduler's loop reordering for fusion (2.13: optimization hints):
                        # a reordered loop nest computes the same values at every size
                        "normalize_with_stride_order", "shared_data_after_reordering_loop", "numel_hint",
                        "_try_reorder_loops_for_candidates", "decide_loop_order_to_match", "numbytes_hint",
                        # 2.11's reshape index walk: every branch ends in check_equals guards, as in
                        # 2.13's compare_sizes (:data:`SITES`)
                        "_dynamic_reshape_indexer",
                        # the C++ kernel's OpenMP parallel depth (2.13: an optimization hint)
                        "decide_parallel_depth",
                        # the wrapper's memory planning: reuse a freed buffer of the same symbolic
                        # size (the key decides that) only where the peak does not grow (the hint)
                        "AllocateLine.plan", "EfficientPeakEstimate._get_size")
#: Inductor methods that only pass a hint read on to their caller (the caller is the site)
HINT_PASS_THROUGH = ("CppKernel.size_hint",)
#: functions outside Inductor that are a question's site when asked in them with no Inductor
#: function between (file tail, name): torch.fx's tensor-metadata extraction
OUTSIDE_SITES = (("fx/passes/shape_prop.py", "_extract_tensor_metadata"),)
#: frames of comprehensions: their locals are the holder's business, their name is not a site
_COMPREHENSIONS = ("<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>")
#: ``sizevars`` functions whose hint read decides nothing: ``to_symint_or_int`` attaches the
#: hint to a new SymInt, whose every use guards or is answered statically (both checked at 1)
HINT_ATTACHING = ("to_symint_or_int",)
#: Inductor's 32-bit indexing check (``utils.expr_fits_within_32bit``): its hint read answers
#: "does this index fit in 32 bits", which is what must hold at 1 (:func:`_observe_hint`)
INDEX_WIDTH_SITE = "expr_fits_within_32bit"
INT32_MAX = 2**31 - 1


def _on_hint(sizevars: Any, kind: str, expr: Any, value: Any, caller: str) -> None:
    log = VeriShapeEnv.observer_of(getattr(sizevars, "shape_env", None))
    if isinstance(log, QuestionLog):
        _observe_hint(log, kind, expr, value, caller)


def _on_scheduled(scheduler: Any) -> None:
    """After Inductor generated code for a scheduler of a recorded lowering: read its sizes."""
    log = VeriShapeEnv.observer_of(getattr(torch_seam.inductor_graph().sizevars, "shape_env", None))
    if isinstance(log, QuestionLog):
        log.sizes.scheduled += 1
        lowered_sizes.from_scheduler(scheduler, log.sizes)


def _widened_now() -> dict[sympy.Symbol, ValueRanges] | None:
    """The widened ranges of the env being lowered under a log (None elsewhere)."""
    log = VeriShapeEnv.observer_of(recompute.shape_env_now())
    return log.widened if isinstance(log, QuestionLog) else None


def _observe_hint(log: QuestionLog, kind: str, expr: Any, value: Any, caller: str = "") -> None:
    """A size hint read while a generic compile is lowered: a heuristic (counted) where it is
    an optimization hint or only steers one (:data:`HEURISTIC_HINT_SITES`; ``maybe_copy_cpu_scalar``
    with the tensor on the target device: nothing is copied), else an answer that must hold at 1."""
    if not isinstance(expr, sympy.Expr) or not (expr.free_symbols & log.candidates) or caller in HINT_ATTACHING:
        return
    site, _ = _site()
    where = site[0] if site else "?"
    if where == INDEX_WIDTH_SITE and kind == "guarding" and isinstance(value, (int, sympy.Integer)):
        # ``hint <= INT32_MAX`` chooses 32-bit indexing (the caller then guards ``expr <= INT32_MAX``); above it, 64-bit
        # indexing, right at every size.  The kernel relies on the bound, not the hint: the answer that must hold at 1.
        answer = sympy.Le(expr, INT32_MAX) if int(value) <= INT32_MAX else None
    elif kind == "optimization" or where in HEURISTIC_HINT_SITES or (
            where == "maybe_copy_cpu_scalar" and _copies_nothing()):
        answer = None
    elif isinstance(value, (int, sympy.Basic)):
        # an int (``guarding_hint_or_throw``) or an expression with the backed sizes set to
        # their hints (``replace_backed_symbols_with_hints``): either way an answer at the hint
        answer = sympy.Eq(expr, value)
    else:
        return
    if answer is None:  # a heuristic
        log.heuristic_hints[where] = log.heuristic_hints.get(where, 0) + 1
    else:
        log.questions.append(Question(answer, sympy.true, (), (), (f"{kind} hint", *site)))


def _copies_nothing() -> bool:
    """``maybe_copy_cpu_scalar(x, device)``, the frame of that name below the caller, copies
    only a CPU tensor bound for another device."""
    frames = (f for f, _ in traceback.walk_stack(sys._getframe(1)))
    local = next((f.f_locals for f in frames if f.f_code.co_name == "maybe_copy_cpu_scalar"), {})
    x, device = local.get("x"), local.get("device")
    try:
        return x is not None and device is not None and x.get_device() == device
    except (AttributeError, NotImplementedError):
        return False


def _site() -> tuple[tuple[str, ...], tuple[Any, Any] | None]:
    """The Inductor functions below the question, innermost first (frames of ``sizevars.py`` and
    comprehensions skipped; a qualified name where a table here knows it; one of :data:`OUTSIDE_SITES`
    where it is the innermost), and for a site of :data:`SITES` that names two sizes, their values."""
    names: list[str] = []
    operands = None
    frame = sys._getframe(2)
    while frame is not None and len(names) < 6:
        code = frame.f_code
        if not names and any(_named(code, tail, name) for tail, name in OUTSIDE_SITES):
            names.append(code.co_name)
        elif "_inductor" in code.co_filename and not code.co_filename.endswith("sizevars.py"):
            holder = frame.f_back if code.co_name in _COMPREHENSIONS and frame.f_back is not None else frame
            qualified = getattr(holder.f_code, "co_qualname", holder.f_code.co_name)
            site = (qualified if qualified in SITES or qualified in DIRECT_SITES or qualified in HEURISTIC_HINT_SITES
                    else holder.f_code.co_name)
            if site in SITES and not names and operands is None:  # a genexpr's locals come first
                wanted = SITES[site][1]
                operands = _operands(wanted, frame.f_locals) if wanted is not None else None
            if site == "fwd_only" and not _retraces_a_search_pattern(frame):
                site = OTHER_TRACE
            if code.co_name not in _COMPREHENSIONS and qualified not in HINT_PASS_THROUGH:
                names.append(site)
        frame = frame.f_back
    return tuple(names), operands


#: the site name of ``fwd_only`` tracing anything but check_fn's search pattern (its
#: replacement, whose nodes are inserted into the graph)
OTHER_TRACE = "fwd_only (not the search pattern's retrace)"


def _retraces_a_search_pattern(frame: Any) -> bool:
    """A ``fwd_only`` frame whose ``fn`` is the search pattern of the check_fn that called it (``search_fn``, or the
    closure ``search_fn_new`` it wraps it in), not its ``replace_fn``: check_fn traces both."""
    fn = frame.f_locals.get("fn")
    # check_fn is its caller or one of the next four: a decorator's frame (2.15's ``no_grad``) may lie between
    callers = itertools.islice(traceback.walk_stack(frame), 1, 6)
    outer = next((f for f, _ in callers if getattr(f.f_code, "co_qualname", None) == CHECK_FN), None)
    return outer is not None and fn is not None and (
        fn is outer.f_locals.get("search_fn")
        or getattr(fn, "__qualname__", "") == f"{CHECK_FN}.<locals>.search_fn_new")


def _operands(wanted: Any, local: dict[str, Any]) -> tuple[Any, Any] | None:
    """The two sizes a :data:`SITES` entry compares, from the asking frame's locals."""
    try:
        x, y = wanted(local) if callable(wanted) else (local.get(wanted[0]), local.get(wanted[1]))
    except (KeyError, IndexError, TypeError):
        return None
    if isinstance(x, (sympy.Expr, int)) and isinstance(y, (sympy.Expr, int)):
        return sympy.sympify(x), sympy.sympify(y)
    return None


def from_one(ranges: dict[sympy.Symbol, ValueRanges], candidates: frozenset[sympy.Symbol]
             ) -> dict[sympy.Symbol, ValueRanges]:
    """The candidates' ranges whose lower bound is 2, with the lower bound 1."""
    return {s: ValueRanges(1, vr.upper) for s in candidates if (vr := ranges.get(s)) is not None and vr.lower == 2}


@contextlib.contextmanager
def recording(env: ShapeEnv, candidates: frozenset[sympy.Symbol]) -> Iterator[QuestionLog]:
    """Install a :class:`QuestionLog` on ``env`` (a VeriShapeEnv) for one block.  On a torch
    that lacks a required interception (``torch_seam.widening_refused``) this is said once,
    in one line; the size-1 calls of such a compile are then refused with that line."""
    # probed only where Inductor is loaded (it lowers this compile): an aot_eager user should not pay for importing it
    refused = torch_seam.widening_refused() if "torch._inductor.sizevars" in sys.modules else None
    if refused:
        recompute.say_once(refused, refused)
    log = QuestionLog(candidates, widened=from_one(env.var_to_range, candidates))
    with env.observing(log), recompute.tracking(_on_hint, _on_scheduled, _widened_now):
        forget_answers(env)
        yield log


def forget_answers(env: ShapeEnv) -> None:
    """Clear what torch remembered of static answers before the log (``answer_memos``), so that every answer the
    lowering gives is seen: one Dynamo's trace or the AOT trace gave first would come back from them unseen (the
    widening fuzzer found such an answer: batch norm's empty-input check in a decode step, answered in Dynamo's
    trace and served from the memo in the AOT trace; docs/compile.md, "Answers torch remembered")."""
    for clear in answer_memos(env) or ():
        clear()


def answer_memos(env: ShapeEnv) -> list[Callable[[], None]] | None:
    """What torch remembers of static answers, each by the function that clears it: its memos of ``evaluate_expr`` and
    ``simplify`` (``torch_names.ANSWER_MEMOS``) and ``env``'s fake-tensor cache (``torch_names.FAKE_TENSOR_CACHE``: a
    meta function's result, answers and all, which the lowering's own fake runs would be served from).  None where one
    cannot be cleared."""
    clears = []
    for dotted in torch_names.ANSWER_MEMOS:
        module_name, owner, name = dotted.rsplit(".", 2)
        memo = getattr(getattr(sys.modules.get(module_name), owner, None), name, None)
        clears.append(getattr(memo, "cache_clear", None))
    cache = getattr(env, torch_names.FAKE_TENSOR_CACHE, None)
    clears.append(cache.clear if isinstance(cache, dict) else None)
    return None if not all(callable(c) for c in clears) else clears
