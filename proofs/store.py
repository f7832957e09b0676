"""The proof store: every solver obligation verishape asks, with its answer, on disk.

Why: a decision rests on one solver call, and without a store it is forgotten when the
process exits, so every restart, every rank of a multi-process job and every CI run asks
again, and nobody can check an answer after the fact.  The store keeps each obligation
with its verdict and a self-contained SMT-LIB 2 script, so that a warm process answers
from disk (no solver call, the same answer) and any SMT solver can re-decide the record
later (``verishape proofs check``).

Location: ``$VERISHAPE_PROOF_STORE`` (a file path; ``off``, ``0``, ``none`` or the empty
string turn the store off), else ``$XDG_CACHE_HOME/verishape/proofs.sqlite`` (by default
``~/.cache/verishape/proofs.sqlite``).

It is one SQLite file (standard library, no server) in WAL mode with a busy timeout, so
several processes (one per GPU rank) read and write it at once.  Lookups are plain
indexed reads on one connection per process; nothing is synced to disk per lookup
(``synchronous=NORMAL``: a commit reaches the write-ahead log, which is synced at
checkpoints).  Hit counters and the per-process ``runs`` row are written once, at exit.
A store that is corrupt, locked past the busy timeout, read-only or not creatable is a
one-line warning on logger ``verishape`` and the process goes on without it: the store is
a cache of answers, never a reason for a compile to fail.

Schema (``meta.schema_version`` = 1)::

    meta(key TEXT PRIMARY KEY, value TEXT)
    proofs(
      id INTEGER PRIMARY KEY,
      key TEXT UNIQUE NOT NULL,        -- obligation_key(): sha256 of the goal's srepr, the sorted,
                                       --   de-duplicated premise sreprs, the encoding hash, the
                                       --   solver and its version, and the limits (rlimit, timeout_ms, seed)
      kind TEXT NOT NULL,              -- who asked: compile | export | audit | fuzz | minimize | query
      goal TEXT NOT NULL,              -- str(goal), for people
      goal_srepr TEXT NOT NULL,        -- verishape.proofs.record.dump_expr(goal); parse with load_expr
      premises_srepr TEXT NOT NULL,    -- JSON list of dump_expr(premise), sorted, no duplicates
      verdict TEXT NOT NULL,           -- proved | refuted | unknown
      vacuous INTEGER NOT NULL,        -- 0/1: proved because the premises contradict each other
      undefined_goal INTEGER NOT NULL, -- 0/1: refuted because the goal raises at the counterexample
      counterexample TEXT,             -- JSON {symbol name: int or float} or NULL
      reason TEXT,                     -- why unknown, or NULL
      solver TEXT NOT NULL,            -- e.g. "z3 4.15.4"
      rlimit INTEGER NOT NULL, timeout_ms INTEGER NOT NULL, seed INTEGER NOT NULL,
      time_s REAL NOT NULL,            -- solver time when it was decided
      verishape_version TEXT NOT NULL,
      encoding_hash TEXT NOT NULL,     -- verishape.proofs.encoding.ENCODING_HASH (the solver modules)
      smtlib TEXT NOT NULL,            -- (set-logic ALL), declarations, premises, (assert (not goal)),
                                       --   (check-sat): unsat means proved; no set-option lines
      created REAL NOT NULL,           -- unix time
      hits INTEGER NOT NULL DEFAULT 0, -- lookups answered from this record (flushed at exit)
      exact INTEGER NOT NULL DEFAULT 1 -- 0/1: SolveResult.exact (every term had an exact encoding)
    )
    runs(id INTEGER PRIMARY KEY, pid INTEGER, argv TEXT, started REAL, ended REAL,
         hits INTEGER, solver_calls INTEGER, records_added INTEGER)

``unknown`` answers are stored too (a warm process gives the same answer), except those
the wall-clock backstop or a solver error produced, which depend on the machine's load.
The limits are part of the key, so a question asked again under higher limits misses the
stored ``unknown`` and is solved again.

Trust: a record's key is recomputed from its own text on :meth:`ProofStore.import_`, so an
imported record can only answer the obligation it names; its verdict is trusted like a
cache artifact.  ``verishape proofs check`` re-decides every record with another solver.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import z3

from verishape.proofs.encoding import ENCODING_HASH
from verishape.proofs.result import Limits, SolveResult
from verishape._version import __version__

log = logging.getLogger("verishape")

SCHEMA_VERSION = 1
ENV_VAR = "VERISHAPE_PROOF_STORE"
#: Values of ``$VERISHAPE_PROOF_STORE`` that turn the store off (compared lower-case, stripped).
OFF_VALUES = frozenset({"off", "0", "", "none"})
#: How long a writer waits for another process's write lock before giving up (then the
#: store is off for this process, with a warning).
BUSY_TIMEOUT_MS = 2_000
#: The verishape version every record made here names.
VERSION = __version__
#: The solver (and version) every record made by this installation names.
SOLVER = f"z3 {z3.get_version_string()}"

_COLUMNS = ("id", "key", "kind", "goal", "goal_srepr", "premises_srepr", "verdict", "vacuous", "undefined_goal",
            "counterexample", "reason", "solver", "rlimit", "timeout_ms", "seed", "time_s", "verishape_version",
            "encoding_hash", "smtlib", "created", "hits", "exact")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS proofs(
  id INTEGER PRIMARY KEY,
  key TEXT UNIQUE NOT NULL,
  kind TEXT NOT NULL,
  goal TEXT NOT NULL,
  goal_srepr TEXT NOT NULL,
  premises_srepr TEXT NOT NULL,
  verdict TEXT NOT NULL CHECK (verdict IN ('proved', 'refuted', 'unknown')),
  vacuous INTEGER NOT NULL,
  undefined_goal INTEGER NOT NULL,
  counterexample TEXT,
  reason TEXT,
  solver TEXT NOT NULL,
  rlimit INTEGER NOT NULL, timeout_ms INTEGER NOT NULL, seed INTEGER NOT NULL,
  time_s REAL NOT NULL,
  verishape_version TEXT NOT NULL,
  encoding_hash TEXT NOT NULL,
  smtlib TEXT NOT NULL,
  created REAL NOT NULL,
  hits INTEGER NOT NULL DEFAULT 0,
  exact INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS runs(id INTEGER PRIMARY KEY, pid INTEGER, argv TEXT, started REAL, ended REAL,
                                hits INTEGER, solver_calls INTEGER, records_added INTEGER);
"""


class StoreUnavailable(Exception):
    """The store file cannot be used (corrupt, locked, read-only, wrong schema)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class StoredProof:
    """One row of ``proofs``: the columns of the schema, with 0/1 columns as ``bool``.
    ``counterexample`` and ``premises_srepr`` hold the JSON text stored; see
    :attr:`counterexample_values` and :attr:`premise_sreprs` for the parsed values."""

    key: str
    kind: str
    goal: str
    goal_srepr: str
    premises_srepr: str
    verdict: str
    vacuous: bool
    undefined_goal: bool
    counterexample: str | None
    reason: str | None
    solver: str
    rlimit: int
    timeout_ms: int
    seed: int
    time_s: float
    verishape_version: str
    encoding_hash: str
    smtlib: str
    created: float
    hits: int = 0
    exact: bool = True
    id: int | None = None

    @property
    def counterexample_values(self) -> dict[str, int | float] | None:
        return None if self.counterexample is None else json.loads(self.counterexample)

    @property
    def premise_sreprs(self) -> list[str]:
        return json.loads(self.premises_srepr)

    @property
    def limits(self) -> Limits:
        return Limits(rlimit=self.rlimit, timeout_ms=self.timeout_ms, seed=self.seed)

    def to_result(self, *, time_s: float) -> SolveResult:
        """The answer this record gives, as the solver gave it (``from_store`` set;
        ``time_s`` is the lookup's time)."""
        return SolveResult(self.verdict, counterexample=self.counterexample_values,  # type: ignore[arg-type]
                           vacuous=self.vacuous, undefined_goal=self.undefined_goal, exact=self.exact,
                           reason=self.reason or "", time_s=time_s, from_store=True)

    @classmethod
    def from_row(cls, row: sqlite3.Row | tuple[Any, ...]) -> StoredProof:
        values = dict(zip(_COLUMNS, row))
        for flag in ("vacuous", "undefined_goal", "exact"):
            values[flag] = bool(values[flag])
        return cls(**values)

    def row(self) -> tuple[Any, ...]:
        """The column values in :data:`_COLUMNS` order, without ``id``."""
        values = dataclasses.asdict(self)
        for flag in ("vacuous", "undefined_goal", "exact"):
            values[flag] = int(values[flag])
        return tuple(values[c] for c in _COLUMNS[1:])


def premise_texts(premise_sreprs: Iterable[str]) -> list[str]:
    """The premises as the key sees them: sorted, without duplicates (a set of facts)."""
    return sorted(set(premise_sreprs))


def obligation_key(goal_srepr: str, premise_sreprs: Iterable[str], limits: Limits, *,
                   encoding_hash: str | None = None, solver: str | None = None) -> str:
    """The key of an obligation: everything its answer depends on (by default under
    this installation's encoding hash and solver).  Computed from text only, so a
    record's key can be checked against its own columns."""
    encoding_hash = ENCODING_HASH if encoding_hash is None else encoding_hash
    solver = SOLVER if solver is None else solver
    # the limits whole, in field order: a limit added to Limits enters every key
    payload = json.dumps([goal_srepr, premise_texts(premise_sreprs), encoding_hash, solver,
                          *dataclasses.astuple(limits)], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def key_of(proof: StoredProof) -> str:
    """The key ``proof``'s own columns give (a record whose key differs is refused)."""
    return obligation_key(proof.goal_srepr, proof.premise_sreprs, proof.limits,
                          encoding_hash=proof.encoding_hash, solver=proof.solver)


def default_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verishape" / "proofs.sqlite"


def configured_path() -> Path | None:
    """The store's path from ``$VERISHAPE_PROOF_STORE`` or the default; None when off."""
    value = os.environ.get(ENV_VAR)
    if value is None:
        return default_path()
    if value.strip().lower() in OFF_VALUES:
        return None
    return Path(value).expanduser()


def _warn_unusable(path: Path | str, exc: BaseException) -> None:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    log.warning("verishape: proof store %s is unusable (%s); continuing without it (set %s=off to silence)",
                path, reason, ENV_VAR)


class ProofStore:
    """One connection to one store file.  Thread-safe (one lock); not to be shared
    across ``fork``: :func:`process_store` opens a new one in a child process."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn = self._connect()
        #: this process's counters, written to ``runs`` by :meth:`close`
        self.hits = 0
        self.solver_calls = 0
        self.records_added = 0
        self._started = time.time()
        self._pending_hits: dict[int, int] = {}
        self._closed = False
        self.broken = False

    # ------------------------------------------------------------------ opening

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(str(exc)) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreUnavailable(f"cannot switch to WAL journal mode (got {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
            with _transaction(conn):  # a write: a read-only file fails here, not later
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(statement)
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None:
                    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                elif row[0] != str(SCHEMA_VERSION):
                    raise StoreUnavailable(f"schema version {row[0]}, this verishape reads {SCHEMA_VERSION}")
        except StoreUnavailable:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(str(exc)) from exc
        return conn

    # ------------------------------------------------------------------ the compile path

    def lookup(self, key: str) -> StoredProof | None:
        """The record with this key, or None.  Counts a hit (written at exit)."""
        with self._lock:
            row = self._conn.execute(_SELECT_BY_KEY, (key,)).fetchone()
            if row is None:
                return None
            proof = StoredProof.from_row(row)
            self.hits += 1
            self._pending_hits[proof.id] = self._pending_hits.get(proof.id, 0) + 1  # type: ignore[index]
            return proof

    def note_solver_call(self) -> None:
        """Count a question this process had to send to the solver (for ``runs``)."""
        with self._lock:
            self.solver_calls += 1

    def add(self, proof: StoredProof) -> bool:
        """Insert ``proof``; False when a record with its key is already there (another
        process decided it first: the same question under the same limits has the same
        answer, so the first one stays)."""
        with self._lock:
            cur = self._conn.execute(_INSERT, proof.row())
            added = cur.rowcount == 1
            self.records_added += added
            return added

    # ------------------------------------------------------------------ reading, for `verishape proofs`

    def get(self, id: int) -> StoredProof | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM proofs WHERE id = ?", (id,)).fetchone()
        return None if row is None else StoredProof.from_row(row)

    def records(self, verdict: str | None = None, kind: str | None = None) -> Iterator[StoredProof]:
        """Every record (optionally of one verdict and/or kind), oldest first."""
        where, args = [], []
        if verdict is not None:
            where.append("verdict = ?")
            args.append(verdict)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        sql = f"SELECT {', '.join(_COLUMNS)} FROM proofs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", args).fetchall()
        for row in rows:
            yield StoredProof.from_row(row)

    def count(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM proofs").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        """Records by verdict and by kind, the file's size, and the last process that
        used the store (its hits and solver calls, written when it exited)."""
        with self._lock:
            by_verdict = dict(self._conn.execute("SELECT verdict, COUNT(*) FROM proofs GROUP BY verdict").fetchall())
            by_kind = dict(self._conn.execute("SELECT kind, COUNT(*) FROM proofs GROUP BY kind").fetchall())
            last = self._conn.execute("SELECT pid, argv, started, ended, hits, solver_calls, records_added "
                                      "FROM runs ORDER BY ended DESC, id DESC LIMIT 1").fetchone()
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        last_run = None if last is None else dict(zip(
            ("pid", "argv", "started", "ended", "hits", "solver_calls", "records_added"), last))
        if last_run is not None:
            last_run["argv"] = json.loads(last_run["argv"])
        return {
            "path": str(self.path), "records": sum(by_verdict.values()), "by_verdict": by_verdict,
            "by_kind": by_kind, "size_bytes": size, "last_run": last_run,
            "hits_last_run": None if last_run is None else last_run["hits"],
            "solver_calls_last_run": None if last_run is None else last_run["solver_calls"],
        }

    # ------------------------------------------------------------------ moving stores around

    def export(self, path: str | Path) -> None:
        """Write a copy of the whole store to ``path`` (a new SQLite file that
        :meth:`import_` on another machine reads)."""
        target = Path(path)
        if target.exists():
            raise FileExistsError(f"{target} exists; export writes a new file")
        with self._lock:
            self._conn.execute("VACUUM INTO ?", (str(target),))

    def import_(self, path: str | Path) -> int:
        """Add the records of the store file ``path`` that are not here yet; returns how
        many were added.  A record whose key does not match its own columns is skipped
        (it could answer an obligation it does not name)."""
        source = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
        try:
            version = source.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if version is None or version[0] != str(SCHEMA_VERSION):
                raise ValueError(f"{path}: not a verishape proof store of schema version {SCHEMA_VERSION}")
            rows = source.execute(f"SELECT {', '.join(_COLUMNS)} FROM proofs ORDER BY id").fetchall()
        finally:
            source.close()
        added = 0
        with self._lock, _transaction(self._conn):
            for row in rows:
                proof = dataclasses.replace(StoredProof.from_row(row), hits=0)
                if key_of(proof) != proof.key:
                    log.warning("verishape: skipped imported proof %s: its key does not match its obligation",
                                proof.id)
                    continue
                added += self._conn.execute(_INSERT, proof.row()).rowcount == 1
        self.records_added += added
        return added

    def prune(self, *, keep_encoding: str | None = ENCODING_HASH, older_than: float | None = None,
              verdict: str | None = None) -> int:
        """Delete records that can no longer be hit or are not wanted; returns how many.

        ``keep_encoding``: delete records of any other encoding hash (they never match a
        key this installation computes); None keeps every encoding.  ``older_than``:
        delete records created before this unix time.  ``verdict``: only records with
        this verdict are considered (e.g. ``"unknown"``)."""
        clauses, args = [], []
        if keep_encoding is not None:
            clauses.append("encoding_hash != ?")
            args.append(keep_encoding)
        if older_than is not None:
            clauses.append("created < ?")
            args.append(older_than)
        if not clauses:
            return 0
        sql = "DELETE FROM proofs WHERE (" + " OR ".join(clauses) + ")"
        if verdict is not None:
            sql += " AND verdict = ?"
            args.append(verdict)
        with self._lock:
            return self._conn.execute(sql, args).rowcount

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Write this process's hit counts and its ``runs`` row, then close.  Only a
        process that used the store (a lookup, a solver call or a record) writes a row."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if not self.broken and (self.hits or self.solver_calls or self.records_added):
                    with _transaction(self._conn):
                        self._conn.executemany("UPDATE proofs SET hits = hits + ? WHERE id = ?",
                                               [(n, i) for i, n in self._pending_hits.items()])
                        self._conn.execute(
                            "INSERT INTO runs(pid, argv, started, ended, hits, solver_calls, records_added) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (os.getpid(), json.dumps(sys.argv), self._started, time.time(), self.hits,
                             self.solver_calls, self.records_added))
            except sqlite3.Error as exc:
                _warn_unusable(self.path, exc)
            finally:
                self._conn.close()


_SELECT_BY_KEY = f"SELECT {', '.join(_COLUMNS)} FROM proofs WHERE key = ?"
_INSERT = (f"INSERT OR IGNORE INTO proofs({', '.join(_COLUMNS[1:])}) "
           f"VALUES ({', '.join('?' * (len(_COLUMNS) - 1))})")


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction; ``BEGIN IMMEDIATE`` takes the write lock up front, so a
    busy store waits (busy timeout) at the start instead of failing midway."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def open_store(path: str | Path | None = None) -> ProofStore | None:
    """The store at ``path`` (None: ``$VERISHAPE_PROOF_STORE`` or the default), or None
    when the store is off or unusable (then with a one-line warning)."""
    resolved = configured_path() if path is None else Path(path)
    if resolved is None:
        return None
    try:
        return ProofStore(resolved)
    except StoreUnavailable as exc:
        _warn_unusable(resolved, exc)
        return None


# ---------------------------------------------------------------------- the process's store

_process_lock = threading.Lock()
#: (pid, the environment variable's value) -> this process's store (None: off/unusable)
_process: dict[tuple[int, str | None], ProofStore | None] = {}
#: stores opened by a parent process before a fork: kept referenced, never closed here
_inherited: list[ProofStore] = []


def process_store() -> ProofStore | None:
    """This process's store, opened on first use, following ``$VERISHAPE_PROOF_STORE``
    (a change of the variable opens the new location).  A child made by ``fork``
    opens its own connection.  Its ``runs`` row is written when the process exits."""
    ident = (os.getpid(), os.environ.get(ENV_VAR))
    store = _process.get(ident, _MISSING)
    if store is not _MISSING:
        return store  # type: ignore[return-value]
    with _process_lock:
        if ident in _process:
            return _process[ident]
        for (pid, _), other in list(_process.items()):
            if pid != ident[0] and other is not None:
                _inherited.append(other)
                del _process[(pid, _)]
        store = open_store()
        _process[ident] = store
        return store


def close_process_store() -> None:
    """Write this process's hit counts and ``runs`` row now and close its store; the next
    use opens it again.  For worker processes that are killed rather than exit (Ray kills
    its workers, so ``atexit`` never runs there).  A store disabled after a failure stays
    disabled."""
    with _process_lock:
        mine = [ident for ident, s in _process.items() if ident[0] == os.getpid() and s is not None]
        stores = [_process.pop(ident) for ident in mine]
    for store in stores:
        store.close()


def disable(store: ProofStore, exc: BaseException) -> None:
    """``store`` failed in use (locked past the timeout, disk full, file replaced):
    warn once and stop using it in this process."""
    if store.broken:
        return
    store.broken = True
    with _process_lock:
        for ident, s in list(_process.items()):
            if s is store:
                _process[ident] = None
    _warn_unusable(store.path, exc)


_MISSING = object()


@atexit.register
def _close_at_exit() -> None:
    for ident, store in list(_process.items()):
        if store is not None and ident[0] == os.getpid():
            store.close()
