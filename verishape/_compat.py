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


#: The arguments of ``ShapeEnv._maybe_evaluate_static`` whose meaning VeriShapeEnv honours.
REQUIRED_STATIC_PARAMS = frozenset({"expr", "unbacked_only", "compute_hint", "size_oblivious", "axioms", "var_to_range"})
#: ShapeEnv members VeriShapeEnv reads or overrides.
REQUIRED_MEMBERS = ("evaluate_expr", "guard_or_defer_runtime_assert", "produce_guards_verbose", "replace",
                    "_get_sloc")


def probe(shape_env_cls: type | None = None, source_cls: type | None = None,
          version_text: str | None = None) -> Features:
    """Read the facts off the installed torch (or off the given classes, for tests)."""
    if shape_env_cls is None or source_cls is None or version_text is None:
        import torch
        from torch._guards import Source
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        shape_env_cls = shape_env_cls or ShapeEnv
        source_cls = source_cls or Source
        version_text = version_text or torch.__version__
    version = check_supported(version_text)
    static = getattr(shape_env_cls, "_maybe_evaluate_static", None)
    params = frozenset(inspect.signature(inspect.unwrap(static)).parameters) - {"self"} if static else frozenset()
    name_attr = inspect.getattr_static(source_cls, "name", None)
    return Features(
        torch_version=version,
        maybe_evaluate_static_params=params,
        has_guard_or_defer_runtime_assert=hasattr(shape_env_cls, "guard_or_defer_runtime_assert"),
        source_name_is_method=callable(name_attr) and not isinstance(name_attr, property)
        and not hasattr(name_attr, "__set_name__"),
    )


def missing_internals(features: Features, shape_env_cls: type) -> list[str]:
    """What VeriShapeEnv needs and this torch lacks (empty when all is there)."""
    missing = [f"ShapeEnv._maybe_evaluate_static({p}=...)"
               for p in sorted(REQUIRED_STATIC_PARAMS - features.maybe_evaluate_static_params)]
    missing += [f"ShapeEnv.{m}" for m in REQUIRED_MEMBERS if not hasattr(shape_env_cls, m)]
    return missing


def require(shape_env_cls: type | None = None, source_cls: type | None = None,
            version_text: str | None = None) -> Features:
    """Probe, and refuse clearly when an internal we rely on is absent."""
    if shape_env_cls is None:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        shape_env_cls = ShapeEnv
    features = probe(shape_env_cls, source_cls, version_text)
    missing = missing_internals(features, shape_env_cls)
    if missing:
        raise UnsupportedTorch(
            "this torch lacks internals verishape relies on: " + ", ".join(missing)
            + "; install a supported torch, e.g. pip install torch==2.13.0"
        )
    return features
