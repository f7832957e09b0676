"""Where in the user's code a decision was asked, for the decision log and ``explain``.

Stock ``ShapeEnv._get_sloc`` answers with Dynamo's user frame while Dynamo traces, but once
AOTAutograd or Inductor ask (after Dynamo's trace) it falls back to the innermost Python
frame outside a few torch files, which is a verishape or torch frame: a location that
sends the reader to the wrong code.  Here the user's frame comes from Dynamo's tracing
stack, else from the stack trace recorded on the FX node being retraced; a frame inside
torch, verishape's own packages or the standard library is never the answer, and no
location is better than a wrong one.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sysconfig
import traceback

#: ``File "/path/x.py", line 6, in f`` lines of an FX node's ``stack_trace``
_FRAME_LINE = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+), in (?P<name>.+)$')


@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    """The folders of torch and of this project's packages: code there is not the user's."""
    dirs = []
    for name in ("torch", "verishape", "verishape.solvers", "verishape.compiler", "verishape.proofs"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += [os.path.realpath(d) + os.sep for d in spec.submodule_search_locations]
    return tuple(dirs)


@functools.lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The standard library's folders, and the site-packages folders that may lie inside
    them (third-party model code there, e.g. transformers, is the user's code here)."""
    paths = sysconfig.get_paths()
    norm = lambda key: os.path.realpath(paths[key]) + os.sep  # noqa: E731
    return (norm("stdlib"), norm("platstdlib")), (norm("purelib"), norm("platlib"))


@functools.lru_cache(maxsize=1024)
def _is_user(filename: str) -> bool:
    path = os.path.realpath(filename)
    if path.startswith(_library_dirs()):
        return False
    stdlib, site = _stdlib_dirs()
    return not path.startswith(stdlib) or path.startswith(site)


def _format(frame: traceback.FrameSummary) -> str:
    code = (frame.line or "").strip()
    return f"{code}  # {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}".lstrip()


def _dynamo_stack() -> list[traceback.FrameSummary]:
    from torch._guards import TracingContext

    return list(TracingContext.extract_stack() or [])


def _fx_node_stack() -> list[traceback.FrameSummary]:
    """The user stack Dynamo recorded on the FX node AOTAutograd/Inductor is retracing."""
    from torch.fx import traceback as fx_traceback

    meta = fx_traceback.get_current_meta() or {}
    text = meta.get("stack_trace") or ""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = _FRAME_LINE.match(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME_LINE.match(lines[i + 1]) else None
            out.append(traceback.FrameSummary(m["file"], int(m["line"]), m["name"].strip(), line=code))
    return out


def is_user_file(filename: str) -> bool:
    """Whether code in ``filename`` is the user's (not torch, verishape or the standard library)."""
    return _is_user(filename)


def python_stack_location() -> str | None:
    """The innermost user frame of the running Python stack, or None.  Only where the
    user's code is itself on the stack (a non-strict export); in a compile it is the line
    that called the compiled function, not the one that asked."""
    for frame in reversed(traceback.extract_stack()):
        if _is_user(frame.filename):
            return _format(frame)
    return None


def user_location() -> str | None:
    """``"<code>  # file.py:line in function"`` for the innermost user frame, or None."""
    for stack in (_dynamo_stack(), _fx_node_stack()):
        for frame in reversed(stack):
            if _is_user(frame.filename):
                return _format(frame)
    return None
