"""Run a user's script as ``__main__`` in audit mode and keep what each frame compiled.

Every frame Dynamo compiles while the script runs (through ``verishape.compile`` or plain
``torch.compile``) gets a VeriShapeEnv; we keep its code object, its real locals (the
inputs, for declared ranges and for replay) and its ShapeEnv.  The callables returned by
``torch.compile`` are recorded too, so a frame whose code is a compiled function's own
code can be replayed at other shapes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import runpy
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from compiler import frames
from verishape.cli_errors import UsageError

#: Exceptions that mean "compiling a frame failed" rather than "the script is broken".
_COMPILE_ERRORS: tuple[type[BaseException], ...] = (torch._dynamo.exc.TorchDynamoException,)


def _compile_error_types() -> tuple[type[BaseException], ...]:
    from torch.fx.experimental import symbolic_shapes as ss

    extra = [getattr(ss, n) for n in ("ConstraintViolationError", "GuardOnDataDependentSymNode") if hasattr(ss, n)]
    return _COMPILE_ERRORS + tuple(extra)


@dataclasses.dataclass
class Frame:
    index: int
    code: Any
    local_scope: dict[str, Any]
    env: Any
    error: str | None = None
    error_kind: str | None = None

    @property
    def name(self) -> str:
        return self.code.co_name

    @property
    def location(self) -> str:
        return f"{os.path.basename(self.code.co_filename)}:{self.code.co_firstlineno}"


@dataclasses.dataclass
class Run:
    script: Path
    frames: list[Frame]
    #: code object -> (original callable, compiled callable, torch.compile keyword arguments)
    compiled: dict[Any, tuple[Callable[..., Any], Callable[..., Any], dict[str, Any]]]
    script_error: str | None = None


def _check_script(path: Path) -> str:
    if not path.exists():
        raise UsageError(f"script not found: {path}")
    if not path.is_file():
        raise UsageError(f"not a file: {path}")
    source = path.read_text()
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise UsageError(f"syntax error in {path.name} line {exc.lineno}: {exc.msg}") from None
    return source


def classify_compile_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "Constraints violated" in text or type(exc).__name__ == "ConstraintViolationError":
        return "constraint_violation"
    if "_check" in text and "Expected cond to be True" in text:
        return "contradictory_facts"
    if "data-dependent" in text.lower() or "GuardOnDataDependentSymNode" in text:
        return "data_dependent_error"
    return "compile_failed"


def run_script(path: Path, args: Sequence[str], progress: Callable[[str], None]) -> Run:
    _check_script(path)
    run = Run(path, [], {})

    def sink(output_graph: Any, init_args: dict[str, Any]) -> None:
        code = init_args.get("f_code")
        frame = Frame(len(run.frames), code, dict(init_args.get("local_scope") or {}), output_graph.shape_env)
        run.frames.append(frame)
        progress(f"compiling frame {frame.index}: {frame.name} ({frame.location})")

    real_compile = torch.compile

    def recording_compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda m: recording_compile(m, **kwargs)
        compiled = real_compile(model, **kwargs)
        fn = getattr(model, "forward", model)
        code = getattr(fn, "__code__", None)
        if code is not None:
            run.compiled[code] = (model, compiled, dict(kwargs))
        return compiled

    # A failed frame is a finding we report; torch's own ERROR log of it is noise here.
    guards_log = logging.getLogger("torch._guards")
    saved_level = guards_log.level
    guards_log.setLevel(logging.CRITICAL)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.parent.resolve()))
    torch.compile = recording_compile  # type: ignore[assignment]
    try:
        with frames.audit(sink):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise UsageError(f"{path.name} exited with status {exc.code}") from None
    except _compile_error_types() as exc:
        kind = classify_compile_error(exc)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if run.frames:
            run.frames[-1].error, run.frames[-1].error_kind = f"{type(exc).__name__}: {message}", kind
        run.script_error = f"{type(exc).__name__}: {message}"
    except Exception as exc:  # noqa: BLE001 - the user's script failed: one line, exit 2
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UsageError(f"{path.name} raised {type(exc).__name__}: {first} (not a compilation error)") from None
    finally:
        torch.compile = real_compile  # type: ignore[assignment]
        sys.argv, sys.path[:] = saved_argv, saved_path
        guards_log.setLevel(saved_level)
    if not run.frames:
        raise UsageError(f"{path.name} ran, but no frame was compiled by torch.compile or verishape.compile")
    return run
