"""What widening reads of Dynamo's trace of a frame, as protocols: Dynamo's root ``InstructionTranslator`` is a
:class:`Trace`, its ``OutputGraph`` a :class:`TraceOutput`; a torch that renamed a member read here fails in one place.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch
from torch._functorch.aot_autograd import aot_module_simplified

from .canon import NotWidened

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

T = TypeVar("T")


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
    #: Dynamo's guard on the global state the trace ran under (``__getstate__``: its JSON)
    global_state_guard: Any


class Trace(Protocol):
    """Dynamo's trace of a frame (the root translator)."""

    f_code: types.CodeType
    output: TraceOutput


def aot_inference_graph(mod: Any, args: list[Any], aot_kwargs: dict[str, Any],
                        read: Callable[[torch.fx.GraphModule], T], training: str, none: str) -> T:
    """What ``read`` makes of AOTAutograd's inference graph of ``mod`` on ``args`` as handed to its
    compiler (under ``aot_kwargs``, never lowered or run; AOTAutograd's cache off, so it is traced).
    :class:`NotWidened` with what ``read`` raised, ``training`` for a training graph, ``none`` for none."""
    got: dict[str, Any] = {}

    def never(*a: Any) -> Any:
        raise AssertionError("verishape: an AOT graph traced to be compared is never run (this is a bug)")

    def inference(fw: torch.fx.GraphModule, inputs: Any, *a: Any, **kw: Any) -> Any:
        try:
            got["value"] = read(fw)
        except NotWidened as exc:  # kept, not raised through AOTAutograd (a torch may wrap its compilers' errors)
            got["error"] = str(exc)
        return never

    def needs_autograd(fw: torch.fx.GraphModule, inputs: Any, *a: Any, **kw: Any) -> Any:
        got["error"] = training
        return never

    with torch._functorch.config.patch(enable_autograd_cache=False):
        aot_module_simplified(mod, args, fw_compiler=needs_autograd, bw_compiler=needs_autograd,
                              inference_compiler=inference, **aot_kwargs)
    if "error" in got:
        raise NotWidened(got["error"])
    if "value" not in got:
        raise NotWidened(none)
    return got["value"]
