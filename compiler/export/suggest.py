"""The ``torch._check`` that settles a data-dependent question an export could not decide.

When a non-strict ``verishape.export`` still stops with ``GuardOnDataDependentSymNode``,
stock's message says to "consider" data-dependent friendly APIs and leaves the user to
guess a check.  Here the check is found and proved:

1. the user's frame is the innermost user frame of the error's traceback (a non-strict
   export runs the user's code itself); its locals name the symbols: a SymInt local is its
   name (``n``, or ``seq - 1`` for a local ``seq = u + 1``), a tensor's size is
   ``x.shape[0]``, an element of a ``tolist()`` result is ``t[1]``;
2. candidates are the question's own comparisons and their negations, and simple bounds of
   each data-dependent value (``>= 0``, ``>= 1``, against each size it is compared with), only
   those that mention a data-dependent value (a check of sizes alone is a guard, no premise);
3. a candidate is kept when the solver proves that, with the facts the exported program
   already checks, it decides the question (and the facts with it are not contradictory),
   and when it holds at every arrival at the user's line in an eager run of the example
   inputs (the printed check itself is evaluated there, in the user's variables);
4. of the kept ones the weakest is chosen (one no other kept candidate is proved weaker
   than), ties going to the shortest text;
5. what it changes in eager is said from the user's statement: for ``if <test>: raise``
   the solver proves that every input the check rejects makes eager raise there too ("it
   rejects nothing eager accepts"); otherwise the rejected inputs are named, and
   ``torch.cond`` when both branches of an ``if`` are real code.

Nothing is printed as proved unless it was: no candidate, no proof or no eager run means no
suggestion, and stock's error is raised unchanged.  The result is a :class:`Suggestion`,
attached to the error as ``verishape_suggestion`` and returned by ``verishape.explain(err)``.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import linecache
import logging
import sys
import textwrap
from collections.abc import Callable, Mapping
from types import CodeType, FrameType
from typing import Any

import sympy
import torch
from torch.utils._sympy.printers import PythonPrinter

from verishape.core import locations
from verishape.core.shape_env import VeriShapeEnv
from verishape.proofs.kinds import Decision

log = logging.getLogger("verishape")

#: arrivals at the user's line recorded in the eager run (a loop past this is not checked
#: further: the suggestion is then withheld)
_ARRIVALS = 1000


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """A proved ``torch._check`` for the user's line.  ``condition`` is the Python expression
    over the user's variables; insert ``check`` before line ``lineno`` of ``filename``, at
    ``indent``.  ``question`` is what torch could not decide and ``decides`` the value the
    check gives it.  ``rejects_nothing_eager_accepts``: proved True, or False when the check
    rejects inputs (``rejected``) that eager may run; ``eager`` says which, in words."""

    condition: str
    filename: str
    lineno: int
    indent: str
    statement: str
    question: str
    decides: bool
    holds_at: int
    proof_ms: float
    rejects_nothing_eager_accepts: bool
    rejected: str
    eager: str
    alternatives: tuple[str, ...] = ()

    @property
    def check(self) -> str:
        return f"torch._check({self.condition})"

    def text(self) -> str:
        where = f"{self.filename.rsplit('/', 1)[-1]}:{self.lineno}"
        return (f"verishape: add `{self.check}` before {where} (`{self.statement}`).\n"
                f"  Proved sufficient: with the facts the program already checks, it decides `{self.question}` "
                f"as {self.decides} ({self.proof_ms:.1f} ms).\n"
                f"  Holds on the example inputs: evaluated in eager at each of the {self.holds_at} arrival(s) "
                f"at that line.\n  {self.eager}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "check": self.check}

    def apply(self, source: str) -> str:
        """``source`` (the text of ``filename``) with the check inserted."""
        lines = source.splitlines(keepends=True)
        lines.insert(self.lineno - 1, f"{self.indent}{self.check}\n")
        return "".join(lines)


def apply_to_function(fn: Callable[..., Any], suggestion: Suggestion) -> Callable[..., Any]:
    """A copy of ``fn`` (a function or method defined in a file) with the suggested check
    inserted: what a tool applying the suggestion to the file would run.  The patched file
    is registered with ``linecache`` under a new name, so that the copy's line numbers, its
    source and a later suggestion for it all refer to the patched text."""
    fn = getattr(fn, "__func__", fn)
    code = fn.__code__
    if code.co_filename != suggestion.filename:
        raise ValueError(f"the suggestion is for {suggestion.filename}, not for {fn.__qualname__} "
                         f"({code.co_filename})")
    lines, first = inspect.getsourcelines(fn)
    if not first < suggestion.lineno < first + len(lines):
        raise ValueError(f"line {suggestion.lineno} is not in the body of {fn.__qualname__}")
    patched = suggestion.apply("".join(linecache.getlines(code.co_filename))).splitlines(keepends=True)
    global _patches
    _patches += 1
    name = f"<verishape patch {_patches} of {code.co_filename}>"
    linecache.cache[name] = (sum(map(len, patched)), None, patched, name)
    body = textwrap.dedent("".join(patched[first - 1:first + len(lines)]))
    namespace: dict[str, Any] = {}
    exec(compile("\n" * (first - 1) + body, name, "exec"), fn.__globals__, namespace)  # noqa: S102 - the user's code
    return namespace[fn.__name__]


_patches = 0


# ---------------------------------------------------------------------------- finding it


def suggest(exc: BaseException, env: Any, mod: Any, args: tuple[Any, ...],
            kwargs: Mapping[str, Any] | None) -> Suggestion | None:
    """The proved check for ``exc`` (a ``GuardOnDataDependentSymNode`` of ``env``), or None."""
    question = getattr(exc, "cond", None)
    frame, lineno = _user_frame(exc)
    if question is None or frame is None or env is None:
        return None
    goal = _unhinted(env, env.replace(question))
    if not goal.free_symbols:
        return None
    names = _names(frame.f_locals, env)
    unbacked = {s for s in goal.free_symbols if s not in env.backed_var_to_val}
    if not unbacked or not goal.free_symbols <= names.keys():
        return None
    arrivals = _eager_arrivals(mod, args, kwargs, frame.f_code, lineno, names)
    if not arrivals:
        return None
    values = [v for v, _ in arrivals]
    if any(not goal.free_symbols <= v.keys() for v in values):
        return None
    direction = {bool(goal.xreplace(v)) for v in values}
    if len(direction) != 1:
        return None  # the examples take both sides: no one-sided check holds on all of them
    decides = direction.pop()
    target = goal if decides else sympy.Not(goal)
    solver = _Solver(env, target)
    kept = []
    for cand in _candidates(goal, unbacked, names, env):
        if not cand.free_symbols <= names.keys() or not all(bool(cand.xreplace(v)) for v in values):
            continue
        ms = solver.sufficient(cand)
        if ms is not None:
            kept.append((cand, ms))
    printer = _printer(names)
    kept = [(c, ms) for c, ms in kept if _holds_in_eager(printer(c), arrivals)]
    if not kept:
        return None
    best, ms = _weakest(kept, solver, printer)
    statement, indent, first_line, test, raises_when = _statement(frame.f_code, lineno, frame)
    eager_text, nothing = _eager_effect(best, solver, test, raises_when, printer, frame, env, names)
    return Suggestion(condition=printer(best), filename=frame.f_code.co_filename, lineno=first_line,
                      indent=indent, statement=statement, question=printer(goal), decides=decides,
                      holds_at=len(arrivals), proof_ms=ms, rejects_nothing_eager_accepts=nothing,
                      rejected=printer(_negate(best)), eager=eager_text,
                      alternatives=tuple(printer(c) for c, _ in kept if c is not best))


def _unhinted(env: Any, cond: sympy.Basic) -> sympy.Basic:
    """The question over the sizes' symbols: stock's error carries it with each backed size
    replaced by its hint; the env's newest open question is it, when its hinted form matches."""
    last = env.last_open_question if isinstance(env, VeriShapeEnv) else None
    if last is not None and env.replace(last).xreplace(env.backed_var_to_val) == cond:
        return env.replace(last)
    return cond


def _user_frame(exc: BaseException) -> tuple[FrameType | None, int]:
    tb, found, line = exc.__traceback__, None, 0
    while tb is not None:
        if locations.is_user_file(tb.tb_frame.f_code.co_filename):
            found, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    return found, line


def _names(local_vars: Mapping[str, Any], env: Any) -> dict[sympy.Symbol, sympy.Basic]:
    """symbol -> an expression over user-named atoms (sympy symbols named by Python text).
    Plain SymInt locals first, then ``local - c`` for a local ``u + c``, then list elements,
    then tensor sizes."""
    out: dict[sympy.Symbol, sympy.Basic] = {}

    def atom(text: str) -> sympy.Symbol:
        return sympy.Symbol(text, integer=True)

    def expr_of(v: Any) -> sympy.Basic | None:
        return env.replace(v.node.expr) if isinstance(v, torch.SymInt) else None

    ints = [(k, e) for k, v in local_vars.items() if (e := expr_of(v)) is not None]
    for k, e in ints:
        if isinstance(e, sympy.Symbol):
            out.setdefault(e, atom(k))
    for k, e in ints:
        if isinstance(e, sympy.Add) and len(e.free_symbols) == 1:
            s = next(iter(e.free_symbols))
            rest = e - s
            if rest.is_Integer and s not in out:
                out[s] = atom(k) - rest
    for k, v in local_vars.items():
        if isinstance(v, (list, tuple)):
            for i, item in enumerate(v):
                e = expr_of(item)
                if isinstance(e, sympy.Symbol):
                    out.setdefault(e, atom(f"{k}[{i}]"))
    for k, v in local_vars.items():
        if isinstance(v, torch.Tensor) and not k.startswith("_"):
            for d, size in enumerate(v.shape):
                e = expr_of(size)
                if isinstance(e, sympy.Symbol):
                    out.setdefault(e, atom(f"{k}.shape[{d}]"))
    return out


def _printer(names: Mapping[sympy.Symbol, sympy.Basic]) -> Callable[[sympy.Basic], str]:
    def show(expr: sympy.Basic) -> str:
        shown = expr.xreplace(dict(names))
        if isinstance(shown, sympy.And):
            return " and ".join(f"({PythonPrinter().doprint(a)})" for a in shown.args)
        return PythonPrinter().doprint(shown)
    return show


_NEGATED = {sympy.StrictLessThan: sympy.GreaterThan, sympy.LessThan: sympy.StrictGreaterThan,
            sympy.StrictGreaterThan: sympy.LessThan, sympy.GreaterThan: sympy.StrictLessThan,
            sympy.Equality: sympy.Unequality, sympy.Unequality: sympy.Equality}


def _negate(expr: sympy.Basic) -> sympy.Basic:
    kind = _NEGATED.get(type(expr))
    return kind(expr.lhs, expr.rhs) if kind is not None else sympy.Not(expr)


def _atoms(expr: sympy.Basic) -> list[sympy.Basic]:
    if isinstance(expr, (sympy.And, sympy.Or)):
        return [a for arg in expr.args for a in _atoms(arg)]
    if isinstance(expr, sympy.Not):
        return _atoms(expr.args[0])
    return [expr] if isinstance(expr, sympy.Rel) else []


def _candidates(goal: sympy.Basic, unbacked: set[sympy.Symbol], names: Mapping[sympy.Symbol, Any],
                env: Any) -> list[sympy.Basic]:
    """Facts to try, the question's own comparisons first; each mentions an unbacked symbol."""
    out: list[sympy.Basic] = [goal, sympy.Not(goal)] if not isinstance(goal, sympy.Rel) else []
    for a in _atoms(goal):
        out += [a, _negate(a)]
    sizes = sorted((s for s in goal.free_symbols if s not in unbacked), key=str)
    others = sorted(unbacked, key=str)
    for u in others:
        out += [sympy.Ge(u, 0), sympy.Ge(u, 1)]
        for s in sizes + [o for o in others if o is not u]:
            out += [sympy.Le(u, s), sympy.Lt(u, s), sympy.Ge(u, s)]
    seen, kept = set(), []
    for c in out:
        key = c.canonical if isinstance(c, sympy.Rel) else c
        if c in (sympy.true, sympy.false) or not (c.free_symbols & unbacked) or key in seen:
            continue
        seen.add(key)
        kept.append(c)
    return kept


class _Solver:
    """Proofs over the premises the exported program checks (the env's export rule)."""

    def __init__(self, env: Any, target: sympy.Basic) -> None:
        self.env, self.target = env, target

    def _prove(self, goal: sympy.Basic, extra: list[sympy.Basic]) -> float | None:
        # The premises relevant to the goal and to the extra facts (the carrier only
        # gathers their symbols), with the extra facts bound for this one question.
        premises = self.env.premises_for(sympy.Tuple(goal, *extra), Decision.DDE_AVOIDED)
        if premises is None:
            return None
        with premises.assuming(*extra):
            record = premises.ask(goal, Decision.SUGGESTED_CHECK)
        return None if record is None else record.result.time_s * 1e3

    def sufficient(self, cand: sympy.Basic) -> float | None:
        return self._prove(self.target, [cand])

    def implies(self, a: sympy.Basic, b: sympy.Basic) -> bool:
        return self._prove(b, [a]) is not None


def _weakest(kept: list[tuple[sympy.Basic, float]], solver: _Solver,
             printer: Callable[[sympy.Basic], str]) -> tuple[sympy.Basic, float]:
    """A kept candidate that no other is strictly weaker than; ties: the shortest text."""
    def strictly_weaker(a: sympy.Basic, b: sympy.Basic) -> bool:  # a weaker than b
        return solver.implies(b, a) and not solver.implies(a, b)

    best = [(c, ms) for c, ms in kept if not any(strictly_weaker(o, c) for o, _ in kept if o is not c)]
    return min(best or kept, key=lambda cm: (len(printer(cm[0])), printer(cm[0])))


# ---------------------------------------------------------------------------- the eager run


def _eager_arrivals(mod: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, code: CodeType,
                    lineno: int, names: Mapping[sympy.Symbol, sympy.Basic]) -> list[tuple[dict, dict]]:
    """Run the example inputs eagerly (on copies) and, at each arrival at ``code``'s line
    ``lineno``, the value of each named symbol and a snapshot of the locals.  Empty when the
    copies cannot be made or eager raises."""
    atoms = sorted({a for e in names.values() for a in e.free_symbols}, key=str)
    arrivals: list[tuple[dict, dict]] = []

    def local_trace(frame: FrameType, event: str, _arg: Any) -> Any:
        if event == "line" and frame.f_lineno == lineno and len(arrivals) < _ARRIVALS:
            snapshot = dict(frame.f_locals)
            atom_values = {}
            for a in atoms:
                try:
                    value = eval(a.name, frame.f_globals, snapshot)  # noqa: S307 - names we printed
                except Exception:  # noqa: BLE001 - a name not defined yet: no value
                    continue
                if isinstance(value, int) and not isinstance(value, bool):
                    atom_values[a] = sympy.Integer(value)
            values = {s: e.xreplace(atom_values) for s, e in names.items()
                      if e.free_symbols <= atom_values.keys()}
            arrivals.append(({s: v for s, v in values.items() if v.is_Integer}, snapshot))
        return local_trace

    def global_trace(frame: FrameType, event: str, _arg: Any) -> Any:
        return local_trace if frame.f_code is code else None

    try:
        mod_copy, args_copy, kwargs_copy = copy.deepcopy((mod, args, dict(kwargs or {})))
    except Exception as err:  # noqa: BLE001 - no copy, no eager run, no suggestion
        log.info("verishape: no suggestion: the module or inputs cannot be copied for an eager run (%r)", err)
        return []
    previous = sys.gettrace()
    sys.settrace(global_trace)
    try:
        with torch.no_grad():
            mod_copy(*args_copy, **kwargs_copy)
    except Exception as err:  # noqa: BLE001 - eager fails on the examples: nothing can hold there
        log.info("verishape: no suggestion: eager raised on the example inputs (%r)", err)
        return []
    finally:
        sys.settrace(previous)
    return [] if len(arrivals) >= _ARRIVALS else arrivals


def _holds_in_eager(text: str, arrivals: list[tuple[dict, dict]]) -> bool:
    """The printed check, evaluated in the user's own locals at each arrival."""
    try:
        return all(bool(eval(text, {"torch": torch}, snapshot)) for _v, snapshot in arrivals)  # noqa: S307
    except Exception:  # noqa: BLE001 - text that does not evaluate there is no check to print
        return False


# ---------------------------------------------------------------------------- what eager accepts


def _statement(code: CodeType, lineno: int, frame: FrameType,
               ) -> tuple[str, str, int, ast.expr | None, bool | None]:
    """(the statement's first line, its indent, its line number, the test of an ``if`` whose
    one side only raises, which test value raises)."""
    filename = code.co_filename
    text = linecache.getline(filename, lineno).rstrip("\n")
    plain = (text.strip(), text[: len(text) - len(text.lstrip())], lineno, None, None)
    try:
        lines, first = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, SyntaxError, TypeError):
        return plain
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start, end = node.lineno + first - 1, (node.end_lineno or node.lineno) + first - 1
            if start <= lineno <= end and (found is None or start >= found[0]):
                if isinstance(node, ast.If) and not (node.test.lineno + first - 1 <= lineno
                                                     <= (node.test.end_lineno or 0) + first - 1):
                    continue
                found = (start, node)
    if found is None:
        return plain
    start, node = found
    line = linecache.getline(filename, start).rstrip("\n")
    indent = line[: len(line) - len(line.lstrip())]
    if line.lstrip().startswith("elif"):
        return plain  # a check cannot go between an if and its elif
    raises_when = None
    if isinstance(node, ast.If):
        if _only_raises(node.body):
            raises_when = True
        elif node.orelse and _only_raises(node.orelse):
            raises_when = False
        return line.strip(), indent, start, node.test, raises_when
    return line.strip(), indent, start, None, None


def _only_raises(body: list[ast.stmt]) -> bool:
    return bool(body) and all(isinstance(s, ast.Raise) for s in body)


def _eager_effect(best: sympy.Basic, solver: _Solver, test: ast.expr | None, raises_when: bool | None,
                  printer: Callable[[sympy.Basic], str], frame: FrameType, env: Any,
                  names: Mapping[sympy.Symbol, Any]) -> tuple[str, bool]:
    rejected = printer(_negate(best))
    if test is not None and raises_when is not None:
        cond = _translate(test, frame, env)
        if cond is not None and solver.implies(_negate(best), cond if raises_when else _negate_any(cond)):
            return (f"It rejects nothing eager accepts: every input with {rejected} already raises at this "
                    f"`if` in eager (proved).", True)
    if test is not None and raises_when is None:
        return (f"It rejects inputs with {rejected}, which eager may accept: both branches of this `if` are "
                f"real code, and the check keeps only the one the examples take; to keep both, write the "
                f"branches with torch.cond.", False)
    return f"It rejects inputs with {rejected}, which eager may accept.", False


def _negate_any(expr: sympy.Basic) -> sympy.Basic:
    return _negate(expr) if isinstance(expr, sympy.Rel) else sympy.Not(expr)


_SAFE = (ast.Expression, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Name, ast.Load, ast.Constant,
         ast.Attribute, ast.Subscript, ast.cmpop, ast.boolop, ast.operator, ast.unaryop, ast.Call, ast.Tuple)


def _translate(test: ast.expr, frame: FrameType, env: Any) -> sympy.Basic | None:
    """The ``if`` test over the env's symbols, evaluated on the traced (fake) locals; None
    when it contains anything but names, sizes, arithmetic and comparisons."""
    for node in ast.walk(test):
        if not isinstance(node, _SAFE):
            return None
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Attribute) and node.func.attr == "size"
                                               or isinstance(node.func, ast.Name) and node.func.id == "len"):
            return None
        if isinstance(node, ast.Attribute) and node.attr not in ("shape", "size"):
            return None

    def value(node: ast.expr) -> sympy.Basic:
        v = eval(compile(ast.Expression(node), "<verishape>", "eval"), frame.f_globals, dict(frame.f_locals))  # noqa: S307
        if isinstance(v, torch.SymInt):
            return env.replace(v.node.expr)
        if isinstance(v, int) and not isinstance(v, bool):
            return sympy.Integer(v)
        raise TypeError(type(v).__name__)

    ops = {ast.Lt: sympy.Lt, ast.LtE: sympy.Le, ast.Gt: sympy.Gt, ast.GtE: sympy.Ge, ast.Eq: sympy.Eq, ast.NotEq: sympy.Ne}

    def walk(node: ast.expr) -> sympy.Basic:
        if isinstance(node, ast.BoolOp):
            parts = [walk(v) for v in node.values]
            return sympy.And(*parts) if isinstance(node.op, ast.And) else sympy.Or(*parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return sympy.Not(walk(node.operand))
        if isinstance(node, ast.Compare):
            terms = [value(node.left), *(value(c) for c in node.comparators)]
            return sympy.And(*[ops[type(op)](a, b) for op, a, b in zip(node.ops, terms, terms[1:])])
        raise TypeError(type(node).__name__)

    try:
        return walk(test)
    except Exception:  # noqa: BLE001 - anything unexpected: no claim about eager
        return None
