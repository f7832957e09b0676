"""What widening reads of Dynamo's trace of a frame, as protocols (instead of ``Any``).

Widening never builds these objects: Dynamo's root ``InstructionTranslator`` is a
:class:`Trace`, its ``OutputGraph`` a :class:`TraceOutput`, and the shape env of either
trace a reuse compares (the kept compile's, the new call's) is torch's ``ShapeEnv`` (a
``VeriShapeEnv`` for frames verishape compiles).  Naming the few members read here says
what a reuse depends on, and a torch that renamed one fails in one place.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv


class TrackedFake(Protocol):
    """One input Dynamo faked: its source (``.name``) and the fake value."""

    source: Any
    fake: Any


class TraceOutput(Protocol):
    """The output graph of a trace: its inputs, its guards and its shape env."""

    tracked_fakes: list[TrackedFake]
    guards: Any
    shape_env: ShapeEnv
    root_tx: Any
    compiler_fn: Any


class Trace(Protocol):
    """Dynamo's trace of a frame (the root translator)."""

    f_code: types.CodeType
    output: TraceOutput
