"""Replaying a lowering's shape questions without Inductor, so that the rules for Triton's
codegen are checked on a CPU (issue 37).

A record is one question some lowering asked about a kept size: where (the Inductor
functions on its stack, innermost first), the expression, the answer it got with the lower
bound 2, and how it was asked (``ask``: the torch function that asked it, which decides how
the answer is read).  :func:`replay` asks it again through that same torch function, from
frames named like the record's sites, while a :func:`~verishape.compiler.widen.questions.recording`
is installed on a :class:`~verishape.VeriShapeEnv` whose sizes range over ``[2, oo)``, and
says what widening makes of it at 1:

* ``unchanged``: nothing kept (the caller acts the same with the lower bound 1);
* ``moot``: kept, and moot where it was asked (the rule of its site);
* ``proved`` / ``refused``: kept, and its answer holds / fails at 1 (a refusal);
* ``open``: kept, and its answer at 1 is not a number (premises would decide it).

``tests/data/triton_questions.json`` holds the records: those the H200 runs refused on
(``benchmarks/reference/gpu/``, torch 2.11) and those the Triton codegen asks on a CPU
(``benchmarks/triton_questions.py``, torch 2.13), each with the outcome its rule gives.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sympy

DATA = Path(__file__).resolve().parent / "data" / "triton_questions.json"
#: how a record was asked: through which torch function
ASKS = ("statically_known_true", "sym_statically_known_true", "sym_statically_known_false", "guard_or_true",
        "static", "guarding_hint")
OUTCOMES = ("unchanged", "moot", "proved", "refused", "open")
#: the value every size has where the question is asked (the hint)
HINT = 3


@dataclasses.dataclass(frozen=True)
class Record:
    source: str
    program: str
    #: Inductor functions on the question's stack, innermost first
    site: tuple[str, ...]
    expr: str
    #: the answer with the lower bound 2 ("True"/"False"); for ``guarding_hint``, unused
    answer: str
    ask: str
    outcome: str

    @classmethod
    def load_all(cls, path: Path = DATA) -> list[Record]:
        return [cls(**{**r, "site": tuple(r["site"])}) for r in json.loads(path.read_text())["records"]]

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "site": list(self.site)}


def parse(text: str) -> tuple[sympy.Basic, list[sympy.Symbol]]:
    """A printed shape expression, its sizes (``s<digits>``) as positive integer symbols."""
    from torch.utils._sympy.functions import CleanDiv, FloorDiv, Mod, ModularIndexing, PythonMod

    names = sorted(set(re.findall(r"\bs\d+\b", text)))
    symbols = {n: sympy.Symbol(n, integer=True, positive=True) for n in names}
    local = {"FloorDiv": FloorDiv, "Mod": Mod, "ModularIndexing": ModularIndexing, "PythonMod": PythonMod,
             "CleanDiv": CleanDiv, "Eq": sympy.Eq, "Ne": sympy.Ne, **symbols}
    return sympy.sympify(text, locals=local), list(symbols.values())


def _chain(site: tuple[str, ...], call: Callable[[], Any]) -> Any:
    """Run ``call`` under frames named ``site`` (innermost first), in files Inductor's frames
    are recognised by (``questions._site`` reads the stack)."""
    fn: Callable[[], Any] = call
    for name in site:
        def trampoline(inner: Callable[[], Any]) -> Any:
            return inner()

        code = trampoline.__code__
        named = types.FunctionType(code.replace(co_name=name, co_qualname=name,
                                                co_filename=f"<replay>/torch/_inductor/{name}.py"), {})
        fn = (lambda f, inner: lambda: f(inner))(named, fn)
    return fn()


def replay(record: Record) -> str:
    """What widening makes of ``record`` at 1 (one of :data:`OUTCOMES`)."""
    import torch
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    from verishape import VeriShapeEnv
    from verishape.compiler.widen import questions
    from verishape.compiler.widen.canon import NotWidened
    from verishape.compiler.widen.goals import goal_of
    from verishape.compiler.widen.sizes import at_one

    expr, parsed = parse(record.expr)
    env = VeriShapeEnv()
    made = [env.create_symbol(HINT, ConstantSource(f"replay_{s.name}"), dynamic_dim=DimDynamic.DYNAMIC)
            for s in parsed]
    expr = expr.xreplace(dict(zip(parsed, made)))
    hints = dict(env.backed_var_to_val)
    ask = _asker(record.ask, env, expr, hints)
    with questions.recording(env, frozenset(made)) as log:
        # no hints while asking: the hint fast path of ``statically_known_true`` (a False at
        # the hint answers before the ranges are read) would hide the question
        env.backed_var_to_val.clear()
        try:
            _chain(record.site if record.ask != "guarding_hint" else record.site[1:], ask)
        finally:
            env.backed_var_to_val.update(hints)
    if not log.questions:
        return "unchanged"
    q = log.questions[-1]
    sub = {s: sympy.Integer(1) for s in made}
    moot = q.moot(sub)
    if moot is not None and moot[1] is sympy.true:
        return "moot"
    try:
        value = at_one(goal_of(q.expr, q.answer), sub, "the answer")
        if moot is not None:
            value = sympy.Or(value, at_one(moot[1], sub, "the moot condition"))
    except NotWidened:
        return "refused"  # it divides by a size that is 0 at 1
    value = sympy.simplify(value)
    return "proved" if value is sympy.true else "refused" if value is sympy.false else "open"


def _asker(ask: str, env: Any, expr: sympy.Basic, hints: dict[Any, Any]) -> Callable[[], Any]:
    import torch
    from torch._inductor import sizevars
    from torch.fx.experimental import symbolic_shapes
    from torch.fx.experimental.sym_node import SymNode

    from verishape.compiler.widen import questions

    if ask == "statically_known_true":
        return lambda: sizevars.statically_known_true(env, expr)
    if ask in ("sym_statically_known_true", "sym_statically_known_false"):
        fn = getattr(symbolic_shapes, ask.removeprefix("sym_"))
        return lambda: fn(torch.SymBool(SymNode(expr, env, bool, None)))
    if ask == "guard_or_true":
        allocator = types.SimpleNamespace(shape_env=env)
        return lambda: _backed_oblivious(sizevars.SizeVarAllocator.guard_or_true, allocator, expr)
    if ask == "static":
        return lambda: env._maybe_evaluate_static(expr)
    if ask == "guarding_hint":
        value = int(expr.xreplace(hints))
        return lambda: questions._on_hint(types.SimpleNamespace(shape_env=env), "guarding", expr, value, "replay")
    raise ValueError(f"unknown ask {ask!r} (one of {ASKS})")


def _backed_oblivious(fn: Callable[..., Any], allocator: Any, expr: sympy.Basic) -> Any:
    import torch.fx.experimental._config as exp_config

    with exp_config.patch(backed_size_oblivious=True):
        return fn(allocator, expr)
