"""A proved reuse is not a recompile: Dynamo's recompile limit counts it apart, up to a limit of its own of the same
size (docs/compile.md, "A reuse is not a recompile."); the accumulated limit is kept."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

from torch._dynamo import config

from verishape.core import torch_names, torch_seam


def note() -> None:
    """A compile is about to return a kept artifact (its entry is told apart by what it
    calls, :func:`runs_kept_artifact`): count such entries apart from now on, where Dynamo
    counts a frame's cache entries before it decides on the limit."""
    torch_seam.wrap_once(torch_names.CACHE_SIZE_COUNTER, _counting_apart,
                         "a proved reuse counts against Dynamo's recompile limit, as a compile does")


def runs_kept_artifact(fn: Any) -> bool:
    """``fn`` (what a cache entry's bytecode calls, as Dynamo installed it: wrapped, the
    wrapper's ``__dict__`` copied) is a kept artifact called by a proved reuse."""
    for _ in range(4):  # (None, once unwrapped, has neither attribute)
        if getattr(fn, "_verishape_reused", None) is not None:
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def reuse_entries(code: types.CodeType, f_globals: dict[str, Any]) -> int:
    """How many of ``code``'s cache entries call a kept artifact, read off each entry's bytecode (the
    compiled function it calls is a frame global), not off compile ids: those restart at a reset."""
    return sum(any(n.startswith("__compiled_fn") and runs_kept_artifact(f_globals.get(n))
                   for n in getattr(getattr(entry, "code", None), "co_names", ()))
               for entry in torch_seam.cache_entries(code))


def _counting_apart(original: Any) -> Any:
    def compute_cache_size(frame: Any, *args: Any, **kwargs: Any) -> Any:
        size = original(frame, *args, **kwargs)
        exempt = min(reuse_entries(frame.f_code, frame.f_globals), config.recompile_limit)
        if not exempt or not dataclasses.is_dataclass(size):
            return size
        counts = ("num_cache_entries", "num_cache_entries_with_same_id_matched_objs")
        return dataclasses.replace(size, **{name: max(0, getattr(size, name) - exempt) for name in counts})

    return compute_cache_size
