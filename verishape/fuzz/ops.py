"""What to fuzz: OpInfo entries from torch's op database, or custom torch.library ops.

A :class:`Target` bundles the callable, seed cases (OpInfo sample inputs, or cases derived
from a custom op's schema) and the source text a repro needs to get the callable back.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from verishape.core import torch_names, torch_seam
from verishape.core.errors import VerishapeError

from .inputs import Case, TensorSpec, UnsupportedSample, from_sample

#: Preferred dtypes, first supported wins: shape bugs rarely depend on the exact dtype.
DTYPES = (torch.float32, torch.int64, torch.bool, torch.complex64, torch.float64, torch.int32,
          torch.uint8, torch.float16, torch.bfloat16)

MAX_SAMPLES = 24


class UnknownOp(VerishapeError, LookupError):
    """A requested op name matches nothing (a usage error)."""


@dataclasses.dataclass
class Target:
    name: str
    variant: str
    fn: Callable[..., Any]
    seeds: Callable[[], list[Case]]
    fn_source: str           # Python expression evaluating to fn in a repro
    imports: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name


@functools.cache
def op_db() -> list[Any]:
    """torch's OpInfo database (slow import, a few seconds, done once per process)."""
    torch_seam.require_names((torch_names.OP_DB,), "fuzzing torch's OpInfo operators")
    from torch.testing._internal.common_methods_invocations import op_db as db

    return list(db)


def _cpu_dtype(info: Any) -> torch.dtype | None:
    supported = info.supported_dtypes("cpu")
    return next((d for d in DTYPES if d in supported), None)


def cpu_opinfos() -> list[Any]:
    return [info for info in op_db() if _cpu_dtype(info) is not None]


def _opinfo_target(info: Any) -> Target:
    dtype = _cpu_dtype(info)
    assert dtype is not None

    def seeds() -> list[Case]:
        cases = []
        samples = info.sample_inputs("cpu", dtype, requires_grad=False)
        for sample in itertools.islice(samples, MAX_SAMPLES):
            try:
                cases.append(from_sample((sample.input, *sample.args), sample.kwargs))
            except UnsupportedSample:
                continue
        return cases

    sel = f"o.name == {info.name!r} and o.variant_test_name == {info.variant_test_name!r}"
    source = f"next(o for o in op_db if {sel}).op"
    return Target(info.name, info.variant_test_name, info.op, seeds, source,
                  ("from torch.testing._internal.common_methods_invocations import op_db",))


def resolve(names: Sequence[str] | None, imports: Sequence[str] = ()) -> list[Target]:
    """Targets for ``names`` (None: every CPU OpInfo).  ``NAME`` matches all variants,
    ``NAME.variant`` one; ``ns::op`` (or ``ns.op`` after ``--import``) a custom op."""
    for module in imports:
        importlib.import_module(module)
    infos = cpu_opinfos()
    if names is None:
        return sorted((_opinfo_target(i) for i in infos), key=lambda t: t.full_name)
    targets: list[Target] = []
    for name in names:
        found = [i for i in infos if i.name == name or
                 (i.variant_test_name and f"{i.name}.{i.variant_test_name}" == name)]
        if found:
            targets += [_opinfo_target(i) for i in found]
            continue
        custom = _custom_target(name, tuple(imports))
        if custom is None:
            raise UnknownOp(f"unknown op {name!r}: not an OpInfo name (e.g. 'index_select', "
                            f"'nn.functional.pad') nor a custom op 'namespace::name'")
        targets.append(custom)
    seen: dict[str, Target] = {}
    for t in targets:
        seen.setdefault(t.full_name, t)
    return sorted(seen.values(), key=lambda t: t.full_name)


def by_full_name(full_names: Sequence[str], imports: Sequence[str] = ()) -> list[Target]:
    """Exactly the targets named (``name`` or ``name.variant`` as in :attr:`Target.full_name`)."""
    wanted = set(full_names)
    for module in imports:
        importlib.import_module(module)
    found = [_opinfo_target(i) for i in cpu_opinfos()
             if (f"{i.name}.{i.variant_test_name}" if i.variant_test_name else i.name) in wanted]
    names = {t.full_name for t in found}
    for name in sorted(wanted - names):
        custom = _custom_target(name, tuple(imports))
        if custom is None:
            raise UnknownOp(f"unknown op {name!r}")
        found.append(custom)
    return sorted(found, key=lambda t: t.full_name)


def _custom_target(name: str, imports: tuple[str, ...]) -> Target | None:
    ns, sep, op = name.replace("::", ".").partition(".")
    if not sep or not ns or not op:
        return None
    try:
        packet = getattr(getattr(torch.ops, ns), op)
    except (AttributeError, RuntimeError):
        return None
    overload = getattr(packet, "default", None)
    if overload is None:
        return None
    return custom_target(overload, imports=tuple(f"import {m}" for m in imports),
                         fn_source=f"torch.ops.{ns}.{op}.default")


def custom_target(op: Any, *, seeds: Sequence[Case] | None = None, imports: tuple[str, ...] = (),
                  fn_source: str | None = None) -> Target:
    """A Target for a custom op (OpOverload, CustomOpDef or packet).  Without explicit seeds
    the op's schema decides: each Tensor argument becomes a float tensor of rank 1 to 3."""
    overload = _overload(op)
    name = overload.name() if overload is not None else getattr(op, "__name__", "custom")
    if fn_source is None and overload is not None:
        ns, _, rest = name.partition("::")
        fn_source = f"torch.ops.{ns}.{rest.split('.')[0]}.default"
    fn = overload if overload is not None else op
    if seeds is None:
        if overload is None:
            raise ValueError(f"{op!r} has no schema; pass seed cases (sample arguments)")
        seeds = schema_seeds(overload._schema)
    fixed = list(seeds)
    return Target(name, "", fn, lambda: list(fixed), fn_source or "fn", imports)


def _overload(op: Any) -> Any:
    if isinstance(op, torch._ops.OpOverload):
        return op
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op.default
    inner = getattr(op, "_opoverload", None)   # torch.library.custom_op's CustomOpDef
    if isinstance(inner, torch._ops.OpOverload):
        return inner
    return None


def schema_seeds(schema: Any) -> list[Case]:
    """Seed cases from an op schema: Tensors of ranks 1..3, small ints, floats 1.0, bools."""
    cases = []
    for rank in (1, 2, 3):
        args: list[Any] = []
        for arg in schema.arguments:
            if arg.kwarg_only:
                continue
            kind = str(arg.type).rstrip("?")
            if kind == "Tensor":
                args.append(TensorSpec((3,) * rank, torch.float32, pool=(0.5, 1.5, -1.0)))
            elif kind == "int":
                args.append(1)
            elif kind == "float":
                args.append(1.0)
            elif kind == "bool":
                args.append(False)
            elif arg.has_default_value():
                break
            else:
                raise ValueError(f"cannot derive inputs for argument {arg.name}: {arg.type}; pass seed cases")
        cases.append(Case(tuple(args), {}))
    return cases
