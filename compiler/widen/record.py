"""A generic compile's widening record: the question log its lowering acted on (with the sizes its AOT graph computes
with), written beside the artifact under its cache keys by the process that lowered it, once lowered, and read by a
process torch's cache serves the artifact to.  Nothing else: the rest of a reuse comes from the live trace, or a verdict
(:mod:`verishape.compiler.widen.verdict`).

Note [A record belongs to its artifact] is enforced here; what ties a record to its artifact, and where it goes:
docs/compile.md, "Across restarts".  A record is also named by its binding, so two compiles of one key (a candidate and
a trace that pinned its size) each find their own.  A remote copy is read where the local folder lacks one, each wait
bounded by :data:`REMOTE_TIMEOUT_S`.  :class:`_Unpickler` keeps a record from naming code a log is not made of (not a
security boundary: torch unpickles its own entries without one)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import pathlib
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv

import verishape_records
from verishape._version import __version__
from verishape.core import torch_names, torch_seam

from .sizes import source_names

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

#: bumped when the payload's layout, its name or the meaning of a question changes
FORMAT = 5
#: the record format, verishape's version and torch's: in a record's name and payload
_VERSIONS = (FORMAT, __version__, str(torch.__version__))
_MAGIC = b"verishape-widen-record\n"
_DIGEST = 64  # hex sha256
#: how long a read or write of the remote cache may take before the record counts as absent
REMOTE_TIMEOUT_S = 2.0


class Dropped(Exception):
    """Why a record could not be used (one line, shown by ``verishape.explain``)."""


class Unrecordable(Exception):
    """Why a question log cannot be written as a record (it holds something that cannot be named in one: the log's
    own kinds refuse with TypeError, see ``KernelCall.__getstate__``)."""


def _name(cache_key: str, bound: tuple[Any, ...] | None = None) -> str:
    """A record's name: its artifact's key, :data:`_VERSIONS` and, for a widening record, its :func:`binding`."""
    named = (*_VERSIONS, cache_key, *(() if bound is None else (bound,)))
    return hashlib.sha256(repr(named).encode()).hexdigest()


def binding(env: ShapeEnv) -> tuple[Any, ...]:
    """What the log's expressions mean and were answered under: every symbol of ``env`` with the input sources bound
    to it and its range, the env's replacements, and its guards (an artifact cached under one key with other guards
    was lowered under other facts)."""
    ranges = {s: f"{vr.lower}..{vr.upper}" for s, vr in env.var_to_range.items()}
    symbols = tuple((str(s), tuple(source_names(env, s)), ranges.get(s, "?"))
                    for s in sorted(env.var_to_sources, key=str))
    replacements = tuple(sorted((str(k), str(v)) for k, v in getattr(env, "replacements", {}).items()))
    guards = tuple(sorted({_normal(g.expr) for g in getattr(env, "guards", ())}))
    return symbols, replacements, guards


def _normal(expr: sympy.Basic) -> str:
    """A guard in a form that does not depend on how it was written (torch re-installs a cached entry's guards from
    their printed form: ``Eq(s - 1, 1)`` comes back as ``Eq(s, 2)``, ``s < 32767`` as ``s <= 32766``): ``a op b`` as
    ``a - b op 0`` (expanded; ``>``, ``>=`` turned around, an integer's ``<`` made ``<=``, an equation up to sign)."""
    if isinstance(expr, sympy.Rel):
        op, lhs, rhs = expr.rel_op, expr.lhs, expr.rhs
        if op in (">", ">="):
            op, lhs, rhs = {">": "<", ">=": "<="}[op], rhs, lhs
        diff = sympy.expand(lhs - rhs)
        if op == "<" and diff.is_integer:
            op, diff = "<=", diff + 1
        diff = _divided(_floor_free(diff) if op == "<=" else diff, op)
        if op in ("==", "!="):
            diff = min(diff, sympy.expand(-diff), key=str)
        return f"{diff} {op} 0"
    return str(expr)


def _floor_free(diff: sympy.Expr) -> sympy.Expr:
    """An integer ``±(a // c) + b <= 0`` (``c`` a positive integer) as the same relation of ``a``: ``a // c <= k`` is
    ``a <= c*k + c - 1``, ``a // c >= k`` is ``a >= c*k`` (torch reads ``(s // 2) - 1 <= 0`` back as ``s - 3 <= 0``)."""
    const, rest = diff.as_coeff_Add()
    sign, term = rest.as_coeff_Mul()
    if not (isinstance(term, FloorDiv) and sign in (1, -1) and const.is_Integer and term.args[0].is_integer
            and term.args[1].is_Integer and term.args[1] > 0):
        return diff
    a, c = term.args
    return sympy.expand(a - (c * -const + c - 1) if sign == 1 else c * const - a)


def _divided(diff: sympy.Expr, op: str) -> sympy.Expr:
    """An integer ``g*e + b op 0`` (``g`` the content of the terms with symbols) as the same relation of ``e``:
    ``8*s - 4104 <= 0`` is ``s - 513 <= 0`` (the bound rounded up for ``<=``; an equation only where ``g`` divides
    ``b``)."""
    const, rest = diff.as_coeff_Add()
    content, primitive = rest.as_content_primitive()  # (1, 0) where no term has a symbol: left as it is
    if not (diff.is_integer and content.is_Integer and content > 1 and const.is_Integer):
        return diff
    if op == "<=":
        return primitive + sympy.ceiling(const / content)
    return primitive + const / content if (const % content) == 0 else diff


def copy(from_key: str, to_key: str, env: ShapeEnv) -> None:
    """Store the record of ``env``'s binding under ``from_key`` under ``to_key`` too (locally; nothing where there
    is none): a lowering the FX graph cache served here finds the record an earlier lowering wrote under the FX key,
    and files it under AOTAutograd's, for a process that cache serves (checked when read, like any other)."""
    bound = binding(env)
    try:
        data = pathlib.Path(verishape_records.record_path(_name(from_key, bound))).read_bytes()
    except FileNotFoundError:
        return
    verishape_records.write_record(_name(to_key, bound), data)


def dumps(log: Any, env: ShapeEnv, bound: tuple[Any, ...] | None = None) -> bytes:
    """The record of a finished lowering's question log (``bound``: ``env``'s binding, where the caller has it)."""
    plain = dataclasses.replace(log, _seen=set(), _kept={}, _busy=False)
    try:
        payload = pickle.dumps((*_VERSIONS, binding(env) if bound is None else bound, plain),
                               protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, RuntimeError) as exc:
        # what pickling raises on an object it cannot copy (RuntimeError: a pybind11 object)
        raise Unrecordable(f"{type(exc).__name__}: {exc}"[:200]) from None
    return sealed(_MAGIC, payload)


def sealed(magic: bytes, payload: bytes) -> bytes:
    """``payload`` after ``magic`` and its digest, as every record is filed: its reader tells it from another
    file, a truncated one or an edited one (:func:`unsealed`)."""
    return magic + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def unsealed(magic: bytes, data: bytes) -> bytes:
    """The payload of a :func:`sealed` record; :class:`Dropped` where ``data`` is none, with why."""
    head = len(magic)
    digest, payload = data[head:head + _DIGEST], data[head + _DIGEST + 1:]
    if not data.startswith(magic) or len(data) < head + _DIGEST + 1:
        raise Dropped("the widening record is not one (truncated, or another file)")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        raise Dropped("the widening record does not match its digest (truncated or edited)")
    return payload


def loads(data: bytes, env: ShapeEnv, candidates: frozenset[sympy.Symbol], bound: tuple[Any, ...] | None = None
          ) -> Any:
    """The question log in ``data``, checked against the live trace's ``env`` (``bound``: as for :func:`dumps`); raises
    :class:`Dropped` with the reason."""
    try:
        fmt, version, torch_version, bound_there, log = _Unpickler(io.BytesIO(unsealed(_MAGIC, data))).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as exc:
        raise Dropped(f"the widening record cannot be read ({type(exc).__name__}: {exc})"[:200]) from None
    if (fmt, version, torch_version) != _VERSIONS:
        raise Dropped(f"the widening record was written by verishape {version} on torch {torch_version} "
                      f"(format {fmt}); this is verishape {__version__} on torch {torch.__version__}")
    if bound_there != (binding(env) if bound is None else bound):
        raise Dropped("the widening record's sizes are bound to other inputs, or its facts (ranges, guards) "
                      "differ from this trace's")
    if frozenset(log.candidates) != candidates:
        raise Dropped("the widening record was made for other sizes than this trace keeps")
    return log


def save(cache_keys: list[str], log: Any, env: ShapeEnv) -> list[str]:
    """Write the record of ``log`` under each of one artifact's ``cache_keys`` wherever torch keeps it:
    the local folder (raises OSError where it cannot), the remote cache and the mega-cache list.
    Returns why a remote copy was not written (empty: written, or no remote cache)."""
    bound = binding(env)
    data = dumps(log, env, bound)
    for name in (_name(key, bound) for key in cache_keys):
        verishape_records.write_record(name, data)
        _record_artifact(name, data)
        if remote_enabled():
            try:
                _remote(lambda client: client.set(_REMOTE_PREFIX + name, data), "take")
            except Dropped as exc:
                return [str(exc)]
    return []


def write_local(key: str, data: bytes) -> None:
    """Another record kind filed under ``key`` (checked by its reader) in the local folder and the saved artifacts."""
    verishape_records.write_record(_name(key), data)
    _record_artifact(_name(key), data)


def read_local(key: str) -> bytes | None:
    """What :func:`write_local` filed under ``key``; None where the local folder has none."""
    with contextlib.suppress(OSError):
        return pathlib.Path(verishape_records.record_path(_name(key))).read_bytes()
    return None


def load(cache_key: str, env: ShapeEnv, candidates: frozenset[sympy.Symbol]) -> Any:
    """The checked question log stored under ``cache_key``: the local folder's copy, else the remote cache's (then
    kept locally too); raises :class:`Dropped`."""
    bound = binding(env)
    name = _name(cache_key, bound)
    try:
        data, remote = pathlib.Path(verishape_records.record_path(name)).read_bytes(), False
    except FileNotFoundError:
        data, remote = _remote_get(name), True
    except OSError as exc:
        raise Dropped(f"the widening record cannot be read ({exc.strerror})") from None
    log = loads(data, env, candidates, bound)
    if remote:
        with contextlib.suppress(OSError):  # not kept: the next process reads the remote copy again
            verishape_records.write_record(name, data)
    _record_artifact(name, data)  # a warm process's saved artifacts carry it on, as torch's do
    return log


# ---------------------------------------------------------------------------- the remote cache (Redis)


def remote_enabled() -> bool:
    """Whether torch's AOTAutograd or FX-graph remote cache is on (the record follows them)."""
    return any(callable(fn := torch_seam.optional(dotted)) and fn() for dotted in torch_names.REMOTE_CACHE_SWITCHES)


_REMOTE_PREFIX = "verishape-widen:"


def _remote(call: Callable[[Any], Any], verb: str) -> Any:
    """``call`` on a Redis client where torch's own remote cache would connect (its environment variables), with a
    bounded wait; raises :class:`Dropped` where the redis package is not installed or Redis fails (``verb``: what it
    did not do with the record)."""
    try:
        import redis
    except ImportError:
        raise Dropped("torch's remote cache is on but the redis package is not installed") from None
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # one try, bounded: redis-py's default retries with backoff would wait several times as long
    opts = dict(socket_timeout=REMOTE_TIMEOUT_S, socket_connect_timeout=REMOTE_TIMEOUT_S, retry=Retry(NoBackoff(), 0))
    try:
        if "TORCHINDUCTOR_REDIS_URL" in os.environ:
            return call(redis.Redis.from_url(os.environ["TORCHINDUCTOR_REDIS_URL"], **opts))
        return call(redis.Redis(host=os.environ.get("TORCHINDUCTOR_REDIS_HOST", "localhost"),
                                port=int(os.environ.get("TORCHINDUCTOR_REDIS_PORT", 6379)), **opts))
    except redis.exceptions.RedisError as exc:
        raise Dropped(f"the remote cache (Redis) did not {verb} the widening record ({type(exc).__name__}: "
                      f"{exc})"[:200]) from None


def _remote_get(name: str) -> bytes:
    if not remote_enabled():
        raise Dropped("no widening record for the cached artifact and this trace's sizes and facts (it was "
                      "compiled without verishape's record, under other guards, or the record was removed)")
    data = _remote(lambda client: client.get(_REMOTE_PREFIX + name), "give")
    if data is None:
        raise Dropped("no widening record for the cached artifact, locally or in the remote cache")
    if not isinstance(data, bytes):
        raise Dropped("the remote cache gave the widening record as something other than bytes")
    return data


# ---------------------------------------------------------------------------- torch's mega-cache


def _record_artifact(name: str, data: bytes) -> None:
    """Add the record to the artifacts ``torch.compiler.save_cache_artifacts()`` returns."""
    manager = torch_seam.optional(torch_names.CACHE_ARTIFACT_MANAGER)
    if _ARTIFACT_REGISTERED and manager is not None and hasattr(manager, "record_artifact"):
        manager.record_artifact(verishape_records.ARTIFACT_TYPE, name, data)


#: What a question log is made of; nothing else is unpickled from a record.
_ALLOWED_PREFIXES = ("sympy.", "mpmath.", "torch.utils._sympy.", "verishape.compiler.widen.")
_ALLOWED = {("builtins", n) for n in ("set", "frozenset", "tuple", "list", "dict", "int", "float", "bool", "str",
                                      "bytes", "complex", "slice")} | {
    ("copyreg", "_reconstructor"), ("builtins", "object"), ("collections", "OrderedDict"), ("fractions", "Fraction")}


class _Unpickler(pickle.Unpickler):
    """Unpickles only classes of SymPy, value ranges and verishape's widening records, plain Python values and torch's
    dtypes, layouts, memory formats and devices (an operator is named by text and looked up in ``torch.ops``): a
    record cannot name any function, so it cannot call code of its choosing by name."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module.startswith(_ALLOWED_PREFIXES) or module in ("sympy", "mpmath"):
            value = super().find_class(module, name)
            if isinstance(value, type):  # a class: a function (sympify evaluates text) is never unpickled
                return value
        if module == "torch":
            value = getattr(torch, name, None)
            if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)) or value is torch.device:
                return value
        raise Dropped(f"the widening record names {module}.{name}, which no record may contain")


#: registered at ``import torch`` by verishape's plug-in (verishape_autoload), again here for a process that turned
#: plug-ins off (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``)
_ARTIFACT_REGISTERED = verishape_records.register_cache_artifact()
