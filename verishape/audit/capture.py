"""Run a user's script as ``__main__`` in audit mode and keep what each frame compiled.

Every frame Dynamo compiles while the script runs (through ``verishape.compile`` or plain
``torch.compile``) gets a VeriShapeEnv; we keep its code object, its real locals (the
inputs, for declared ranges and for replay), its globals, its compile id and its
ShapeEnv.  Once the frame has compiled, the entry Dynamo cached for that compile id (the
transformed bytecode and the compiled graphs it calls) is kept as the frame's
:class:`Artifact`, so a replay runs exactly the audited graph, with no guard check and
without touching Dynamo's cache.  What the run could not audit is kept too: the graph
break that ended a frame, and Dynamo's recompile limit hit by the script itself.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import runpy
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sympy
from torch._guards import CompileContext

from verishape.compiler import declared as declared_sizes
from verishape.compiler import frames
from verishape.core import torch_seam
from verishape.core.errors import UsageError, check_script
from verishape.core.premises import unbacked_index

from .frame import GRAPH_PREFIX, NOT_COMPILED, Artifact, Frame, _compile_error_types, classify_compile_error


@dataclasses.dataclass
class Run:
    script: Path
    frames: list[Frame]
    script_error: str | None = None


def _check_script(path: Path) -> None:
    """The script must be one Python runs (its coding line honoured): see ``check_script``."""
    check_script(path)


def run_script(path: Path, args: Sequence[str], progress: Callable[[str], None]) -> Run:
    _check_script(path)
    run = Run(path, [])
    graphs: dict[int, Any] = {}  # frame index -> its OutputGraph, read once the run is over
    by_compile: dict[Any, int] = {}  # compile id -> frame index

    from . import exports

    def sink(output_graph: Any, init_args: dict[str, Any]) -> None:
        if exports.inside_export():
            return  # a strict export's Dynamo frame: audited as part of its export
        _keep_artifacts(run.frames)  # earlier frames have finished compiling by now
        code = init_args.get("f_code")
        trace = CompileContext.current_trace_id()
        compile_id = trace.compile_id if trace is not None else None
        frame = Frame(len(run.frames), code, dict(init_args.get("local_scope") or {}), output_graph.shape_env,
                      compile_id=compile_id, global_scope=init_args.get("global_scope"),
                      declared=(declared_sizes.of_backend(getattr(output_graph, "compiler_fn", None))
                                or declared_sizes.of_torch_compile(code)))
        earlier = by_compile.get(compile_id) if compile_id is not None else None
        if earlier is not None and run.frames[earlier].code is code:
            # Dynamo restarted the analysis of this compile (at a graph break, say): only
            # the last attempt produces the artifact, so it replaces the abandoned one.
            frame.index, frame.call = earlier, run.frames[earlier].call
            run.frames[earlier] = frame
        else:
            frame.call = _enclosing_call(run.frames)
            if frame.call is None:
                frame.call = 1 + max((f.call for f in run.frames if f.call is not None), default=-1)
            run.frames.append(frame)
            if compile_id is not None:
                by_compile[compile_id] = frame.index
            progress(f"compiling frame {frame.index}: {frame.name} ({frame.location}), call {frame.call}")
        graphs[frame.index] = output_graph
        _read_inputs_when_compiled(output_graph, frame)

    limits = _RecompileLimits()
    dynamo_log = logging.getLogger("torch._dynamo.convert_frame")
    # A failed frame is a finding we report; torch's own ERROR log of it is noise here.
    guards_log = logging.getLogger("torch._guards")
    saved_level = guards_log.level
    guards_log.setLevel(logging.CRITICAL)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.parent.resolve()))
    dynamo_log.addHandler(limits)
    try:
        with frames.audit(sink), exports.capturing(str(path), lambda f: _add_export(run, f, progress)):
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
        dynamo_log.removeHandler(limits)
        sys.argv, sys.path[:] = saved_argv, saved_path
        guards_log.setLevel(saved_level)
        _keep_artifacts(run.frames)
    _note_compiles(run.frames, graphs)
    limits.attach(run.frames)
    if not run.frames:
        raise UsageError(f"{path.name} ran, but no frame was compiled by torch.compile or verishape.compile, "
                         "and nothing was exported")
    return run


def _add_export(run: Run, frame: Any, progress: Callable[[str], None]) -> None:
    """An export the script made: a frame of its own (one that failed before building a
    ShapeEnv has nothing to audit; its error still stops or reaches the script)."""
    if frame.env is None:
        return
    frame.index = len(run.frames)
    run.frames.append(frame)
    progress(f"exported frame {frame.index}: {frame.name} ({frame.location})")


# ---------------------------------------------------------------- what was compiled, and what was not


def _enclosing_call(frames_: Sequence[Frame]) -> int | None:
    """The call a frame now being compiled belongs to: that of the innermost captured
    frame whose compiled code (its cache entry's bytecode) is running on the Python stack
    right now.  Dynamo compiles the resume function after a graph break, or a function
    called past a break, while the artifact that calls it runs; None: a new call."""
    running = {f.artifact.code: f.call for f in frames_ if f.artifact is not None and f.call is not None}
    if not running:
        return None
    py_frame = sys._getframe(1)
    while py_frame is not None:
        if py_frame.f_code in running:
            return running[py_frame.f_code]
        py_frame = py_frame.f_back
    return None


def _keep_artifacts(frames_: Sequence[Frame]) -> None:
    """Keep, for each compiled frame, the cache entry Dynamo made for its compile id.

    The entry's bytecode calls the compiled graphs by global name; the graphs are kept
    with it, so the replay runs them even after the script resets Dynamo's cache.  A
    frame whose entry is not (or no longer) in the cache keeps ``artifact=None``."""
    for frame in frames_:
        if frame.artifact is not None or frame.compile_id is None or frame.global_scope is None or frame.error:
            continue
        for entry in torch_seam.cache_entries(frame.code):
            if entry.compile_id == frame.compile_id:
                names = [n for n in entry.code.co_names if n.startswith(GRAPH_PREFIX) and n in frame.global_scope]
                frame.artifact = Artifact(entry.code, {n: frame.global_scope[n] for n in names})
                break


def _note_compiles(frames_: Sequence[Frame], graphs: dict[int, Any]) -> None:
    """What each frame's trace became.  A trace Dynamo abandoned without compiling (it
    gives up on a frame with a graph break inside a loop, for one) left no artifact: the
    frame ran eagerly, and its guards belong to no compiled code.  A frame that ended at
    a graph break audits only the code before it: say where."""
    for frame in frames_:
        if frame.kind == "compile" and frame.index in graphs and not frame.unbacked_inputs:
            frame.unbacked_inputs = unbacked_inputs(graphs[frame.index])
        if frame.error or frame.kind != "compile":
            continue
        reason = getattr(graphs.get(frame.index), "compile_subgraph_reason", None)
        if reason is None and frame.artifact is None:
            frame.error = ("Dynamo compiled nothing for this frame and ran it eagerly (it gave up tracing, e.g. at "
                           "a graph break inside a loop, or found nothing to compile)")
            frame.error_kind = NOT_COMPILED
            continue
        if reason is None or not getattr(reason, "graph_break", False):
            continue
        stack = list(getattr(reason, "user_stack", None) or [])
        where = f" at {os.path.basename(stack[-1].filename)}:{stack[-1].lineno}" if stack else ""
        why = (str(getattr(reason, "reason", "")).strip().splitlines() or ["unknown reason"])[0]
        frame.notes.append(f"graph break{where}: {why}; the code from there on is not in this frame's graph "
                           "(it runs eagerly, or in a later frame audited on its own)")


def _read_inputs_when_compiled(output_graph: Any, frame: Frame) -> None:
    """Read the frame's unbacked input sizes (:func:`unbacked_inputs`) when its backend is
    called, while Dynamo still holds the traced inputs: torch 2.15 clears them once the
    compile is over (``tracked_fakes``, for a backend it has registered by name)."""
    backend = output_graph.compiler_fn
    if backend is None:
        return

    @functools.wraps(backend)
    def compile_reading_inputs(*args: Any, **kwargs: Any) -> Any:
        frame.unbacked_inputs = unbacked_inputs(output_graph)
        return backend(*args, **kwargs)

    output_graph.compiler_fn = compile_reading_inputs


def unbacked_inputs(output_graph: Any) -> dict[Any, list[Any]]:
    """Input sizes given unbacked symbols (``mark_unbacked``, torch's ``shapes_spec``): each
    symbol with the input sources whose size it is.  Torch records no source for them
    (``var_to_sources`` holds backed symbols only); the traced inputs say which they are, so
    the audit holds them against what was declared on those inputs and replays at them."""
    import torch
    from torch._dynamo.source import TensorProperty, TensorPropertySource

    out: dict[Any, list[Any]] = {}
    for tracked in getattr(output_graph, "tracked_fakes", None) or ():
        fake = tracked.fake
        if not isinstance(fake, torch.Tensor):
            continue
        for i, n in enumerate(fake.shape):
            expr = n.node.expr if isinstance(n, torch.SymInt) else None
            if isinstance(expr, sympy.Symbol) and unbacked_index(expr) is not None:
                out.setdefault(expr, []).append(TensorPropertySource(tracked.source, TensorProperty.SIZE, i))
    return out


class _RecompileLimits(logging.Handler):
    """Dynamo's warning that the script hit its recompile limit: the code object runs
    eagerly from then on, so those calls are never compiled and never audited."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.hits: list[tuple[int | None, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not (isinstance(record.msg, str) and record.msg.startswith("torch._dynamo hit config.")):
            return
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) >= 3:
            text = f"Dynamo hit config.{args[0]} ({args[1]}) for {args[2]}"
        else:
            text = record.getMessage().splitlines()[0]
        compile_id = CompileContext.current_compile_id()
        self.hits.append((getattr(compile_id, "frame_id", None), text))

    def attach(self, frames_: Sequence[Frame]) -> None:
        """Each hit goes to the last frame of the same code (Dynamo's frame id)."""
        for frame_id, text in self.hits:
            same = [f for f in frames_ if getattr(f.compile_id, "frame_id", None) == frame_id]
            target = same[-1] if same else (frames_[-1] if frames_ else None)
            if target is not None:
                target.recompile_limit = text if target.recompile_limit is None else f"{target.recompile_limit}; {text}"
