"""The proved ``torch._check`` for a data-dependent error of ``verishape.compile``.

A non-strict ``verishape.export`` runs the user's code itself, so when it stops on
``GuardOnDataDependentSymNode`` the user's frame is on the stack and
:mod:`verishape.compiler.export.suggest` names a check in the user's variables.  Dynamo runs no user
frame: it interprets the bytecode symbolically, and the error reaches the caller as Dynamo's
``UserError`` with the data-dependent error as its context.  What Dynamo does have is the
frame it started tracing and the real values it was entered with.  So:

1. when the error is raised in a frame verishape compiles, :class:`VeriShapeEnv` keeps those
   inputs on it (``verishape_frame_inputs``; cheap, nothing else happens inside the trace);
2. when the error reaches the function ``verishape.compile`` returned, the frame's function
   is rebuilt from its code, globals and closure, and exported non-strict with the same
   inputs (tensors as the program's inputs, each size ``Dim.AUTO`` so that the check is
   written in the user's sizes; every other argument as it was): the export
   stops on the same question at the same line, with the frame at hand, and finds the check
   as it finds its own (proved sufficient, holds on the inputs, weakest);
3. the check is appended to the error's message and kept as ``err.verishape_suggestion``
   (None when the replay proved nothing: stock's message then stands), which
   ``verishape.explain(err)`` prints.

Only on the error path, and only once per error; nothing is looked for when the replay
cannot be built (a frame that closes over a variable it was not given) or does not stop
on a data-dependent error (then no check was proved: the attribute is None).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import logging
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

log = logging.getLogger("verishape")

#: set on the error once looked for (None: nothing proved)
ATTRIBUTE = "verishape_suggestion"


def catching(compiled: Any) -> Any:
    """``compiled`` (what ``torch.compile`` returned), with a data-dependent error that
    leaves it given its proved check.  A module keeps its type: its ``forward`` (Dynamo's
    optimized callable, an instance attribute) is wrapped in place."""
    if isinstance(compiled, torch.nn.Module):
        inner = compiled.__dict__.get("forward")
        if callable(inner):
            compiled.forward = _wrap(inner)
        return compiled
    return _wrap(compiled)


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            misuse = _usage_error(exc)
            if misuse is not None:
                raise misuse from None
            attach(exc)
            raise

    return call


def _usage_error(exc: BaseException) -> BaseException | None:
    """A verishape :class:`~verishape.core.errors.UsageError` raised while Dynamo compiled
    (a guard filter's bad answer), which Dynamo wraps in an internal error: the user's
    one line, not a wall of Dynamo's."""
    from verishape.core.errors import UsageError

    cur: BaseException | None = exc
    for _ in range(8):
        if cur is None:
            return None
        if isinstance(cur, UsageError):
            return cur if cur is not exc else None
        cur = cur.__cause__ or cur.__context__
    return None


def attach(exc: BaseException) -> None:
    """Look once for the proved check of the data-dependent error behind ``exc``."""
    if hasattr(exc, ATTRIBUTE):
        return
    inputs = _frame_inputs(exc)
    if inputs is None:
        return
    try:
        found = replay(inputs)
    except Exception as err:  # noqa: BLE001 - a suggestion must never replace the user's error
        log.warning("verishape: could not look for a torch._check that settles this error; the error is raised "
                    "unchanged (this is a verishape bug): %r", err)
        return
    setattr(exc, ATTRIBUTE, found)
    if found is not None and exc.args and isinstance(exc.args[0], str):
        exc.args = (exc.args[0] + "\n\n" + found.text(), *exc.args[1:])


def _frame_inputs(exc: BaseException) -> Any:
    """The inputs kept on the data-dependent error in ``exc``'s chain (itself, its cause or
    its context), or None."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        inputs = getattr(e, "verishape_frame_inputs", None)
        if inputs is not None:
            return inputs
        e = e.__cause__ or e.__context__
    return None


def replay(inputs: Any) -> Any:
    """The suggestion a non-strict export of the traced frame finds, or None."""
    from .program import export

    built = _rebuild(inputs)
    if built is None:
        return None
    fn, args, kwargs = built
    module = _Replay(fn, args, kwargs)
    # every size free (Dim.AUTO): a check in the user's sizes (``stop <= x.shape[0]``), not
    # in this call's values of them, which a static replay would print
    sizes = tuple({d: torch.export.Dim.AUTO for d in range(t.dim())} for t in module.tensors)
    try:
        with _quiet():
            export(module, tuple(module.tensors), dynamic_shapes=(sizes,), strict=False)
    except Exception as err:  # noqa: BLE001 - the export's error carries what it found
        return _suggestion_in(err)
    return None  # the export did not stop: nothing to settle there


def _suggestion_in(err: BaseException) -> Any:
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        found = getattr(e, ATTRIBUTE, None)
        if found is not None:
            return found
        e = e.__cause__ or e.__context__
    return None


def _rebuild(inputs: Any) -> tuple[Callable[..., Any], list[Any], dict[str, Any]] | None:
    """The traced frame as a function, with the positional and keyword arguments it was
    entered with; None when a free variable's value is not among the frame's locals."""
    code, f_locals = inputs.code, inputs.f_locals
    closure = None
    if code.co_freevars:
        if not all(name in f_locals for name in code.co_freevars):
            return None
        closure = tuple(types.CellType(f_locals[name]) for name in code.co_freevars)
    fn = types.FunctionType(code, inputs.f_globals, code.co_name, None, closure)
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    if not all(name in f_locals for name in names[:n_pos + n_kw]):
        return None
    args = [f_locals[name] for name in names[:n_pos]]
    kwargs = {name: f_locals[name] for name in names[n_pos:n_pos + n_kw]}
    i = n_pos + n_kw
    if code.co_flags & inspect.CO_VARARGS:
        args += list(f_locals.get(names[i], ()))
        i += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(f_locals.get(names[i], {}))
    return fn, args, kwargs


class _Replay(torch.nn.Module):
    """The traced frame as a module for ``torch.export``: its tensor arguments are the
    program's inputs, every other argument (``self``, numbers, containers) is as it was."""

    def __init__(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> None:
        super().__init__()
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        self._slots = [("arg", i) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        self._slots += [("kw", k) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        self.tensors = [args[i] if where == "arg" else kwargs[i] for where, i in self._slots]

    def forward(self, *tensors: torch.Tensor) -> Any:
        args, kwargs = list(self._args), dict(self._kwargs)
        for (where, key), t in zip(self._slots, tensors, strict=True):
            if where == "arg":
                args[key] = t
            else:
                kwargs[key] = t
        return self._fn(*args, **kwargs)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The replay's failure is expected: torch's export prints its partial graph to stderr
    and logs the error; both are kept from the user, whose own error is what they see."""
    logger = logging.getLogger("torch._export")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)
