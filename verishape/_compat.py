"""Which torch we run on, found by feature detection rather than version strings alone.

verishape supports torch 2.11 through 2.13.  Internal APIs it relies on are probed here,
once, so the rest of the code asks ``FEATURES.x`` instead of comparing versions.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

SUPPORTED = ((2, 11), (2, 13))


class UnsupportedTorch(ImportError):
    """torch is outside the range verishape was built and tested for."""


def parse_version(text: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; raises ValueError on anything else."""
    m = re.match(r"^(\d+)\.(\d+)", text)
    if not m:
        raise ValueError(f"cannot read a torch version from {text!r}")
    return int(m.group(1)), int(m.group(2))


def check_supported(version_text: str) -> tuple[int, int]:
    version = parse_version(version_text)
    low, high = SUPPORTED
    if not (low <= version <= high):
        raise UnsupportedTorch(
            f"verishape supports torch {low[0]}.{low[1]} to {high[0]}.{high[1]}, "
            f"but torch {version_text} is installed; install a supported one, "
            f"e.g. pip install torch=={high[0]}.{high[1]}.0"
        )
    return version


@dataclasses.dataclass(frozen=True)
class Features:
    """Probed facts about the installed torch's internals."""

    torch_version: tuple[int, int]
    maybe_evaluate_static_params: frozenset[str]
    has_guard_or_defer_runtime_assert: bool
    source_name_is_method: bool

    @property
    def static_eval_knows_size_oblivious(self) -> bool:
        return "size_oblivious" in self.maybe_evaluate_static_params


def probe() -> Features:
    import torch
    from torch._guards import Source
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    version = check_supported(torch.__version__)
    static = inspect.unwrap(ShapeEnv._maybe_evaluate_static)
    params = frozenset(inspect.signature(static).parameters) - {"self"}
    name_attr = inspect.getattr_static(Source, "name", None)
    return Features(
        torch_version=version,
        maybe_evaluate_static_params=params,
        has_guard_or_defer_runtime_assert=hasattr(ShapeEnv, "guard_or_defer_runtime_assert"),
        source_name_is_method=callable(name_attr) and not isinstance(name_attr, property),
    )
