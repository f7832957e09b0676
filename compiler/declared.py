"""Declared sizes: ``verishape.compile(model, shapes_spec=...)`` compiles generic in what a
server declares, from the first call, by the model's parameter names.

torch 2.13's ``shapes_spec`` (:mod:`torch.fx.experimental.dynamic_spec`) makes each
declared dimension an *unbacked* symbol of the frame whose parameter is named in the spec.
On a Hugging Face decoder neither half holds: the forward Dynamo compiles is
``wrapper(self, *args, **kwargs)``, so a spec by parameter name matches no input (the spec
is silently not applied: one compile per call), and one under ``"**kwargs"`` turns the
model's first branch on a length (``q_length > 1``) into a data-dependent graph break.

Here the spec is read by the compiled callable's parameter names wherever Dynamo's sources
reach the value in its entry frame: a local of that name, ``kwargs['name']``, and
``args[i]`` as the i-th positional parameter.  A declared dimension whose size lies in its
range and is at least 2 gets a *backed* symbol at the frame's first compile (what
``mark_dynamic`` gives), with the declared range as its range.  So every decision about it
is stock's own, made over that range: a static answer holds on the whole range, anything
else is a guard, and the range's bounds are guards too, so a call outside the declared
space misses the entry and compiles as stock would.  A declared size at 1 stays specialized,
as stock specializes it; widening serves it from the generic compile when proved
(:mod:`verishape.compiler.widen.reuse`), and where none is kept yet (a first request at batch
1), one is compiled at 2 for it (Note [A declared size at 1 is compiled at 2]).  Nothing here
decides what an artifact computes: it is a compile policy, like ``mark_dynamic``, and every
fact it adds is a guard.

The declaration's own facts are guards of each compile it applies to (:func:`facts`): two
dimensions declared with one ``ShapeVar`` are equal, and each of ``ShapesSpec``'s
``assumptions`` whose variables the trace has holds.

Read: ``TensorSpec`` leaves of named parameters, ``"*args"`` and ``"**kwargs"``, nested in
``ObjectSpec``, ``DictSpec`` and ``SeqSpec``, with named ``ShapeVar``/``IntVar`` dimensions,
ints (static) and ``None``.  Refused, in one line: a dimension derived from others
(``B * 2``), an unnamed variable, two variables of one name with other bounds, a parameter
the callable does not have.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

import sympy

from verishape.core import torch_seam
from verishape.core.errors import UsageError

log = logging.getLogger("verishape")


@dataclasses.dataclass(frozen=True)
class Dim:
    """One declared variable: its name and range (``high`` None: unbounded)."""

    name: str
    low: int
    high: int | None

    def holds(self, n: int) -> bool:
        return n >= self.low and (self.high is None or n <= self.high)


#: a leaf of the declaration: a tensor's dimensions (a tuple: Dim, int or None each), an int
#: argument's variable (Dim), a static int, or None (not declared)
Leaf = Any


@dataclasses.dataclass(frozen=True)
class Declared:
    """A parsed ``shapes_spec`` for one compiled callable (see the module docstring); built
    once by :func:`parse`."""

    #: parameter name -> its spec tree (leaves, or ("object" | "dict", {key: tree}),
    #: ("seq", (tree, ...)))
    named: Mapping[str, Any]
    #: the callable's positional parameter names, in order (what ``args[i]`` is)
    positional: tuple[str, ...]
    #: the code objects Dynamo enters the callable through (its own, a wrapper's)
    entry_codes: frozenset[Any]
    #: ``ShapesSpec.assumptions`` over the variables (symbols named as the variables)
    assumptions: tuple[sympy.Basic, ...] = ()

    def leaf(self, source: Any, code: Any) -> Leaf:
        """What the declaration says of the value ``source`` names in a frame of ``code``
        (None: nothing, or not the callable's entry frame)."""
        path = _path(source, code) if code in self.entry_codes else None
        return self._leaf_at(path) if path else None

    def tensor_holding(self, source: Any, code: Any) -> tuple[Any, ...] | None:
        """The declared tensor where the call passes a dict of tensors instead and ``source``
        names one of them (a static cache's decode step passes its 4-d masks as a dict where
        the prefill passes the declared 2-d mask); None elsewhere."""
        path = _path(source, code) if code in self.entry_codes else None
        if not path or len(path) < 2 or not isinstance(path[-1], str):
            return None
        leaf = self._leaf_at(path[:-1])  # (a container's tree is not a leaf)
        return leaf if isinstance(leaf, tuple) and leaf else None

    def _leaf_at(self, path: tuple[Any, ...]) -> Leaf:
        root, rest = path[0], path[1:]
        if root == ("varargs",):
            if not rest or not isinstance(rest[0], int) or rest[0] >= len(self.positional):
                return None
            root, rest = self.positional[rest[0]], rest[1:]
        elif root == ("varkw",):
            if not rest or not isinstance(rest[0], str):
                return None
            root, rest = rest[0], rest[1:]
        tree = self.named.get(root)
        for key in rest:
            tree = _step(tree, key)
            if tree is None:
                return None
        return None if isinstance(tree, tuple) and tree and tree[0] in ("object", "dict", "seq") else tree

    def dims(self) -> tuple[Dim, ...]:
        """Every declared variable, once (the declared space is their ranges and the
        assumptions)."""
        out: dict[str, Dim] = {}

        def walk(tree: Any) -> None:
            if isinstance(tree, Dim):
                out.setdefault(tree.name, tree)
            elif isinstance(tree, tuple) and len(tree) == 2 and tree[0] in ("object", "dict"):
                for child in tree[1].values():
                    walk(child)
            elif isinstance(tree, tuple):
                for child in (tree[1] if len(tree) == 2 and tree[0] == "seq" else tree):
                    walk(child)

        for tree in self.named.values():
            walk(tree)
        return tuple(out.values())

    def leading(self) -> frozenset[str]:
        """The variables that are the outer dimension of every tensor declared with them and
        of no int argument: a batch (Note [A declared size at 1 is compiled at 2])."""
        outer: set[str] = set()
        inner: set[str] = set()

        def walk(tree: Any) -> None:
            if isinstance(tree, Dim):
                inner.add(tree.name)  # an int argument's variable
            elif isinstance(tree, tuple) and len(tree) == 2 and tree[0] in ("object", "dict"):
                for child in tree[1].values():
                    walk(child)
            elif isinstance(tree, tuple) and len(tree) == 2 and tree[0] == "seq":
                for child in tree[1]:
                    walk(child)
            elif isinstance(tree, tuple):  # a tensor's dimensions
                for i, d in enumerate(tree):
                    if isinstance(d, Dim):
                        (outer if i == 0 else inner).add(d.name)

        for tree in self.named.values():
            walk(tree)
        return frozenset(outer - inner)

    def leading_at_one_in(self, f_locals: Mapping[str, Any], code: Any) -> frozenset[str]:
        """The leading variables (:meth:`leading`) at 1, with a range that reaches 2, in a
        call of the entry frame of ``code`` with ``f_locals``: read before Dynamo wraps
        anything, the way :meth:`leaf` reads a source (a local, ``kwargs[name]``, ``args[i]``)."""
        import torch

        if code not in self.entry_codes:
            return frozenset()
        leading, out = self.leading(), set()
        varargs_name, varkw_name = _variadic(code)
        varargs, varkw = f_locals.get(varargs_name or ""), f_locals.get(varkw_name or "")

        def walk(tree: Any, value: Any) -> None:
            if value is _NOTHING or not isinstance(tree, tuple):
                return
            if len(tree) == 2 and tree[0] in ("object", "dict", "seq"):
                kind, children = tree
                items = (enumerate(children) if kind == "seq" else children.items())
                for key, child in items:
                    if kind == "object":
                        walk(child, getattr(value, key, _NOTHING))
                    elif kind == "dict":
                        walk(child, value.get(key, _NOTHING) if isinstance(value, Mapping) else _NOTHING)
                    else:
                        walk(child, value[key] if isinstance(value, (list, tuple)) and key < len(value) else _NOTHING)
                return
            d = tree[0] if tree else None
            if (isinstance(d, Dim) and d.name in leading and isinstance(value, torch.Tensor) and value.dim()
                    and value.shape[0] == 1 and d.holds(1) and d.holds(2)):
                out.add(d.name)

        for name, tree in self.named.items():
            value = f_locals.get(name, _NOTHING)
            if value is _NOTHING and isinstance(varkw, Mapping):
                value = varkw.get(name, _NOTHING)
            if value is _NOTHING and isinstance(varargs, tuple) and name in self.positional:
                i = self.positional.index(name)
                value = varargs[i] if i < len(varargs) else _NOTHING
            walk(tree, value)
        return frozenset(out)


_NOTHING = object()


def _step(tree: Any, key: Any) -> Any:
    if not (isinstance(tree, tuple) and len(tree) == 2 and tree[0] in ("object", "dict", "seq")):
        return None
    kind, children = tree
    if kind == "seq":
        return children[key] if isinstance(key, int) and 0 <= key < len(children) else None
    if kind == "object" and isinstance(key, tuple) and key[0] == "attr":
        return children.get(key[1])
    if kind == "dict" and not isinstance(key, tuple):
        return children.get(str(key))
    return None


def _path(source: Any, code: Any) -> tuple[Any, ...] | None:
    """``source`` as (root, key, ...): root a local's name, or ("varargs",) / ("varkw",) for
    the frame's ``*args`` / ``**kwargs``; a key an index or dict key, or ("attr", name)."""
    keys: list[Any] = []
    cur = source
    for _ in range(32):
        local = getattr(cur, "local_name", None)
        if isinstance(local, str):
            keys.append(_root(local, code))
            return tuple(reversed(keys))
        base = getattr(cur, "base", None)
        if base is None:
            return None
        if isinstance(getattr(cur, "member", None), str):
            keys.append(("attr", cur.member))
        elif isinstance(getattr(cur, "index", None), (int, str)):
            keys.append(cur.index)
        else:
            return None
        cur = base
    return None


def _variadic(code: Any) -> tuple[str | None, str | None]:
    """The names of a code object's ``*args`` and ``**kwargs`` locals (None where it has none)."""
    n = code.co_argcount + code.co_kwonlyargcount
    names, varargs, varkw = code.co_varnames, None, None
    if code.co_flags & inspect.CO_VARARGS:
        varargs, n = names[n], n + 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        varkw = names[n]
    return varargs, varkw


def _root(local: str, code: Any) -> Any:
    varargs, varkw = _variadic(code)
    return ("varargs",) if local == varargs else ("varkw",) if local == varkw else local


# ---------------------------------------------------------------------------- parsing


#: how every refusal of :func:`parse` starts; ``keyword`` names the argument the user gave
_REFUSAL = "verishape.compile: shapes_spec"


def parse(spec: Any, model: Any, keyword: str = "shapes_spec") -> Declared:
    """Read ``spec`` (torch's ``ShapesSpec``, ``ParamsSpec`` or the dict either takes) for
    ``model``; raises :class:`UsageError` naming what cannot be read, and the argument the
    spec came by (``keyword``: ``shapes_spec``, or torch 2.14's name ``dynamic_shapes``)."""
    try:
        return _parse(spec, model)
    except UsageError as exc:
        if keyword == "shapes_spec" or not str(exc).startswith(_REFUSAL):
            raise
        raise UsageError(f"verishape.compile: {keyword}" + str(exc)[len(_REFUSAL):]) from None


def _parse(spec: Any, model: Any) -> Declared:
    try:
        from torch.fx.experimental.dynamic_spec import ParamsSpec, ShapesSpec
    except ImportError:
        import torch

        raise UsageError(f"verishape.compile: shapes_spec needs torch.fx.experimental.dynamic_spec (torch 2.13 "
                         f"or later); this is torch {torch.__version__}") from None
    if isinstance(spec, (dict, ParamsSpec)):
        spec = ShapesSpec(spec)
    if not isinstance(spec, ShapesSpec):
        raise UsageError(f"verishape.compile: shapes_spec={type(spec).__name__} is not a ShapesSpec, ParamsSpec "
                         "or dict of parameter specs (torch.fx.experimental.dynamic_spec)")
    named, varargs, dims = _read(spec)
    positional, codes, takes_any = _signature(model)
    if not codes:
        # (Dynamo enters a partial or a callable object through a wrapper of its own, whose
        # arguments the spec's names cannot be matched to)
        raise UsageError(f"verishape.compile: shapes_spec is read against a function's or an nn.Module's own "
                         f"parameters; {type(model).__name__} has none (compile the function itself)")
    for i, tree in enumerate(varargs):
        if i >= len(positional):
            raise UsageError(f"verishape.compile: shapes_spec '*args'[{i}] has no positional parameter "
                             f"(the callable takes {list(positional)})")
        named.setdefault(positional[i], tree)
    unknown = sorted(set(named) - set(positional) - set(_keyword_names(model))) if not takes_any else []
    if unknown:
        raise UsageError(f"verishape.compile: shapes_spec names {unknown}, which the callable does not take "
                         f"(its parameters: {list(positional) + _keyword_names(model)})")
    assumptions = tuple(_assumption(a, dims, i) for i, a in enumerate(spec.assumptions))
    return Declared(named, positional, codes, assumptions)


def _read(spec: Any) -> tuple[dict[str, Any], list[Any], dict[str, Dim]]:
    """A ``ShapesSpec``'s trees: by parameter name (``"**kwargs"`` entries among them), the
    ``"*args"`` entries in order, and the variables."""
    dims: dict[str, Dim] = {}
    params = (spec.to_jsonable().get("params") or {}).get("params") or {}
    named: dict[str, Any] = {}
    varargs: list[Any] = []
    for key, value in params.items():
        if key == "*args":
            varargs = [_tree(v, f"'*args'[{i}]", dims) for i, v in enumerate(value)]
        elif key == "**kwargs":
            named.update({k: _tree(v, f"'**kwargs'[{k!r}]", dims) for k, v in value.items()})
        else:
            named[key] = _tree(value, repr(key), dims)
    return named, varargs, dims


def torch_spec_active() -> bool:
    """A ``torch.compile(..., shapes_spec=...)`` frame (``dynamic_shapes=`` from torch 2.14) is
    compiling: torch reads its spec."""
    return torch_seam.torch_spec() is not None


def of_torch_compile(code: Any) -> Declared | None:
    """What ``torch.compile(..., shapes_spec=...)`` (torch's own reading, active while a frame
    of it compiles) declares for a frame of ``code``, read as torch reads it: by the frame's
    own local names, ``*args`` entries by the frame's ``*args`` index; None where no spec is
    active, or it cannot be read.  For the audit: torch gave those sizes unbacked symbols."""
    spec = torch_seam.torch_spec()
    if spec is None or code is None:
        return None
    try:
        named, varargs, dims = _read(spec)
        assumptions = tuple(_assumption(a, dims, i) for i, a in enumerate(spec.assumptions))
    except UsageError as exc:
        _say_once(f"verishape: torch's {torch_seam.spec_keyword() or 'shapes_spec'} is not read as a declared "
                  f"space: {exc}")
        return None
    # ``args[i]`` resolves through ``positional``: here the spec's own ``*args`` entries
    positional = tuple(f"*args[{i}]" for i in range(len(varargs)))
    named.update(zip(positional, varargs))
    return Declared(named, positional, frozenset({code}), assumptions)


def _tree(value: Any, where: str, dims: dict[str, Dim]) -> Any:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, dict):
        raise UsageError(f"verishape.compile: shapes_spec {where} is {value!r}, derived from other variables; "
                         "declare it as a ShapeVar of its own")
    kind = value.get("type")
    if kind == "TensorSpec":
        return tuple(_tree(d, f"{where} dim {i}", dims) for i, d in enumerate(value["dims"]))
    if kind in ("ShapeVar", "IntVar"):
        return _dim(value, where, dims)
    if kind == "ObjectSpec":
        return ("object", {k: _tree(v, f"{where}.{k}", dims) for k, v in value["fields"].items()})
    if kind == "DictSpec":
        return ("dict", {str(k): _tree(v, f"{where}[{k!r}]", dims) for k, v in value["entries"].items()})
    if kind == "SeqSpec":
        return ("seq", tuple(_tree(v, f"{where}[{i}]", dims) for i, v in enumerate(value["entries"])))
    raise UsageError(f"verishape.compile: shapes_spec {where} is a {kind}, which verishape does not read")


def _dim(value: dict[str, Any], where: str, dims: dict[str, Dim]) -> Dim:
    name = value.get("name")
    if not name or name == "anon":
        raise UsageError(f"verishape.compile: shapes_spec {where} is an unnamed {value['type']}; name it "
                         f"({value['type']}('batch', ...)): dimensions declared with one name are one size")
    low = value.get("min")
    dim = Dim(name, max(0, low) if low is not None else (0 if value["type"] == "ShapeVar" else -(2 ** 63)),
              value.get("max"))
    if name in dims and dims[name] != dim:
        raise UsageError(f"verishape.compile: shapes_spec declares {name!r} twice with other bounds "
                         f"({dims[name].low}..{dims[name].high} and {dim.low}..{dim.high})")
    dims[name] = dim
    return dim


def _assumption(a: Any, dims: Mapping[str, Dim], i: int) -> sympy.Basic:
    expr = a.node.expr
    rename = {}
    for s in expr.free_symbols:
        name = str(s).rsplit("#", 1)[0]
        if name not in dims:
            raise UsageError(f"verishape.compile: shapes_spec assumption {i} ({expr}) names {name!r}, which no "
                             "parameter of the spec declares")
        rename[s] = sympy.Symbol(name, integer=True)
    return expr.xreplace(rename)


def _signature(model: Any) -> tuple[tuple[str, ...], frozenset[Any], bool]:
    """The callable's positional parameter names, the code objects Dynamo may enter it
    through (its own and each wrapper's on the ``__wrapped__`` chain; a module's forward),
    and whether it takes any keyword (``**kwargs``)."""
    import torch

    fn = model.forward if isinstance(model, torch.nn.Module) else model
    codes = set()
    cur, seen = fn, 0
    while cur is not None and seen < 16:
        code = getattr(getattr(cur, "__func__", cur), "__code__", None)
        if code is not None:
            codes.add(code)
        cur, seen = getattr(cur, "__wrapped__", None), seen + 1
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return (), frozenset(codes), True
    positional = tuple(p.name for p in sig.parameters.values()
                       if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    return positional, frozenset(codes), takes_any


def _keyword_names(model: Any) -> list[str]:
    import torch

    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        return [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]
    except (TypeError, ValueError):
        return []


# ---------------------------------------------------------------------------- applying


def of_backend(compiler_fn: Any) -> Declared | None:
    """What the verishape backend under Dynamo's wrappers of ``compiler_fn`` declares (None:
    no declaration, or not a verishape backend)."""
    from . import frames

    declared = getattr(frames.verishape_backend(compiler_fn)[0], "declared", None)
    return declared if isinstance(declared, Declared) else None


def symbolic_context(declared: Declared, context: Any, tensor: Any, source: Any, code: Any,
                     at_two: Callable[[int, Dim], bool] | None = None) -> Any:
    """``context`` (Dynamo's choice for ``tensor``) with each declared dimension whose size
    is in its range and at least 2 given a symbol ranging over the declared range (a
    declared int dimension, of that value, static); the same object where the declaration
    says nothing of ``tensor`` or does not fit it (another rank: stock's choice).  A
    dimension at 1 of a variable the attempt traces at 2 (``at_two(i, dim)`` gives it the hint 2:
    Note [A declared size at 1 is compiled at 2]) gets that symbol too."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StrictMinMaxConstraint
    from torch.utils._sympy.value_ranges import ValueRanges

    leaf = declared.leaf(source, code)
    held = declared.tensor_holding(source, code) if leaf is None and at_two is not None else None
    sizes = getattr(context, "dynamic_sizes", None)
    if not isinstance(leaf or held, tuple) or sizes is None:
        return context
    if held is not None or len(leaf) != tensor.dim():
        if held is None:
            _say_once(f"verishape: shapes_spec declares {source.name} with {len(leaf)} dimension(s), the call "
                      f"passes {tensor.dim()}: its sizes are left to stock's choice")
        leaf = held or leaf
        if at_two is None or not leaf or not tensor.dim() or not isinstance(leaf[0], Dim):
            return context
        # traced at 2, its outer dimension still carries the leading variable (a static cache's
        # decode step passes a 4-d mask, batch first, where a 2-d one is declared, or a dict
        # of them: Note [A declared size at 1 is compiled at 2])
        leaf = (leaf[0],) + (None,) * (tensor.dim() - 1)
    chosen, constraints = list(sizes), list(context.constraint_sizes)
    for i, d in enumerate(leaf):
        n = tensor.shape[i]
        if not isinstance(n, int):
            continue
        if isinstance(d, Dim) and ((n >= 2 and d.holds(n)) or (
                n == 1 and d.holds(1) and d.holds(2) and at_two is not None and at_two(i, d))):
            chosen[i] = DimDynamic.DYNAMIC
            # warn_only: a guard that narrows the range is a guard, not an error (mark_dynamic's
            # strict form raises); the range is the symbol's from its creation, its bounds guards
            constraints[i] = StrictMinMaxConstraint(vr=ValueRanges(max(d.low, 2), d.high if d.high is not None
                                                                   else sympy.oo), warn_only=True)
        elif isinstance(d, int) and not isinstance(d, bool) and n == d:
            chosen[i], constraints[i] = DimDynamic.STATIC, None
    if chosen == list(sizes) and constraints == list(context.constraint_sizes):
        return context
    return dataclasses.replace(context, dynamic_sizes=chosen, constraint_sizes=constraints)


def constrain(env: Any, value: Any, dim: Dim) -> None:
    """A declared int argument's symbol (``value``, a SymInt) ranges over its declared
    range from its creation: its bounds are guards, as a tensor dimension's are."""
    import torch

    if isinstance(value, torch.SymInt) and isinstance(value.node.expr, sympy.Symbol):
        env.constrain_symbol_range(value.node.expr, max(dim.low, 2), dim.high if dim.high is not None else sympy.oo)


_said: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        log.warning(line)


def facts(declared: Declared, tracked: list[tuple[Any, Any]], code: Any) -> list[sympy.Basic]:
    """The declaration's facts about a trace (``tracked``: its inputs' sources and fake
    values): every two sizes declared with one variable are equal, and each assumption all
    of whose variables the trace has holds; in the trace's symbols, to be guarded."""
    import torch

    by_var: dict[str, list[sympy.Basic]] = {}
    for source, fake in tracked:
        leaf = declared.leaf(source, code)
        if not isinstance(leaf, tuple) or not isinstance(fake, torch.Tensor) or len(leaf) != fake.dim():
            continue
        for d, n in zip(leaf, fake.shape):
            if isinstance(d, Dim):
                by_var.setdefault(d.name, []).append(sympy.sympify(n.node.expr if isinstance(n, torch.SymInt) else n))
    out: list[sympy.Basic] = [sympy.Eq(first, other) for sizes in by_var.values()
                              for first in sizes[:1] for other in sizes[1:] if first != other]
    for a in declared.assumptions:
        names = {str(s) for s in a.free_symbols}
        if names <= by_var.keys():
            out.append(a.xreplace({sympy.Symbol(n, integer=True): by_var[n][0] for n in names}))
    return [f for f in out if f is not sympy.true]
