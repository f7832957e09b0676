"""Audit of ``torch.export`` calls: an export is a frame of kind ``"export"``.

An exported program has no guards to fall back on: what it accepts is its
``range_constraints``, the shape guards it checks when called (``ep.module()`` raises
``Guard failed: ...``) and its ``_assert_scalar`` nodes.  The audit asks, for each of them,
whether the *declared* input space implies it: the ``Dim(min=, max=)`` ranges of the
export's ``dynamic_shapes`` (``Dim.AUTO`` / ``Dim.DYNAMIC`` without a range count as
undeclared, ``[2, oo)``) intersected with ``--assume``.  A check the space does not imply
comes with a counterexample, replayed by calling ``ep.module()`` against the eager module
at those sizes: a program that refuses a declared input is ``compiled_rejects``.

Inputs are named as for compiled frames: ``L['x'].size()[0]`` for a dimension of the
forward's parameter ``x`` (``--assume "x.size(0) <= 64"``), ``L['xs_1']`` for the second
tensor of a list/tuple parameter ``xs``, ``L['d_k']`` for key ``k`` of a dict parameter.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree

from verishape.compiler import frames as frames_mod
from verishape.core import torch_names
from verishape.core.premises import finite

from .frame import Frame, classify_compile_error
from .space import DEFAULT_BACKED, Bounds, linear_bound, parse_source, source_for


@dataclasses.dataclass
class ExportFrame(Frame):
    """One export made by the audited script: its inputs, declarations and program."""

    kind: str = "export"
    module: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    dynamic_shapes: Any = None
    strict: bool = False
    program: Any = None  # the ExportedProgram, None when the export failed
    call_site: str = "?"
    #: input name -> (pytree key path into (args, kwargs), example value)
    leaves: dict[str, tuple[tuple[Any, ...], Any]] = dataclasses.field(default_factory=dict)
    #: source -> declared bounds (from Dim ranges), and source -> the Dim's words
    declared: dict[str, Bounds] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"export({type(self.module).__name__}{', strict' if self.strict else ''})"

    @property
    def location(self) -> str:
        return self.call_site


# ---------------------------------------------------------------- input names and declarations


def _leaf_name(path: tuple[Any, ...], params: list[str]) -> str | None:
    """A key path into ``(args, kwargs)`` as an identifier: positional argument i takes
    the forward's parameter name, a keyword argument its key; nested keys are appended
    with ``_``.  None when a part cannot be spelled as an identifier."""
    if len(path) < 2:
        return None
    top, first, *rest = path
    index = getattr(top, "idx", None)
    if index == 0:
        pos = getattr(first, "idx", None)
        if pos is None:
            return None
        name = params[pos] if pos < len(params) else f"arg{pos}"
    else:
        name = str(getattr(first, "key", ""))
    for part in rest:
        key = getattr(part, "idx", getattr(part, "key", getattr(part, "name", None)))
        name += f"_{key}"
    return name if name.isidentifier() else None


def _forward_params(module: Any) -> list[str]:
    fn = getattr(module, "forward", module)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def input_leaves(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, tuple[tuple[Any, ...], Any]]:
    """Every leaf of ``(args, kwargs)`` in pytree order (the order of the exported
    program's user inputs), by name."""
    params = _forward_params(module)
    out: dict[str, tuple[tuple[Any, ...], Any]] = {}
    for path, value in pytree.tree_flatten_with_path((tuple(args), dict(kwargs or {})))[0]:
        name = _leaf_name(path, params)
        if name is not None:
            out[name] = (tuple(path), value)
    return out


def _dim_words(spec: Any) -> str:
    """How the script declared a dimension: ``Dim('b', min=2, max=64)``, ``Dim.AUTO``."""
    lo, hi = getattr(spec, "min", None), getattr(spec, "max", None)
    name = getattr(spec, "__name__", None)
    if name:
        return f"Dim({name!r}, min={lo}, max={hi})"
    hint = getattr(getattr(spec, "type", None), "name", None)
    if hint:
        bounds = ", ".join(f"{k}={b}" for k, b in (("min", lo), ("max", hi)) if b is not None)
        return f"Dim.{hint}" + (f"({bounds})" if bounds else "")
    return str(spec)


def _bounds_of(d: Any) -> Bounds | None:
    """A declared dimension (:class:`verishape.compiler.export.checks.Declared`) as the
    audit's bounds; None for a static one.  Without a range, a dynamic dimension is
    undeclared: stock torch's ``[2, oo)``."""
    if d.label == "Dim.STATIC":
        return None
    if d.low is None and d.high is None:
        return Bounds(DEFAULT_BACKED.lower, None, f"{_dim_words(d.spec)}: undeclared range, stock torch's [2, oo)")
    return Bounds(d.low if d.low is not None else DEFAULT_BACKED.lower, d.high, _dim_words(d.spec))


def declared_dims(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  dynamic_shapes: Any) -> dict[str, Bounds]:
    """Source -> bounds of every dimension ``dynamic_shapes`` makes dynamic, read off the
    one parse of the spec that ``verishape.export`` also uses (a ``ShapesCollection`` or
    ``AdditionalInputs`` resolved as torch resolves it); a derived dim (``2 * d``) declares
    its own range here.  A list's element is named ``xs_1``, a dict's entry ``d_k``."""
    from verishape.compiler.export.checks import declared_dims as parse

    out: dict[str, Bounds] = {}
    for d in parse(module, args, kwargs, dynamic_shapes):
        bounds = _bounds_of(d)
        if bounds is not None:
            out[source_for("_".join(str(k) for k in d.path), d.dim)] = bounds
    return out


def program_sources(frame: ExportFrame) -> dict[str, list[str]]:
    """Symbol -> the input dimensions it is the size of, read off the exported program's
    user-input placeholders (the same names in strict and non-strict export, whose
    ShapeEnvs name sources differently).  Falls back to the ShapeEnv's own sources
    when the program is missing or its inputs do not line up with the leaves."""
    from verishape.core.sources import symbol_sources

    ep = frame.program
    if ep is None:
        return _renamed_env_sources(frame, symbol_sources(frame.env))
    user = set(ep.graph_signature.user_inputs)
    placeholders = [n for n in ep.graph.find_nodes(op="placeholder") if n.name in user]
    if len(placeholders) != len(frame.leaves):
        return symbol_sources(frame.env)
    out: dict[str, list[str]] = {}
    for node, name in zip(placeholders, frame.leaves):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for dim, size in enumerate(val.shape):
            expr = getattr(getattr(size, "node", None), "expr", None)
            if isinstance(expr, sympy.Symbol):
                out.setdefault(str(expr), []).append(source_for(name, dim))
    return out


def _renamed_env_sources(frame: ExportFrame, sources: dict[str, list[str]]) -> dict[str, list[str]]:
    """A failed export has no program: keep the env's sources that already use the
    forward's names (non-strict export names them ``L['x'].size()[0]``)."""
    return {sym: [s for s in srcs if (p := parse_source(s)) and p[0] in frame.leaves] or srcs
            for sym, srcs in sources.items()}


# ---------------------------------------------------------------- checks of the program


def runtime_asserts(ep: Any) -> list[sympy.Basic]:
    """The conditions of the program's ``_assert_scalar`` nodes, in the ShapeEnv's symbols."""
    out = []
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten._assert_scalar.default:
            cond = node.args[0] if node.args else None
            val = cond.meta.get("val") if isinstance(cond, torch.fx.Node) else None
            expr = getattr(getattr(val, "node", None), "expr", None)
            if isinstance(expr, sympy.Basic):
                out.append(expr)
    return out


def program_range_facts(ep: Any, sources: dict[str, list[str]]) -> list[tuple[sympy.Symbol, sympy.Basic]]:
    """Each finite bound of ``range_constraints`` on an input size, as a fact."""
    out = []
    for sym, vr in ep.range_constraints.items():
        if str(sym) not in sources:
            continue
        for bound, make in ((vr.lower, lambda b: sympy.Le(b, sym, evaluate=False)),
                            (vr.upper, lambda b: sympy.Le(sym, b, evaluate=False))):
            if finite(bound):
                out.append((sym, make(sympy.Integer(int(bound)))))
    return out


def is_range_guard(expr: sympy.Basic) -> bool:
    """A guard that bounds one size linearly: export folds it into ``range_constraints``,
    whose own check reports it."""
    return all(linear_bound(p) is not None for p in sympy.And.make_args(expr))


# ---------------------------------------------------------------- capture


_in_export: contextvars.ContextVar[bool] = contextvars.ContextVar("verishape_audit_in_export", default=False)


def _call_site(script: str) -> str:
    """``file.py:line`` of the script's line that exported (else the innermost user frame)."""
    f = sys._getframe(2)
    fallback = None
    here = os.path.abspath(script)
    while f is not None:
        fname = os.path.abspath(f.f_code.co_filename)
        if fname == here:
            return f"{os.path.basename(fname)}:{f.f_lineno}"
        if fallback is None and "site-packages" not in fname and "/torch/" not in fname:
            fallback = f"{os.path.basename(fname)}:{f.f_lineno}"
        f = f.f_back
    return fallback or "?"


@contextlib.contextmanager
def capturing(script: str, add: Callable[[ExportFrame], None]) -> Iterator[None]:
    """For the audit run: every export (``torch.export.export``, ``verishape.export``,
    anything that reaches ``torch.export._trace._export``) builds VeriShapeEnvs and is
    reported to ``add`` as an :class:`ExportFrame` before it returns or raises.  Nested
    calls (an export inside an export) belong to the outer one."""
    import importlib

    module_name, _, name = torch_names.EXPORT_ENTRY.rpartition(".")
    trace = importlib.import_module(module_name)
    original = getattr(trace, name)
    signature = inspect.signature(original)

    def _export(*a: Any, **k: Any) -> Any:
        if _in_export.get():
            return original(*a, **k)
        bound = signature.bind(*a, **k)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        outer = _current_export_envs()
        envs: list[Any] = [] if outer is None else outer
        start = len(envs)
        frame = ExportFrame(0, _forward_code(arguments["mod"]), {}, None, module=arguments["mod"],
                            args=tuple(arguments["args"]), kwargs=dict(arguments.get("kwargs") or {}),
                            dynamic_shapes=arguments.get("dynamic_shapes"), strict=bool(arguments.get("strict")),
                            call_site=_call_site(script))
        frame.leaves = input_leaves(frame.module, frame.args, frame.kwargs)
        frame.declared = declared_dims(frame.module, frame.args, frame.kwargs, frame.dynamic_shapes)
        token = _in_export.set(True)
        try:
            with (_as_verishape_export(envs) if outer is None else contextlib.nullcontext()):
                frame.program = original(*a, **k)
        except BaseException as exc:
            # Kept on the frame even when the script catches it and goes on.
            text = str(exc).strip().splitlines()
            frame.error = f"{type(exc).__name__}: {text[0] if text else ''}"
            frame.error_kind = classify_compile_error(exc)
            raise
        finally:
            _in_export.reset(token)
            frame.env = _program_env(frame.program) or _last_verishape(envs[start:])
            add(frame)
        return frame.program

    setattr(trace, name, _export)
    try:
        yield
    finally:
        setattr(trace, name, original)


def _current_export_envs() -> list[Any] | None:
    """The env list of the ``verishape.export`` call in progress on this thread, if any."""
    accessor = getattr(frames_mod, "current_export_envs", None)
    if accessor is not None:
        return accessor()
    current = frames_mod._export_envs.get()
    return current[1] if isinstance(current, tuple) else current


@contextlib.contextmanager
def _as_verishape_export(envs: list[Any]) -> Iterator[None]:
    """A plain ``torch.export.export`` of the audited script runs as ``verishape.export``
    runs it: the export's own VeriShapeEnv (premises only what an exported program checks),
    no guard minimization."""
    from verishape.compiler.export.program import ExportShapeEnv
    from verishape.core.shape_env import guard_minimization

    with frames_mod.exporting(envs, ExportShapeEnv), guard_minimization(False):
        yield


def inside_export() -> bool:
    """True while the audited script's export runs (its strict Dynamo frame is not a frame
    of its own)."""
    return _in_export.get()


def _forward_code(module: Any) -> types.CodeType | None:
    fn = getattr(module, "forward", module)
    return getattr(fn, "__code__", None)


def _program_env(ep: Any) -> Any:
    """The ShapeEnv of the program's fake inputs (the one its asserts and ranges use)."""
    if ep is None:
        return None
    for node in ep.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        env = getattr(getattr(val, "fake_mode", None), "shape_env", None)
        if env is not None:
            return env
    return None


def _last_verishape(envs: list[Any]) -> Any:
    from verishape.core.shape_env import VeriShapeEnv

    mine = [e for e in envs if isinstance(e, VeriShapeEnv)]
    return mine[-1] if mine else None

