"""What the audit keeps of one compiled frame (:class:`Frame`, its :class:`Artifact`), and
how a compile error is classified.  A leaf of ``verishape.audit``: capture fills frames,
the analysis, the replay and the export modules read them."""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Callable
from typing import Any

import torch

#: Exceptions that mean "compiling a frame failed" rather than "the script is broken".
_COMPILE_ERRORS: tuple[type[BaseException], ...] = (torch._dynamo.exc.TorchDynamoException,)


def _compile_error_types() -> tuple[type[BaseException], ...]:
    from torch.fx.experimental import symbolic_shapes as ss

    extra = [getattr(ss, n) for n in ("ConstraintViolationError", "GuardOnDataDependentSymNode") if hasattr(ss, n)]
    return _COMPILE_ERRORS + tuple(extra)


#: ``Frame.error_kind`` of a frame whose trace Dynamo abandoned: it ran eagerly, so there is
#: no artifact (and nothing unsound) there; its guards, if any, are reported as usual.
NOT_COMPILED = "not_compiled"

#: Prefix of the globals Dynamo installs for each compiled graph of a frame.
GRAPH_PREFIX = "__compiled_fn"


@dataclasses.dataclass
class Artifact:
    """What Dynamo runs for one compiled frame once its guards pass: the cache entry's
    transformed bytecode, and the compiled graphs it calls by global name (kept here so
    that a later ``torch._dynamo.reset()`` or a rebound global cannot change them)."""

    code: types.CodeType
    graphs: dict[str, Callable[..., Any]]


@dataclasses.dataclass
class Frame:
    index: int
    code: Any
    local_scope: dict[str, Any]
    env: Any
    error: str | None = None
    error_kind: str | None = None
    #: Dynamo's id of this compile (``torch._guards.CompileId``); None outside Dynamo.
    compile_id: Any = None
    global_scope: dict[str, Any] | None = None
    #: the cached entry of this compile, None when Dynamo's cache never held it or lost it
    artifact: Artifact | None = None
    #: what the run could not audit in or around this frame (graph break, ...)
    notes: list[str] = dataclasses.field(default_factory=list)
    #: Dynamo's recompile limit, hit by the script for this frame's code: later calls ran
    #: eagerly and were never compiled, so never audited
    recompile_limit: str | None = None
    #: "compile" (a Dynamo frame) or "export" (a torch.export call: ``exports.ExportFrame``)
    kind: str = "compile"
    #: proofs made by later frames that ran this frame's artifact at a size its guards
    #: exclude (``widen_specializations``: the size-1 call reused this generic compile)
    reused_by: list[tuple[int, Any]] = dataclasses.field(default_factory=list)
    #: the call of the script's compiled code this frame was compiled in: one call can
    #: compile several frames (the resume function after a graph break, a function the
    #: traced code calls after a break, the frame of a nested compiled function), and the
    #: report shows them grouped under that call; None for an export
    call: int | None = None
    #: what the frame's backend declares (``verishape.compile(shapes_spec=...)``,
    #: :mod:`verishape.compiler.declared`), read as the frame's declared space; None: nothing
    declared: Any = None
    #: input sizes given unbacked symbols (``mark_unbacked``, torch's ``shapes_spec``): each
    #: symbol with its input sources, which torch does not record (``capture.unbacked_inputs``)
    unbacked_inputs: dict[Any, list[Any]] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.code.co_name

    @property
    def location(self) -> str:
        return f"{os.path.basename(self.code.co_filename)}:{self.code.co_firstlineno}"


def classify_compile_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "Constraints violated" in text or type(exc).__name__ == "ConstraintViolationError":
        return "constraint_violation"
    if "_check" in text and "Expected cond to be True" in text:
        return "contradictory_facts"
    if "data-dependent" in text.lower() or "GuardOnDataDependentSymNode" in text:
        return "data_dependent_error"
    return "compile_failed"
