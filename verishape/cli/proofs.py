"""``verishape proofs``: look into the proof store, re-check it, move it between machines.

The store (:mod:`verishape.proofs.store`) keeps every obligation verishape asked a solver, with the
answer and the SMT-LIB script of the question.  This command never imports torch: reading
a store, or re-deciding its scripts with another solver, needs neither the compiler nor
the SymPy translator.  (``check`` replays counterexamples in a worker process, which does
import torch's shape functions: the records are written with them.)

Exit status: 0 fine; 1 ``check`` found a disagreement or a counterexample that does not
hold; 2 usage or input error (missing or corrupt store, unknown record, unwritable file).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import json
import logging
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from verishape.solvers import proof_check as pc
from verishape.core.errors import UsageError, check_writable
from verishape.proofs.kinds import Asker

_VERDICTS = ("proved", "refuted", "unknown")
_KINDS = tuple(str(a) for a in Asker)
_SQLITE_MAGIC = b"SQLite format 3\x00"


# ------------------------------------------------------------------ arguments


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``verishape proofs`` and its subcommands."""
    proofs = sub.add_parser(
        "proofs", help="inspect, re-check, export/import and prune the proof store",
        description="The proof store keeps every solver obligation verishape decided, with its SMT-LIB "
        "script. Store: --store PATH, else $VERISHAPE_PROOF_STORE, else ~/.cache/verishape/proofs.sqlite. "
        "Exit 0: fine; 1: `check` found a disagreement; 2: usage or input error.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", metavar="PATH", help="the store file (default: $VERISHAPE_PROOF_STORE or the cache folder)")
    cmds = proofs.add_subparsers(dest="proofs_command", metavar="SUBCOMMAND")
    stats = cmds.add_parser("stats", parents=[common], help="records by verdict and kind, size, last run's hits")
    stats.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    check = cmds.add_parser(
        "check", parents=[common], help="re-decide every obligation with a second solver; replay counterexamples",
        description="Re-decide every stored obligation from its SMT-LIB text (not by re-translating SymPy) in "
        "fresh worker processes, compare with the stored verdict (proved = unsat, refuted = sat), and replay "
        "every stored counterexample with Python's integers. Exit 1 if anything disagrees.",
    )
    check.add_argument("--solver", choices=("cvc5", "z3"), default="cvc5", help="the checking solver (default cvc5)")
    check.add_argument("--jobs", type=_positive_int, default=min(4, os.cpu_count() or 1),
                       help="worker processes (default: min(4, CPUs))")
    check.add_argument("--rlimit", type=_positive_int, default=pc.DEFAULT_CVC5_RLIMIT,
                       help=f"cvc5's deterministic resource limit per obligation (default {pc.DEFAULT_CVC5_RLIMIT:,}); "
                       "z3 uses each record's own rlimit")
    check.add_argument("--timeout-ms", type=_positive_int, default=pc.DEFAULT_TIMEOUT_MS,
                       help=f"wall-clock backstop per obligation (default {pc.DEFAULT_TIMEOUT_MS})")
    check.add_argument("--progress", action="store_true", help="draw a progress bar on stderr even when it is not a terminal")
    check.add_argument("--json", action="store_true", help="print the summary as JSON")
    lister = cmds.add_parser("list", parents=[common], help="one line per record")
    lister.add_argument("--verdict", choices=_VERDICTS)
    lister.add_argument("--kind", help=f"who asked ({', '.join(_KINDS)})")
    lister.add_argument("--limit", type=_positive_int, default=None, help="at most N records (newest first)")
    show = cmds.add_parser("show", parents=[common], help="one record and its SMT-LIB script")
    show.add_argument("id", help="the record's id (from `list`)")
    export = cmds.add_parser("export", parents=[common], help="write a copy of the store to a new file (SQLite) that `import` reads on another machine")
    export.add_argument("file")
    imp = cmds.add_parser(
        "import", parents=[common], help="merge a file written by `export` into the store",
        description="Merge records by key; records already present are kept as they are. Records decided "
        "under another encoding (another verishape version's solvers/) are kept too: their key includes the "
        "encoding hash, so lookups here never match them (`prune --other-encodings` drops them).",
    )
    imp.add_argument("file")
    prune = cmds.add_parser("prune", parents=[common], help="delete records")
    prune.add_argument("--older-than", type=_non_negative_float, metavar="DAYS", help="records created more than DAYS ago")
    prune.add_argument("--unknown", action="store_true", help="records whose verdict is unknown")
    prune.add_argument("--other-encodings", action="store_true",
                       help="records decided under another encoding hash (lookups never match them)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a non-negative number of days, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    """Dispatch ``verishape proofs SUBCOMMAND``; user errors raise UsageError (exit 2)."""
    command = getattr(args, "proofs_command", None)
    if command is None:
        raise UsageError("proofs: say what to do: stats, check, list, show, export, import or prune")
    handler: Callable[[argparse.Namespace], int] = _COMMANDS[command]
    return handler(args)


# ------------------------------------------------------------------ opening the store


def store_path(explicit: str | None) -> Path:
    """--store, else the store's own rule ($VERISHAPE_PROOF_STORE, else the cache folder)."""
    if explicit is not None:
        return Path(explicit).expanduser()
    from verishape.proofs import store

    path = store.configured_path()
    if path is None:
        raise UsageError(f"the proof store is off ({store.ENV_VAR}={os.environ.get(store.ENV_VAR)!r}); "
                         "pass --store PATH")
    return path


@contextmanager
def open_existing(explicit: str | None) -> Iterator[Any]:
    """The store at ``explicit``/env/default, which must exist and be readable; a missing,
    non-SQLite or unreadable file is a UsageError (one line), never a new empty store."""
    path = store_path(explicit)
    if not path.exists():
        raise UsageError(f"no proof store at {path} (compile with the store on, or pass --store PATH)")
    if not path.is_file():
        raise UsageError(f"not a file: {path}")
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise UsageError(f"cannot read the proof store {path}: {exc.strerror}") from None
    if magic != _SQLITE_MAGIC:
        raise UsageError(f"{path} is not a proof store (not an SQLite database)")
    from verishape.proofs.store import open_store

    with _captured_warnings() as warnings:
        store = open_store(path)
    if store is None:
        why = warnings[-1].split("; continuing", 1)[0] if warnings else f"proof store {path} cannot be opened"
        raise UsageError(why)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _captured_warnings() -> Iterator[list[str]]:
    """The store reports a corrupt/locked file as a logged warning and returns None; the
    command turns that into its one error line instead of printing both."""
    messages: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage().removeprefix("verishape: "))

    logger = logging.getLogger("verishape")
    handler, propagate = _Keep(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


# ------------------------------------------------------------------ stats / list / show


def _stats(args: argparse.Namespace) -> int:
    with open_existing(args.store) as store:
        stats = dict(store.stats())
    stats["bytes"] = stats.get("size_bytes")
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True))
        return 0
    print(f"proof store: {stats['path']} ({_size(stats['bytes'])})")
    print(f"records: {stats['records']}" + _breakdown(stats["by_verdict"]))
    print("by kind: " + (", ".join(f"{k} {n}" for k, n in sorted(stats["by_kind"].items())) or "none"))
    last = stats.get("last_run")
    if last is None:
        print("last run: none recorded (a process writes its run when it exits, if it used the store)")
    else:
        ended = datetime.datetime.fromtimestamp(last["ended"]).isoformat(sep=" ", timespec="seconds")
        argv = " ".join(map(str, last.get("argv") or []))
        print(f"last run: {stats['hits_last_run']} store hits, {stats['solver_calls_last_run']} solver calls, "
              f"{last.get('records_added')} records added (pid {last.get('pid')}, ended {ended}: {argv[:120]})")
    return 0


def _breakdown(counts: dict[str, int]) -> str:
    parts = [f"{v} {counts[v]}" for v in _VERDICTS if counts.get(v)]
    parts += [f"{v} {n}" for v, n in sorted(counts.items()) if v not in _VERDICTS]
    return f" ({', '.join(parts)})" if parts else ""


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


def _list(args: argparse.Namespace) -> int:
    with open_existing(args.store) as store:
        records = sorted(store.records(verdict=args.verdict, kind=args.kind), key=lambda r: -r.id)
    shown = records[: args.limit] if args.limit else records
    for r in shown:
        print(_line(r))
    if len(shown) < len(records):
        print(f"... {len(records) - len(shown)} more (--limit)", file=sys.stderr)
    return 0


def _line(r: Any) -> str:
    extra = " vacuous" if r.vacuous else ""
    return f"#{r.id} {r.verdict}{extra} [{r.kind}] {r.goal}  ({r.time_s * 1e3:.1f} ms, {r.hits} hits)"


def _show(args: argparse.Namespace) -> int:
    try:
        rid = int(args.id.lstrip("#"))
    except ValueError:
        raise UsageError(f"proofs show: a record id is a number (see `verishape proofs list`), got {args.id!r}") from None
    with open_existing(args.store) as store:
        record = store.get(rid)
    if record is None:
        raise UsageError(f"proofs show: no record #{rid} in the store")
    print(describe(record))
    print(record.smtlib.rstrip())
    return 0


def _premises(r: Any) -> list[str]:
    """The record's premise texts; a malformed column is shown as it is, not a crash."""
    try:
        premises = json.loads(r.premises_srepr)
    except ValueError:
        return [f"(malformed premises column: {r.premises_srepr[:200]!r})"]
    return [str(p) for p in premises] if isinstance(premises, list) else [repr(premises)]


_SYMBOL = re.compile(r"(?:Symbol|Dummy)\('([^']*)'(?:, \w+=\w+)*\)")
_INTEGER = re.compile(r"Integer\((-?\d+)\)")


def readable(srepr: str) -> str:
    """A stored ``srepr`` shortened for people without parsing it (parsing needs torch):
    symbols by name, integers as digits; the structure stays as stored."""
    return _INTEGER.sub(r"\1", _SYMBOL.sub(r"\1", srepr))


def describe(r: Any) -> str:
    """A record as people read it (the SMT-LIB script apart)."""
    premises = _premises(r)
    lines = [
        f"#{r.id} {r.verdict}{' (vacuous: the premises contradict each other)' if r.vacuous else ''}",
        f"  kind:       {r.kind}",
        f"  goal:       {r.goal}",
        f"  premises:   {len(premises)}" + "".join(f"\n    {readable(p)}" for p in premises),
    ]
    if r.counterexample is not None:
        how = "raises" if r.undefined_goal else "is false"
        lines.append(f"  counterexample (the goal {how} there): {r.counterexample}")
    if r.reason:
        lines.append(f"  reason:     {r.reason}")
    created = datetime.datetime.fromtimestamp(r.created).isoformat(timespec="seconds")
    lines += [
        f"  solver:     {r.solver} (rlimit {r.rlimit}, timeout {r.timeout_ms} ms, seed {r.seed}), {r.time_s * 1e3:.1f} ms",
        f"  verishape:  {r.verishape_version}, encoding {r.encoding_hash}",
        f"  created:    {created}; {r.hits} hits",
        f"  key:        {r.key}",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------ export / import / prune


def _export(args: argparse.Namespace) -> int:
    """An SQLite copy of the store (``VACUUM INTO``): a file another machine imports."""
    target = Path(args.file)
    if target.exists():
        raise UsageError(f"export {args.file}: the file exists; export writes a new file")
    check_writable(target, "export")
    with open_existing(args.store) as store:
        try:
            store.export(target)
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"export {args.file}: cannot write there: {_first_line(exc)}") from None
        count = store.count()
    print(f"exported {count} records to {args.file}")
    return 0


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip() or type(exc).__name__).splitlines()[0]


def _import(args: argparse.Namespace) -> int:
    source = Path(args.file)
    if not source.is_file():
        raise UsageError(f"import {args.file}: no such file")
    with open_existing(args.store) as store:
        try:
            with _captured_warnings() as skipped:
                added = store.import_(source)
        except (OSError, ValueError, sqlite3.Error) as exc:
            raise UsageError(f"import {args.file}: not a proof store export ({_first_line(exc)})") from None
    print(f"imported {added} new records from {args.file} (records already in the store are kept)")
    foreign = _other_encoding_count(source)
    if foreign:
        print(f"{foreign} records in {args.file} were decided under another encoding: they are kept, but "
              "lookups here never match them (`verishape proofs prune --other-encodings` drops them)")
    if skipped:
        print(f"skipped {len(skipped)} records whose key does not match their own obligation "
              "(they could answer a question they do not state)")
    return 0


def _other_encoding_count(source: Path) -> int:
    """Records of ``source`` whose encoding hash is not this installation's."""
    from verishape.proofs.encoding import ENCODING_HASH

    db = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM proofs WHERE encoding_hash != ?", (ENCODING_HASH,)).fetchone()[0]
    finally:
        db.close()


def _prune(args: argparse.Namespace) -> int:
    if args.older_than is None and not args.unknown and not args.other_encodings:
        raise UsageError("proofs prune: say what to delete: --older-than DAYS, --unknown and/or --other-encodings")
    from verishape.proofs.encoding import ENCODING_HASH

    # The store deletes (other encodings OR older than), restricted to one verdict; --unknown
    # alone selects every unknown record, hence "older than the end of time".
    older_than = time.time() - args.older_than * 86400 if args.older_than is not None else None
    if args.unknown and older_than is None and not args.other_encodings:
        older_than = float("inf")
    with open_existing(args.store) as store:
        removed = store.prune(keep_encoding=ENCODING_HASH if args.other_encodings else None,
                              older_than=older_than, verdict="unknown" if args.unknown else None)
        left = store.count()
    print(f"pruned {removed} records; {left} left")
    return 0


# ------------------------------------------------------------------ check


@dataclasses.dataclass
class CheckReport:
    solver: str
    jobs: int
    records: int = 0
    seconds: float = 0.0
    agree: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    #: (record, checker answer, detail)
    disagreements: list[tuple[Any, str, str]] = dataclasses.field(default_factory=list)
    #: (record, checker answer, detail): the checker gave up or could not read the script
    not_redecided: list[tuple[Any, str, str]] = dataclasses.field(default_factory=list)
    stored_unknown: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    replayed: int = 0
    #: (record, what is wrong with its counterexample)
    bad_counterexamples: list[tuple[Any, str]] = dataclasses.field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.disagreements and not self.bad_counterexamples

    def as_json(self) -> dict[str, Any]:
        return {
            "solver": self.solver, "jobs": self.jobs, "records": self.records, "seconds": round(self.seconds, 3),
            "obligations_per_s": round(self.records / self.seconds, 1) if self.seconds else None,
            "agree": dict(self.agree), "disagreements": [_json_problem(r, a, d) for r, a, d in self.disagreements],
            "not_redecided": len(self.not_redecided),
            "not_redecided_records": [_json_problem(r, a, d) for r, a, d in self.not_redecided],
            "not_redecided_by_reason": dict(collections.Counter(_reason(a, d) for _, a, d in self.not_redecided)),
            "stored_unknown": dict(self.stored_unknown), "counterexamples_replayed": self.replayed,
            "bad_counterexamples": [_json_problem(r, "replay", d) for r, d in self.bad_counterexamples],
            "clean": self.clean,
        }


def _json_problem(r: Any, answer: str, detail: str) -> dict[str, Any]:
    return {"id": r.id, "kind": r.kind, "goal": r.goal, "stored": r.verdict, "checker": answer, "detail": detail}


def _reason(answer: str, detail: str) -> str:
    if answer == pc.UNKNOWN:
        return f"unknown ({detail or 'no reason'})"
    return detail.split(":", 1)[0] if detail else answer


def _check(args: argparse.Namespace) -> int:
    solver_module = "cvc5" if args.solver == "cvc5" else "z3"
    import importlib.util

    if importlib.util.find_spec(solver_module) is None:
        hint = "pip install 'verishape[proofs]'" if args.solver == "cvc5" else "pip install z3-solver"
        raise UsageError(f"proofs check --solver {args.solver}: the {solver_module} package is not installed ({hint})")
    with open_existing(args.store) as store:
        records = list(store.records())
    limits = pc.Limits(cvc5_rlimit=args.rlimit, timeout_ms=args.timeout_ms)
    show_progress = args.progress or sys.stderr.isatty()
    report = check_records(records, args.solver, args.jobs, limits, progress=sys.stderr if show_progress else None)
    if args.json:
        print(json.dumps(report.as_json(), indent=2, sort_keys=True))
    else:
        print_report(report, sys.stdout)
    return 0 if report.clean else 1


def check_records(records: list[Any], solver: str, jobs: int, limits: pc.Limits,
                  progress: TextIO | None = None) -> CheckReport:
    """Re-decide ``records`` with ``solver`` in ``jobs`` fresh processes while one more
    process replays the counterexamples; compare each answer with the stored verdict."""
    by_id = {r.id: r for r in records}
    tasks = [pc.Task(r.id, r.smtlib, r.rlimit, r.seed) for r in records]
    replays = [pc.Replay(r.id, r.goal_srepr, r.premises_srepr, r.counterexample, bool(r.undefined_goal))
               for r in records if r.verdict == "refuted"]
    report = CheckReport(solver=pc.solver_version(solver), jobs=jobs, records=len(records))
    bar = _Bar(len(tasks) + len(replays), progress)
    answers: list[pc.Answer] = []

    def done(kind: str, result: Any) -> None:
        if kind == "decide":
            answers.append(result)
        else:
            rid, problem = result
            report.replayed += 1
            if problem is not None:
                report.bad_counterexamples.append((by_id[rid], problem))
        bar.advance(1)

    start = time.perf_counter()
    # Reversed: workers pop from the end, so records are decided oldest first.
    pc.run_farm({"decide": tasks[::-1], "replay": replays[::-1]}, {"decide": jobs, "replay": 1}, solver, limits, done)
    report.seconds = time.perf_counter() - start
    bar.close()
    for a in sorted(answers, key=lambda a: a.id):
        _classify(report, by_id[a.id], a)
    report.bad_counterexamples.sort(key=lambda p: p[0].id)
    return report


def _classify(report: CheckReport, record: Any, a: pc.Answer) -> None:
    expected = pc.EXPECTED.get(record.verdict)
    if expected is None:  # stored unknown: anything the checker says is news, not a disagreement
        report.stored_unknown[a.answer] += 1
    elif a.answer == expected:
        report.agree[record.verdict] += 1
    elif a.answer in (pc.SAT, pc.UNSAT):
        report.disagreements.append((record, a.answer, a.detail))
    else:
        report.not_redecided.append((record, a.answer, a.detail))


_MEANING = {pc.SAT: "sat (refuted)", pc.UNSAT: "unsat (proved)"}


def print_report(report: CheckReport, out: TextIO) -> None:
    rate = f"{report.records / report.seconds:.1f}/s" if report.seconds else "-"
    print(f"proofs check: {report.records} obligations re-decided by {report.solver} from their SMT-LIB text "
          f"in {report.seconds:.1f} s ({rate}, {report.jobs} jobs)", file=out)
    agree = sum(report.agree.values())
    print(f"  agree: {agree}" + _breakdown(dict(report.agree)), file=out)
    if report.not_redecided:
        reasons = collections.Counter(_reason(a, d) for _, a, d in report.not_redecided)
        print(f"  not re-decided: {len(report.not_redecided)} ("
              + ", ".join(f"{why}: {n}" for why, n in reasons.most_common()) + ")", file=out)
        for r, a, d in report.not_redecided:
            if a == pc.ERROR:
                print(f"    #{r.id} [{r.kind}] {r.goal}: {d}", file=out)
    if report.stored_unknown:
        print(f"  stored unknown: {sum(report.stored_unknown.values())} (checker: "
              + ", ".join(f"{k} {n}" for k, n in sorted(report.stored_unknown.items())) + ")", file=out)
    bad = len(report.bad_counterexamples)
    print(f"  counterexamples replayed with Python integers: {report.replayed}"
          + (f", {bad} do not hold" if bad else ", all hold"), file=out)
    if report.disagreements:
        print(f"DISAGREEMENTS ({len(report.disagreements)}):", file=out)
        for r, a, d in report.disagreements:
            print(f"  #{r.id} [{r.kind}] {r.goal}: stored {r.verdict}, {report.solver} says {_MEANING[a]}", file=out)
            for p in _premises(r) or ["(no premises)"]:
                print(f"      premise {readable(p)}", file=out)
            print(f"      decided by {r.solver} (rlimit {r.rlimit}); script: verishape proofs show {r.id}", file=out)
    if report.bad_counterexamples:
        print(f"COUNTEREXAMPLES THAT DO NOT HOLD ({bad}):", file=out)
        for r, why in report.bad_counterexamples:
            print(f"  #{r.id} [{r.kind}] {r.goal}: stored refuted at {r.counterexample}: {why}", file=out)
    print("clean" if report.clean else "NOT CLEAN", file=out)


class _Bar:
    """A one-line progress bar on ``out`` (no dependency); nothing when ``out`` is None."""

    def __init__(self, total: int, out: TextIO | None, width: int = 30) -> None:
        self.total, self.out, self.width, self.done = total, out, width, 0
        self._last = -1.0
        self._draw()

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= 0.1 or self.done >= self.total:
            self._draw()
            self._last = now

    def _draw(self) -> None:
        if self.out is None:
            return
        filled = self.width * self.done // self.total if self.total else self.width
        self.out.write(f"\rproofs check [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total}")
        self.out.flush()

    def close(self) -> None:
        if self.out is not None:
            self.out.write("\n")
            self.out.flush()


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "stats": _stats, "check": _check, "list": _list, "show": _show,
    "export": _export, "import": _import, "prune": _prune,
}
