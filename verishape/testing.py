"""Fuzz your own op's fake implementation from a test: ``check_meta`` and strategies.

    import torch
    from verishape.testing import check_meta

    @torch.library.custom_op("mylib::dup", mutates_args=())
    def dup(x: torch.Tensor) -> torch.Tensor: ...

    @dup.register_fake
    def _(x): ...

    def test_dup_fake():
        check_meta(dup)                      # inputs derived from the schema
        check_meta(dup, samples=[(torch.randn(3, 4),)])   # or seeded by your own samples

``check_meta`` runs the same engine as ``verishape fuzz-meta``: hypothesis mutates the
samples' sizes and layouts, the op is traced with backed and unbacked symbolic sizes, the
solver picks other sizes inside the recorded guards, and eager is compared with the
prediction.  Any meta bug raises ``AssertionError`` listing a runnable repro for each;
documented divergences (compiled code with unbacked sizes asserting a size is not 1, a
dynamic size the fake pins by design) raise only with ``documented=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .fuzz.fuzzer import MODES, FuzzConfig, fuzz_target
from .fuzz.inputs import Case, TensorSpec, from_sample
from .fuzz.ops import custom_target
from .fuzz.strategies import layouts, mutated_cases, shapes, sizes, strides, tensor_specs

__all__ = ["check_meta", "layouts", "mutated_cases", "shapes", "sizes", "strides", "tensor_specs",
           "Case", "TensorSpec"]


def _as_case(sample: Any) -> Case:
    if isinstance(sample, Case):
        return sample
    if hasattr(sample, "input") and hasattr(sample, "args"):   # an OpInfo SampleInput
        return from_sample((sample.input, *sample.args), getattr(sample, "kwargs", {}))
    if isinstance(sample, tuple) and len(sample) == 2 and isinstance(sample[0], tuple) and isinstance(sample[1], dict):
        return from_sample(sample[0], sample[1])
    if isinstance(sample, tuple):
        return from_sample(sample, {})
    return from_sample((sample,), {})


def check_meta(op: Any, samples: Sequence[Any] | None = None, *, mode: str = "both", max_examples: int = 30,
               seed: int = 0, time_budget_s: float | None = None, module: str | None = None,
               documented: bool = False) -> None:
    """Fuzz ``op``'s fake implementation against its eager kernel.

    ``op``: a ``torch.library.custom_op`` (CustomOpDef), an OpOverload or packet, or any
    callable (then ``samples`` are required).  ``samples``: seed calls, each a tuple of
    positional arguments, an ``(args, kwargs)`` pair, or an OpInfo ``SampleInput``;
    default: derived from the op's schema.  ``mode``: "backed", "unbacked" or "both".
    ``module``: the module to import in repros (default: the op's defining module).
    ``documented``: also fail on divergences torch documents (a correct fake that
    broadcasts a size 1 asserts ``Eq(u0, 3)`` under unbacked sizes; that is torch's
    size-oblivious semantics, not the op author's bug, so it does not fail by default).
    Deterministic for a given ``seed`` unless ``time_budget_s`` is set.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    seeds = None if samples is None else [_as_case(s) for s in samples]
    home = module or _defining_module(op)
    imports = (f"import {home}",) if home and home != "__main__" else ()
    target = custom_target(op, seeds=seeds, imports=imports)
    cfg = FuzzConfig(max_examples=max_examples, seed=seed, modes=MODES[mode], time_budget_s=time_budget_s)
    result = fuzz_target(target, cfg)
    if result["status"] != "ok":
        raise AssertionError(f"check_meta({target.name}): could not fuzz: {result['status']}")
    findings = [f for f in result["finding_records"] if documented or f.get("documented") is None]
    if findings:
        parts = [f"check_meta({target.name}): {len(findings)} finding(s)"]
        for f in findings:
            parts.append(f"\n[{f['kind']}] mode={f['mode']} at {f['where']}: {f['message']}\n--- repro ---\n{f['repro']}")
        raise AssertionError("\n".join(parts))


def _defining_module(op: Any) -> str | None:
    fn = getattr(op, "_init_fn", None) or op
    return getattr(fn, "__module__", None)
