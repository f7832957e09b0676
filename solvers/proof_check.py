"""Re-checking the proof store: every obligation re-decided by a second solver from its
SMT-LIB text, every counterexample replayed with Python's own integers.

Why from the text: the stored script is the claim. Re-translating the SymPy goal would
re-run the same translator that produced the answer, so a translation bug would agree with
itself. The text is parsed by the checking solver's own front end in a worker process that
never imports verishape's translator (or torch): a crash, a leak or a wrong answer there
cannot touch the process that reports.

Why replay: a ``refuted`` record names a counterexample. Python's arithmetic is the
reference semantics (``verishape.solvers.concrete``), so the counterexample must satisfy the premises
(and the symbols' own domain) and break the goal there, whatever any solver says.

A checker that skipped part of a script (a parser that drops an assertion it cannot type)
only loses constraints, which can turn unsat into sat but never the reverse: an "unsat" that
agrees with a stored "proved" stands whatever was skipped, and a "sat" that agrees with a
stored "refuted" is backed by the replay.

The records come from a file that may have been imported from another machine: the text is
data. Only declarations, definitions, assertions, ``set-info``/``set-logic`` and
``check-sat`` are executed; z3's ``rlimit``/``random_seed`` option lines (which the store
writes) are dropped, and any other command makes the record unreadable for the checker.

Nothing here imports torch, sympy, z3 or cvc5 at module level: the parent of
``verishape proofs check`` stays light, and each worker imports only the solver it runs.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import multiprocessing.connection as mpc
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

#: The option lines z3's SMT-LIB printer and the store put in a script; the checker sets its
#: own limits instead (the units of one solver's resource counter mean nothing to another).
_Z3_OPTION_LINE = re.compile(r"^\(set-option :(?:rlimit|smt\.random_seed|random_seed) \d+\)[ \t]*$", re.MULTILINE)
#: Commands a stored obligation may contain; anything else (get-model, set-option that
#: redirects output, push/pop, ...) is not part of a self-contained implication check.
_ALLOWED_COMMANDS = frozenset({
    "declare-fun", "declare-const", "declare-sort", "define-fun", "define-sort", "define-const",
    "assert", "set-info", "set-logic", "check-sat",
})

SAT, UNSAT, UNKNOWN, ERROR = "sat", "unsat", "unknown", "error"

#: The SMT answer each stored verdict claims (unsat = the goal follows from the premises).
EXPECTED = {"proved": UNSAT, "refuted": SAT}

#: cvc5's resource counter per check (``rlimit-per``), in cvc5's own units: the 287
#: obligations of the DDE corpus use 285 (median) to 17,510 (at most), at roughly 250,000
#: units per second on one core.  The default leaves 50x headroom over that and stops in a
#: few seconds, well before the wall-clock backstop, so the answer is deterministic: the
#: same script stops at the same point on any machine, under any load.
DEFAULT_CVC5_RLIMIT = 1_000_000
#: Wall-clock backstop per check, for both solvers (z3 uses each record's own rlimit).
DEFAULT_TIMEOUT_MS = 10_000


class ScriptRefused(ValueError):
    """The stored text is not a plain implication check (a command outside the allowed set)."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One obligation to re-decide: what a worker needs, and nothing that needs torch."""

    id: int
    smtlib: str
    rlimit: int  # the z3 rlimit the record was decided under
    seed: int


@dataclasses.dataclass(frozen=True)
class Answer:
    id: int
    answer: str  # sat | unsat | unknown | error
    detail: str = ""
    time_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class Limits:
    cvc5_rlimit: int = DEFAULT_CVC5_RLIMIT
    timeout_ms: int = DEFAULT_TIMEOUT_MS


def z3_free_script(text: str) -> str:
    """The stored script without z3's option lines; refuse any other ``set-option`` and any
    command outside :data:`_ALLOWED_COMMANDS` (checked here for both solvers: z3's
    ``parse_smt2_string`` offers no per-command hook)."""
    stripped = _Z3_OPTION_LINE.sub("", text)
    for name in top_level_commands(stripped):
        if name == "set-option":
            raise ScriptRefused("the script sets a solver option other than z3's rlimit/random_seed")
        if name not in _ALLOWED_COMMANDS:
            raise ScriptRefused(f"the script has a {name!r} command")
    return stripped


def top_level_commands(text: str) -> list[str]:
    """The names of the script's top-level commands, skipping comments, string literals
    and ``|quoted|`` symbols (a parenthesis inside them is not structure)."""
    names: list[str] = []
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == ";":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == '"':  # "" inside a literal is an escaped quote: two literals back to back, same effect here
            end = text.find('"', i + 1)
            i = n if end < 0 else end
        elif c == "|":
            end = text.find("|", i + 1)
            i = n if end < 0 else end
        elif c == "(":
            if depth == 0:
                match = _COMMAND_NAME.match(text, i + 1)
                names.append(match.group(0).strip() if match else "")
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise ScriptRefused("unbalanced parentheses in the script")
        i += 1
    return names


_COMMAND_NAME = re.compile(r"\s*[^\s()\";|]+")


def _without_comments(text: str) -> str:
    return "\n".join(line.split(";", 1)[0] for line in text.splitlines())


# ------------------------------------------------------------------ workers (fresh processes)


def decide_one(solver: str, task: Task, limits: Limits) -> Answer:
    """Re-decide ``task`` with ``solver`` ("cvc5" or "z3"); runs in a worker process."""
    decide = _decide_cvc5 if solver == "cvc5" else _decide_z3
    start = time.perf_counter()
    try:
        answer, detail = decide(z3_free_script(task.smtlib), task, limits)
    except ScriptRefused as exc:
        answer, detail = ERROR, str(exc)
    return Answer(task.id, answer, detail, time.perf_counter() - start)


def _decide_cvc5(text: str, task: Task, limits: Limits) -> tuple[str, str]:
    import cvc5

    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("rlimit-per", str(limits.cvc5_rlimit))
    solver.setOption("tlimit-per", str(limits.timeout_ms))
    solver.setOption("seed", str(task.seed))
    if not re.search(r"\(set-logic\b", _without_comments(text)):
        # z3 prints no logic; cvc5 would guess ALL and warn on stderr once per script.
        text = "(set-logic ALL)\n" + text
    symbols = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, f"record-{task.id}")
    try:
        while True:
            command = parser.nextCommand()
            if command.isNull():
                break
            name = command.getCommandName()
            if name not in _ALLOWED_COMMANDS:
                return ERROR, f"the script has a {name!r} command"
            if name != "check-sat":  # decided once, below, after every assertion
                command.invoke(solver, symbols)
        result = solver.checkSat()
    except RuntimeError as exc:  # cvc5 reports parse and sort errors as RuntimeError
        return ERROR, f"cvc5 cannot read the script: {_first_line(exc)}"
    if result.isSat():
        return SAT, ""
    if result.isUnsat():
        return UNSAT, ""
    return UNKNOWN, str(result.getUnknownExplanation())


def _decide_z3(text: str, task: Task, limits: Limits) -> tuple[str, str]:
    import z3

    ctx = z3.Context()  # fresh: the answer depends on this script and the limits alone
    try:
        assertions = z3.parse_smt2_string(text, ctx=ctx)
    except z3.Z3Exception as exc:
        return ERROR, f"z3 cannot read the script: {_first_line(exc)}"
    solver = z3.Solver(ctx=ctx)
    solver.set("rlimit", task.rlimit)
    solver.set("timeout", limits.timeout_ms)
    solver.set("random_seed", task.seed)
    solver.add(assertions)
    try:
        result = solver.check()
    except z3.Z3Exception as exc:
        return ERROR, f"z3 failed: {_first_line(exc)}"
    if result == z3.sat:
        return SAT, ""
    if result == z3.unsat:
        return UNSAT, ""
    return UNKNOWN, solver.reason_unknown()


def _first_line(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else None
    text = arg.decode(errors="replace") if isinstance(arg, bytes) else str(exc)  # z3 raises with bytes
    text = text.strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def solver_version(solver: str) -> str:
    """"cvc5 1.4.2" / "z3 4.15.4", from the installed package's metadata (no import)."""
    from importlib import metadata

    try:
        return f"{solver} {metadata.version('cvc5' if solver == 'cvc5' else 'z3-solver')}"
    except metadata.PackageNotFoundError:
        return solver


# ------------------------------------------------------------------ counterexample replay


@dataclasses.dataclass(frozen=True)
class Replay:
    """A refuted record's claim: at ``counterexample`` the premises hold and the goal is
    false (or raises, when ``undefined_goal``)."""

    id: int
    goal_srepr: str
    premises_srepr: str  # the stored JSON list
    counterexample: str | None  # the stored JSON text
    undefined_goal: bool


def replay_one(item: Replay) -> str | None:
    """None for a counterexample that does what its record says, else what is wrong.
    Runs in a worker: it imports sympy and torch's shape functions (the records are
    written with them)."""
    from verishape.proofs.record import load_expr
    from verishape.solvers import concrete

    if item.counterexample is None:
        return "refuted, but no counterexample is stored"
    try:
        values = json.loads(item.counterexample)
    except ValueError as exc:
        return f"the stored counterexample is not JSON: {exc}"
    if not isinstance(values, dict):
        return "the stored counterexample is not a {symbol: value} object"
    try:
        goal = load_expr(item.goal_srepr)
        premises = [load_expr(p) for p in json.loads(item.premises_srepr)]
    except (ValueError, TypeError) as exc:  # malformed JSON or srepr text: data, not a checker bug
        return f"the stored obligation cannot be parsed: {exc}"
    symbols = {str(s): s for e in (goal, *premises) for s in e.free_symbols}
    missing = sorted(set(symbols) - set(values))
    if missing:
        return f"the counterexample leaves {', '.join(missing)} unassigned"
    env = {symbols[name]: values[name] for name in symbols}
    problem = _outside_domain(env)
    if problem:
        return problem
    for premise in premises:
        try:
            value = concrete.evaluate(premise, env)
        except (concrete.Undefined, concrete.Unevaluable) as exc:
            return f"premise {premise} cannot be evaluated at {_show(values)}: {exc}"
        if value is not True:
            return f"premise {premise} is {value} at {_show(values)}"
    try:
        value = concrete.evaluate(goal, env)
    except concrete.Undefined:
        raises = True
    except concrete.Unevaluable as exc:
        return f"the goal cannot be evaluated at {_show(values)}: {exc}"
    else:
        raises = False
        if value is not False:
            return f"the goal {goal} is {value} at {_show(values)}, not False"
    if raises != item.undefined_goal:
        said = "raises" if item.undefined_goal else "is false"
        return f"the record says the goal {said} there, but it {'raises' if raises else 'is false'}"
    return None


def _outside_domain(env: Mapping[Any, Any]) -> str | None:
    """A value the symbol's own assumptions exclude (the SMT axioms exclude it too)."""
    from verishape.solvers.symbols import sign_facts

    for symbol, value in env.items():
        if symbol.is_integer:
            if not isinstance(value, int) or isinstance(value, bool):
                return f"{symbol} is an integer symbol, the counterexample gives {value!r}"
        elif not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"{symbol} is a float symbol, the counterexample gives {value!r}"
        checks = {">": value > 0, ">=": value >= 0, "<": value < 0, "<=": value <= 0, "!=": value != 0}
        for op in sign_facts(symbol):
            if not checks[op]:
                return f"{symbol} = {value!r} breaks its own assumption {symbol} {op} 0"
    return None


def _show(values: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))


# ------------------------------------------------------------------ the worker farm


#: A worker gets twice the solver's own wall-clock backstop, plus this, per item before it is
#: killed: cvc5 does not always stop at its limits (1.4.2 was seen spinning for minutes, deaf
#: to rlimit-per and tlimit-per, on a bit-split script with a concrete negative exponent).
_GRACE_S = 5.0
#: A replay worker imports torch on its first item.
_REPLAY_LIMIT_S = 300.0


def _serve(conn: Any, kind: str, solver: str, limits: Limits) -> None:
    """A worker's loop: one item in, one result out, until ``None``."""
    while True:
        item = conn.recv()
        if item is None:
            return
        conn.send(decide_one(solver, item, limits) if kind == "decide" else (item.id, replay_one(item)))


@dataclasses.dataclass
class _Slot:
    kind: str
    process: Any
    conn: Any
    item: Any = None
    started: float = 0.0


def run_farm(queues: dict[str, list[Any]], sizes: dict[str, int], solver: str, limits: Limits,
             done: Callable[[str, Any], None]) -> None:
    """Run every item of ``queues`` ("decide": Tasks, "replay": Replays) on ``sizes[kind]``
    fresh (spawned) worker processes, one item at a time per worker, and call
    ``done(kind, result)`` for each.  A worker that dies or overruns its hard limit is
    killed and replaced; its item gets an ERROR answer (decide) or a failed replay, so one
    bad script costs only its own answer and is named."""
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: nothing of the parent leaks in
    hard = {"decide": 2 * limits.timeout_ms / 1000 + _GRACE_S, "replay": _REPLAY_LIMIT_S}
    queues = {kind: list(items) for kind, items in queues.items()}

    def start(kind: str) -> _Slot:
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child, kind, solver, limits), daemon=True)
        process.start()
        child.close()
        return _Slot(kind, process, parent)

    def feed(slot: _Slot) -> None:
        queue = queues[slot.kind]
        slot.item = queue.pop() if queue else None
        slot.started = time.monotonic()
        slot.conn.send(slot.item)

    slots = [start(kind) for kind, n in sizes.items() for _ in range(min(n, len(queues.get(kind, ()))))]
    try:
        for slot in slots:
            feed(slot)
        while any(slot.item is not None for slot in slots):
            busy = [slot for slot in slots if slot.item is not None]
            ready = set(mpc.wait([slot.conn for slot in busy], timeout=0.5))
            now = time.monotonic()
            for i, slot in enumerate(slots):
                if slot.item is None:
                    continue
                failure = None
                if slot.conn in ready:
                    try:
                        result = slot.conn.recv()
                    except (EOFError, OSError):
                        failure = f"the worker process died on it (exit code {slot.process.exitcode})"
                    else:
                        done(slot.kind, result)
                        feed(slot)
                        continue
                elif now - slot.started > hard[slot.kind]:
                    failure = f"killed after {hard[slot.kind]:.0f} s: {solver if slot.kind == 'decide' else 'replay'} " \
                              "did not stop at its limits"
                if failure is not None:
                    slot.process.kill()
                    slot.process.join()
                    item = slot.item
                    done(slot.kind, Answer(item.id, ERROR, failure) if slot.kind == "decide" else (item.id, failure))
                    slots[i] = start(slot.kind)
                    feed(slots[i])
    finally:
        for slot in slots:
            if slot.process.is_alive():
                slot.process.kill()
            slot.process.join()
