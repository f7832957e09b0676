"""Helpers for the end-to-end compile tests: run a program both ways, capture ShapeEnvs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo.backends.registry import lookup_backend

import verishape


@dataclasses.dataclass
class Outcome:
    results: list[str]  # "ok", "mismatch" or "<ErrorClass>: <first line>" per input
    envs: list[Any]

    @property
    def kinds(self) -> set[str]:
        return {r.split(":")[0] for r in self.results}


def is_dde(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return "GuardOnDataDependentSymNode" in text or "data-dependent" in text.lower()


def capturing(envs: list[Any], inner: str = "aot_eager") -> Callable[..., Any]:
    """A backend that records the frame's ShapeEnv, then compiles with ``inner``."""
    compiler = lookup_backend(inner)

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        ctx = torch._guards.TracingContext.try_get()
        envs.append(ctx.fake_mode.shape_env)
        return compiler(gm, example_inputs)

    return backend


def run(compile_fn: Callable[..., Any], fn: Callable[..., Any], inputs: Any, **kwargs: Any) -> Outcome:
    torch._dynamo.reset()
    envs: list[Any] = []
    cf = compile_fn(fn, backend=capturing(envs), fullgraph=True, dynamic=True, **kwargs)
    results = []
    for args in inputs:
        try:
            got = cf(*args)
        except Exception as exc:  # noqa: BLE001 - the outcome is what we compare
            kind = "DDE" if is_dde(exc) else type(exc).__name__
            results.append(f"{kind}: {str(exc).splitlines()[0][:200]}")
            continue
        want = fn(*args)
        results.append("ok" if torch.equal(got, want) else "mismatch")
    return Outcome(results, envs)


def stock(fn, inputs, **kw):
    return run(torch.compile, fn, inputs, **kw)


def vs(fn, inputs, **kw):
    return run(verishape.compile, fn, inputs, **kw)


def guard_fingerprint(env: Any) -> tuple[list[str], dict[str, list[str]]]:
    guards = [str(g.expr) for g in env.guards]
    asserts = {str(k): [str(ra.expr) for ra in v] for k, v in env.deferred_runtime_asserts.items()}
    return guards, asserts
