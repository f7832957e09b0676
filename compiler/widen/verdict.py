"""A size-1 AOT comparison, remembered beside the artifact: a warm start looks it up.

Note [A record belongs to its artifact] is enforced here for verdicts: what one is filed under
and when (docs/compile.md, "A warm start as a lookup (issue 49)").  Answers proved in place of
the comparison (Note [A candidate's answers stand in for its AOT trace]) are filed as one that held.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config

from . import record
from .binding import Binding
from .snapshot import attribute

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from .kept import Kept

_MAGIC = b"verishape-aot-verdict\n"


def key(k: Kept, env: ShapeEnv, gm: torch.fx.GraphModule, aot_kwargs: dict[str, Any], binding: Binding,
        relaid: frozenset[int]) -> str:
    """The digest of all the new trace's AOT graph and the renaming depend on, and of both traces'
    facts and global state (the kept graph's own part is the artifact key a verdict is filed under:
    torch files entries with other guards under one key, and a trace decides by its env's facts)."""
    text = repr((_graph(gm), _options(aot_kwargs), _binding(binding), sorted(relaid),
                 record.binding(k.env), record.binding(env), k.global_state, _state()))
    return hashlib.sha256(text.encode()).hexdigest()


def _graph(gm: torch.fx.GraphModule) -> Any:
    """A graph's code, its placeholders' values and its attributes (a higher-order op's branch: its own graph)."""
    placeholders = [_describe(n.meta.get("example_value", n.meta.get("val"))) for n in
                    gm.graph.find_nodes(op="placeholder")]
    return (gm.code, placeholders, [(n.target, _describe(attribute(gm, n.target)))
                                    for n in gm.graph.find_nodes(op="get_attr")])


def lookup(k: Kept, trace_key: str) -> str | None:
    """The kept AOT graph's fingerprint where a verdict says the comparison held; None on a
    miss (no verdict, or one that does not check)."""
    for artifact in _artifact_keys(k):
        data = record.read_local(f"verdict:{artifact}:{trace_key}")
        try:
            named, key_, fingerprint = json.loads(record.unsealed(_MAGIC, data or b""))
        except (record.Dropped, ValueError, TypeError):
            continue  # none, or not one that checks
        if (named, key_) == (artifact, trace_key) and isinstance(fingerprint, str):
            return fingerprint
    return None


def remember(k: Kept, trace_key: str, fingerprint: str) -> None:
    """File the verdict under every key the artifact is cached under (locally and in the artifacts torch saves: a
    verdict that cannot be written costs a later process a trace, never this one its reuse)."""
    for artifact in _artifact_keys(k):
        payload = json.dumps([artifact, trace_key, fingerprint]).encode()
        try:
            record.write_local(f"verdict:{artifact}:{trace_key}", record.sealed(_MAGIC, payload))
        except OSError:
            return


def _artifact_keys(k: Kept) -> tuple[str, ...]:
    return tuple(k.artifact_keys) if k.cache_key is None else (k.cache_key,)


def _describe(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return ("tensor", type(v).__name__, str(tuple(v.shape)), str(v.stride()), str(v.storage_offset()),
                str(v.dtype), str(v.device), str(v.layout), v.requires_grad)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)):
        return (type(v).__name__, str(v))
    if isinstance(v, torch.fx.GraphModule):
        return ("graph", _graph(v))
    return type(v).__name__  # unknown kinds: the graph's code and the trace key say the rest


def _options(aot_kwargs: dict[str, Any]) -> Any:
    out = []
    for name, value in sorted(aot_kwargs.items()):
        if isinstance(value, dict):
            value = sorted((str(op), f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__name__)}")
                           for op, fn in value.items())
        elif not isinstance(value, (bool, int, float, str, type(None))):
            value = type(value).__name__
        out.append((name, value))
    return out


def _binding(b: Binding) -> Any:
    return (sorted(map(str, b.group)), b.value, sorted(b.names.items()),
            sorted((str(s), str(v)) for s, v in b.fixed.items()), sorted(map(str, b.widened)))


def _state() -> Any:
    return (torch.__version__, torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(),
            tuple(torch.is_autocast_enabled(d) for d in ("cpu", "cuda")),
            sorted(functorch_config.save_config_portable().items()), sorted(inductor_config.save_config_portable().items()))
