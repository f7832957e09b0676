"""Group findings by root cause, and mark the ones a user says are known upstream.

Many findings are one bug seen through several ops (``squeeze``, ``squeeze.multiple``,
``squeeze_copy``) or both modes (a meta that lacks a check fails backed and unbacked).  A
maintainer fixes the check, not the witnesses, so the summary counts root causes:

* a finding whose fake run **raised** is keyed by the line of torch's Python meta or
  decomposition it raised from (``torch/_meta_registrations.py:2150 in meta_bn``);
* otherwise by the op family (``conv2d``/``conv3d`` -> ``convNd``, ``_copy`` and ``native_``
  stripped) or, when the fake run entered a Python meta/reference/decomposition, that function
  (every binary pointwise reference is one generated function), together with the check that
  differs: eager's error with numbers and symbols normalized, or what metadata differs.

Known upstream issues come from a file the user gives (``--known-issues``), never the network::

    [{"issue": "pytorch/pytorch#141567", "ops": ["upsample_nearest", "interpolate"],
      "match": "greater than 0", "kinds": ["meta_accepts_eager_rejects"], "note": "..."}]

``ops`` (families or op names), ``match`` (a regex over the root cause's check and its
witnesses' messages) and ``kinds`` are all optional; an entry matches when every given one does.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Sequence
from typing import Any

from verishape.core.errors import VerishapeError

_PREFIXES = ("nn.functional.", "special.", "linalg.", "masked.", "fft.", "sparse.")
#: Blame of a root cause: the most serious of its witnesses' (a real meta bug is not hidden by
#: a documented witness of the same check).
BLAME_ORDER = ("meta", "eager", "private", "documented")


class KnownIssuesError(VerishapeError, ValueError):
    """The ``--known-issues`` file cannot be used (a usage error: one line, exit 2)."""


def family(op: str) -> str:
    """The op family: ``nn.functional.conv3d`` -> ``convNd``, ``squeeze_copy`` -> ``squeeze``,
    ``_native_batch_norm_legit`` -> ``batch_norm``."""
    name = op.split("::")[-1]
    for prefix in _PREFIXES:
        name = name.removeprefix(prefix)
    name = name.split(".")[0].lstrip("_").removeprefix("native_")
    for suffix in ("_copy", "_legit", "_"):
        name = name.removesuffix(suffix)
    return re.sub(r"[123]d$", "Nd", name)


def normalize(text: str) -> str:
    """A message with its instance details removed: sizes, symbols, lists, the op's own name."""
    text = re.sub(r"^\w+(Error|Exception): ", "", text.strip())
    text = re.sub(r"\[[^\]]*\]", "[...]", text)
    text = re.sub(r"\b[suq]\d+\b", "s", text)
    text = re.sub(r"\d+", "N", text)
    text = re.sub(r"^[\w.]+\(\): ", "op(): ", text)
    return text[:200]


def check_of(f: dict[str, Any]) -> tuple[str, str]:
    """(where, what): the root-cause key of one finding record."""
    site = f.get("meta_site") or ""
    if site:
        return site, "raises " + normalize(f.get("meta_error", ""))
    where = f.get("meta_function") or family(f["op"])
    kind = f["kind"].removeprefix("unbacked_silent_")
    if f.get("eager_error") and f["kind"] not in ("compiled_rejects_unbacked_assert", "compiled_rejects_specialization"):
        return where, "misses eager's check: " + normalize(f["eager_error"])
    if f.get("meta_error"):
        return where, f"{kind}: " + normalize(f["meta_error"])
    return where, f"{kind}: " + normalize(f.get("message", ""))


def load_known(path: str) -> list[dict[str, Any]]:
    """The user's known-issues file, validated (a bad file is the user's error, said in one line)."""
    try:
        with open(path) as fh:
            entries = json.load(fh)
    except OSError as exc:
        raise KnownIssuesError(f"--known-issues {path}: cannot read it: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise KnownIssuesError(f"--known-issues {path}: not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(entries, list):
        raise KnownIssuesError(f"--known-issues {path}: expected a JSON list of entries, got {type(entries).__name__}")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("issue"), str):
            raise KnownIssuesError(f"--known-issues {path}: entry {i} needs an \"issue\" string")
        if "match" in e:
            try:
                re.compile(e["match"])
            except re.error as exc:
                raise KnownIssuesError(f"--known-issues {path}: entry {i} match {e['match']!r}: {exc}") from None
    return entries


def _known(entry: dict[str, Any], cause: dict[str, Any], witnesses: Sequence[dict[str, Any]]) -> bool:
    ops = entry.get("ops")
    if ops and not any(w["op"] in ops or family(w["op"]) in ops or cause["family"] in ops for w in witnesses):
        return False
    kinds = entry.get("kinds")
    if kinds and not any(w["kind"] in kinds for w in witnesses):
        return False
    match = entry.get("match")
    if match:
        texts = [cause["where"], cause["check"]] + [w.get("message", "") for w in witnesses]
        if not any(re.search(match, t, re.IGNORECASE) for t in texts):
            return False
    return True


def group(findings: Sequence[dict[str, Any]], known: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Root causes, each with its witnesses (findings), blame, kinds and known upstream issues."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for f in findings:
        by_key[check_of(f)].append(f)
    causes = []
    for (where, check), witnesses in sorted(by_key.items()):
        blames = {w.get("blame") or ("documented" if w.get("documented") else "meta") for w in witnesses}
        cause = {
            "family": family(witnesses[0]["op"]),
            "families": sorted({family(w["op"]) for w in witnesses}),
            "where": where, "check": check,
            "blame": next(b for b in BLAME_ORDER if b in blames) if blames & set(BLAME_ORDER) else "meta",
            "kinds": sorted({w["kind"] for w in witnesses}),
            "witnesses": [{k: w.get(k, "") for k in ("op", "variant", "mode", "kind")} for w in witnesses],
        }
        cause["known_upstream"] = [e["issue"] for e in known if _known(e, cause, witnesses)]
        causes.append(cause)
    for i, cause in enumerate(causes):
        cause["id"] = f"RC{i + 1}"
    return causes


def summary(causes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Root-cause counts by blame, and how many of each blame are known upstream."""
    by_blame = collections.Counter(c["blame"] for c in causes)
    known = collections.Counter(c["blame"] for c in causes if c["known_upstream"])
    return {"total": len(causes), "by_blame": dict(sorted(by_blame.items())),
            "known_upstream_by_blame": dict(sorted(known.items()))}
