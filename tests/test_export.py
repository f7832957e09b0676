"""``verishape.export``: torch.export with proved shape reasoning, a stock artifact.

Each provable program is one stock ``torch.export.export`` rejects with a data-dependent
error although its ``torch._check`` facts (and the ``Dim`` ranges the exported program
checks) decide the question.  verishape must export it, match eager on several inputs,
keep rejecting inputs that break the user's checks, and hand back a program that runs
without verishape (save/load in a clean process, ``run_decompositions``, AOTInductor).
Undecidable controls must still fail with stock's error, a plain ``torch.export.export``
must keep the stock ShapeEnv, and a constraint violation keeps stock's text with the
proved reason appended.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import verishape
from verishape.compiler import frames
from verishape.compiler.export.program import ExportShapeEnv, export_envs, program_shape_env
from verishape.core.torch_seam import UnsupportedTorch

ASSERT = torch.ops.aten._assert_scalar.default


# ---------------------------------------------------------------------------- programs


class Product(torch.nn.Module):
    """``u * n == 10`` with ``n >= 3`` (a checked Dim bound) gives ``u <= 5``."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        u = x.item()
        torch._check(u * y.size(0) == 10)
        if u <= 5:
            return y * 2
        return y * 3


class Slack(torch.nn.Module):
    """``u + a <= b`` with ``a >= 3`` gives ``u < b``."""

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        u = x.item()
        torch._check(u >= 0)
        torch._check(u + y.size(0) <= z.size(0))
        if u < z.size(0):
            return z[:u] + 1
        return z


class Chain(torch.nn.Module):
    """``a <= b <= c`` gives ``a <= c``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b, c = x.tolist()
        torch._check(a <= b)
        torch._check(b <= c)
        if a <= c:
            return torch.arange(3) * (c - a)
        return torch.zeros(3)


class RedundantCheck(torch.nn.Module):
    """Stock exports it too; the third check is implied, so its assert is discharged."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b, c = x.tolist()
        torch._check(a <= b)
        torch._check(b <= c)
        torch._check(a <= c)
        return torch.arange(3) * (c - a)


class Replaced(torch.nn.Module):
    """``n == x.size(0)`` replaces ``n`` by the size; the data value must still be checked."""

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        n = t.item()
        torch._check(n == x.size(0))
        return x.sum() * n


class Unchecked(torch.nn.Module):
    """Control: nothing decides ``u <= 5``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x.item()
        if u <= 5:
            return torch.ones(2)
        return torch.zeros(2)


class Divisible(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._check(x.size(0) % 8 == 0)
        return x + 1


class Specialized(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(0) == 4:
            return x + 1
        return x - 1


PRODUCT = (Product, (torch.tensor(2), torch.randn(5)), {"x": None, "y": {0: Dim("n", min=3)}},
           [(torch.tensor(2), torch.randn(5)), (torch.tensor(1), torch.randn(10))])
SLACK = (Slack, (torch.tensor(1), torch.randn(3), torch.randn(7)),
         {"x": None, "y": {0: Dim("a", min=3)}, "z": {0: Dim("b", min=3)}},
         [(torch.tensor(0), torch.randn(3), torch.randn(5)), (torch.tensor(4), torch.randn(4), torch.randn(9)),
          (torch.tensor(2), torch.randn(6), torch.randn(8))])
CHAIN = (Chain, (torch.tensor([1, 2, 3]),), None,
         [(torch.tensor([1, 2, 3]),), (torch.tensor([-4, 0, 0]),), (torch.tensor([5, 5, 5]),)])
PROVABLE = {"product": PRODUCT, "slack": SLACK, "chain": CHAIN}


def n_asserts(ep: torch.export.ExportedProgram) -> int:
    return sum(n.target is ASSERT for n in ep.graph.nodes)


def assert_matches_eager(ep: torch.export.ExportedProgram, model: torch.nn.Module, inputs: list[tuple]) -> None:
    run = ep.module()
    for args in inputs:
        torch.testing.assert_close(run(*args), model(*args))


def export_both(model: torch.nn.Module, args: tuple, ds: Any, strict: bool = False) -> tuple[Any, Any]:
    """(stock's exception or program, verishape's program)."""
    try:
        stock: Any = torch.export.export(model, args, dynamic_shapes=ds, strict=strict)
    except Exception as exc:  # noqa: BLE001 - the stock outcome is what is compared
        stock = exc
    return stock, verishape.export(model, args, dynamic_shapes=ds, strict=strict)


# ---------------------------------------------------------------------------- item 1 and 2: provable programs


@pytest.mark.parametrize("name", sorted(PROVABLE))
def test_provable_program_exports_non_strict_where_stock_fails(name: str) -> None:
    cls, args, ds, inputs = PROVABLE[name]
    model = cls()
    stock, ep = export_both(model, args, ds)
    assert isinstance(stock, Exception) and "Could not guard on data-dependent expression" in str(stock)
    assert isinstance(ep, torch.export.ExportedProgram) and type(ep) is torch.export.ExportedProgram
    assert_matches_eager(ep, model, inputs)
    log = verishape.export_decisions(ep)
    assert log.counts().get("dde_avoided", 0) >= 1
    assert [type(e) for e in export_envs(ep)] == [ExportShapeEnv]  # the ATen re-trace reused it
    assert program_shape_env(ep) is export_envs(ep)[0]


class Sub(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * 2 + y.sum()


class Top(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sub = Sub()

    def forward(self, x: torch.Tensor, y: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
        if x.size(0) > 3:
            return self.sub(x, y) * scale
        return x


@pytest.mark.parametrize("strict", [False, True])
def test_arguments_pass_through_and_program_equals_stock(strict: bool) -> None:
    """kwargs, ``Dim.AUTO``/``Dim.DYNAMIC`` and ``preserve_module_call_signature`` reach
    torch unchanged; where nothing needs a proof the program is stock's."""
    args, kwargs = (torch.randn(5, 2), torch.randn(4)), {"scale": 2.0}
    ds = {"x": {0: Dim.AUTO}, "y": {0: Dim.DYNAMIC}, "scale": None}
    stock = torch.export.export(Top(), args, kwargs, dynamic_shapes=ds, strict=strict,
                                preserve_module_call_signature=("sub",))
    ours = verishape.export(Top(), args, kwargs, dynamic_shapes=ds, strict=strict,
                            preserve_module_call_signature=("sub",))
    assert ours.graph_module.code == stock.graph_module.code
    assert ours.range_constraints == stock.range_constraints
    assert [e.fqn for e in ours.module_call_graph] == [e.fqn for e in stock.module_call_graph]
    assert isinstance(torch.export.unflatten(ours).sub, torch.nn.Module)
    for x, y in ((torch.randn(7, 2), torch.randn(3)), (torch.randn(4, 2), torch.randn(9))):
        torch.testing.assert_close(ours.module()(x, y, scale=2.0), Top()(x, y, scale=2.0))


@pytest.mark.parametrize("name", ["chain", "product"])
def test_provable_program_exports_strict(name: str) -> None:
    cls, args, ds, inputs = PROVABLE[name]
    model = cls()
    stock, ep = export_both(model, args, ds, strict=True)
    assert isinstance(stock, Exception) and "Could not guard on data-dependent expression" in str(stock)
    assert_matches_eager(ep, model, inputs)
    envs = export_envs(ep)
    assert envs and all(type(e) is ExportShapeEnv for e in envs)
    assert program_shape_env(ep) is envs[-1]  # the ATen re-trace kept Dynamo's env
    assert verishape.export_decisions(ep).counts().get("dde_avoided", 0) >= 1


def test_bad_inputs_still_rejected() -> None:
    """Inputs that break the user's checks or the declared Dim range raise in the exported
    program as in eager; in particular a size below the Dim's min, which the proof used."""
    model = Product()
    ep = verishape.export(model, PRODUCT[1], dynamic_shapes=PRODUCT[2])
    run = ep.module()
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        run(torch.tensor(3), torch.randn(5))  # 3 * 5 != 10
    with pytest.raises(Exception, match=">= 3"):
        run(torch.tensor(10), torch.randn(1))  # u <= 5 was proved from n >= 3
    chain = verishape.export(Chain(), CHAIN[1], strict=True)
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        chain.module()(torch.tensor([3, 2, 5]))


def test_unchecked_lower_bound_is_no_premise() -> None:
    """An exported program accepts sizes 0 and 1 whatever was declared (it checks a lower
    bound only above 2), so the ``n >= 2`` of 0/1 specialization proves nothing: with a
    plain ``Dim`` the product program keeps stock's data-dependent error, where a proof
    from ``n >= 2`` would return ``y * 2`` for ``u = 10, n = 1`` instead of eager's ``y * 3``."""
    with pytest.raises(Exception, match="Could not guard on data-dependent expression"):
        verishape.export(Product(), (torch.tensor(2), torch.randn(5)), dynamic_shapes={"x": None, "y": {0: Dim("n")}})


def test_replaced_data_value_keeps_its_check() -> None:
    for strict in (False, True):
        model = Replaced()
        ep = verishape.export(model, (torch.tensor(4), torch.randn(4)), dynamic_shapes={"t": None, "x": {0: Dim("n")}},
                              strict=strict)
        assert_matches_eager(ep, model, [(torch.tensor(4), torch.ones(4)), (torch.tensor(7), torch.ones(7))])
        with pytest.raises(RuntimeError, match="Runtime assertion failed"):
            ep.module()(torch.tensor(5), torch.ones(4))


def test_implied_assert_is_discharged_and_ranges_stay_stock() -> None:
    model = RedundantCheck()
    args = (torch.tensor([1, 2, 3]),)
    stock, ep = export_both(model, args, None)
    assert n_asserts(ep) == n_asserts(stock) - 1
    assert {str(k): str(v) for k, v in ep.range_constraints.items()} == \
        {str(k): str(v) for k, v in stock.range_constraints.items()}
    assert verishape.export_decisions(ep).counts() == {"assert_discharged": 1}
    assert_matches_eager(ep, model, [(torch.tensor([1, 2, 3]),), (torch.tensor([0, 0, 9]),)])
    for bad in (torch.tensor([3, 2, 5]), torch.tensor([1, 4, 2])):
        with pytest.raises(RuntimeError, match="Runtime assertion failed"):
            ep.module()(bad)


@pytest.mark.parametrize("strict", [False, True])
def test_undecidable_control_keeps_stock_error(strict: bool) -> None:
    def message(fn: Any) -> str:
        with pytest.raises(Exception) as info:
            fn(Unchecked(), (torch.tensor(3),), strict=strict)
        return str(info.value)

    stock, ours = message(torch.export.export), message(verishape.export)
    assert "Could not guard on data-dependent expression u0 <= 5" in stock
    assert "Could not guard on data-dependent expression u0 <= 5" in ours


# ---------------------------------------------------------------------------- scoping


def test_plain_export_keeps_stock_shape_env() -> None:
    model, args, ds, _ = CHAIN
    ours = verishape.export(model(), args, dynamic_shapes=ds)
    theirs = torch.export.export(RedundantCheck(), args)
    assert type(program_shape_env(ours)) is ExportShapeEnv
    assert type(program_shape_env(theirs)) is ShapeEnv
    with pytest.raises(TypeError, match="not produced by verishape.export"):
        verishape.export_decisions(theirs)


def test_scope_is_per_thread() -> None:
    """Inside one thread's verishape export, another thread's stock export stays stock."""
    seen: list[Any] = []

    def other() -> None:
        seen.append(program_shape_env(torch.export.export(RedundantCheck(), (torch.tensor([1, 2, 3]),))))

    built: list[Any] = []
    with frames.exporting(built, ExportShapeEnv):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        mine = torch.export.export(RedundantCheck(), (torch.tensor([1, 2, 3]),))
    assert [type(e) for e in seen] == [ShapeEnv]
    assert program_shape_env(mine) is built[-1] and type(built[-1]) is ExportShapeEnv


def test_missing_hook_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    called = []
    monkeypatch.setattr(torch.export, "export", lambda *a, **k: called.append(1))
    monkeypatch.setattr(frames, "_export_hook_error", "torch._export.non_strict_utils.ShapeEnv is missing")
    with pytest.raises(UnsupportedTorch, match="verishape.export cannot run on this torch"):
        verishape.export(Chain(), CHAIN[1])
    assert not called
    monkeypatch.setattr(frames, "EXPORT_SITES", ("torch._export.non_strict_utils", "torch._no_such_module"))
    assert "cannot import torch._no_such_module" in frames._install_export_hooks()


def test_explain_accepts_an_exported_program() -> None:
    ep = verishape.export(Chain(), CHAIN[1])
    text = verishape.explain(ep)
    assert text.startswith("exported program (forward)")
    assert "decided dde_avoided: u0 <= u2 is True" in text


# ---------------------------------------------------------------------------- item 3: a stock artifact

_LOADER = textwrap.dedent("""
    import json, sys
    import torch
    out = {}
    for name, path, inputs in json.loads(sys.argv[1]):
        run = torch.export.load(path).module()
        results = []
        for args in inputs:
            try:
                results.append(run(*[torch.tensor(a) for a in args]).tolist())
            except Exception as exc:
                results.append("raised " + type(exc).__name__)
        out[name] = results
    out["verishape_imported"] = any(m == "verishape" or m.startswith("verishape.")
                                    for m in sys.modules)
    print(json.dumps(out))
""")


def test_saved_program_runs_in_a_process_without_verishape(tmp_path: Path) -> None:
    cases = {
        "chain": (Chain(), CHAIN[1], None, [[[1, 2, 3]], [[-4, 0, 0]], [[3, 2, 5]]]),
        "product": (Product(), PRODUCT[1], PRODUCT[2], [[2, [1.0] * 5], [1, [2.0] * 10], [3, [1.0] * 5]]),
    }
    jobs = []
    expected = {}
    for name, (model, args, ds, inputs) in cases.items():
        path = tmp_path / f"{name}.pt2"
        torch.export.save(verishape.export(model, args, dynamic_shapes=ds), path)
        jobs.append((name, str(path), inputs))
        expected[name] = []
        for raw in inputs:
            try:
                expected[name].append(model(*[torch.tensor(a) for a in raw]).tolist())
            except Exception:  # noqa: BLE001 - eager rejects it; the program must too
                expected[name].append("raised")
    proc = subprocess.run([sys.executable, "-c", _LOADER, json.dumps(jobs)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got.pop("verishape_imported") is False
    for name, results in got.items():
        assert [r if not str(r).startswith("raised") else "raised" for r in results] == expected[name]


def test_run_decompositions_works() -> None:
    model = Chain()
    ep = verishape.export(model, CHAIN[1]).run_decompositions()
    assert_matches_eager(ep, model, CHAIN[3])
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(torch.tensor([3, 2, 5]))


@pytest.mark.slow
def test_aoti_package_runs_on_cpu(tmp_path: Path) -> None:
    model, args, ds, inputs = SLACK
    model = model()
    ep = verishape.export(model, args, dynamic_shapes=ds)
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "slack.pt2"))
    run = torch._inductor.aoti_load_package(path)
    for a in inputs:
        torch.testing.assert_close(run(*a), model(*a))


# ---------------------------------------------------------------------------- item 5: constraint violations


@pytest.mark.parametrize(("cls", "example", "reason"), [
    (Divisible, torch.randn(16), "verishape: proved from (n % 8) == 0, 2 <= n: 8 <= n"),
    (Specialized, torch.randn(4), "verishape: proved from n == 4: n == 4"),
])
def test_constraint_violation_keeps_stock_text_and_adds_reason(cls: type, example: torch.Tensor, reason: str) -> None:
    ds = {"x": {0: Dim("n", min=2, max=64)}}
    with pytest.raises(Exception) as stock:
        torch.export.export(cls(), (example,), dynamic_shapes=ds)
    with pytest.raises(Exception) as ours:
        verishape.export(cls(), (example,), dynamic_shapes=ds)
    assert type(ours.value) is type(stock.value)
    assert "Constraints violated (n)" in str(stock.value)
    assert str(ours.value).startswith(str(stock.value))
    assert str(ours.value)[len(str(stock.value)):].strip() == reason


def test_constraint_violation_reason_strict_and_through_data() -> None:
    """The bound on ``b`` comes from a data value's checks and another Dim's range."""
    cls, args, ds, _ = SLACK
    ds = {**ds, "z": {0: Dim("b")}}  # min 0 declared; the checks force b >= 3
    with pytest.raises(Exception) as ours:
        verishape.export(cls(), args, dynamic_shapes=ds, strict=True)
    text = str(ours.value)
    assert "Constraints violated (b)" in text
    assert text.rstrip().endswith("verishape: proved from a + u0 <= b, 3 <= a, 0 <= u0: 3 <= b")


def test_constraint_violation_reason_with_a_shapes_collection() -> None:
    """The reason reads the Dim ranges from the one parse of ``dynamic_shapes``, which
    resolves a ShapesCollection (a second walk of the spec found no Dim in one)."""
    x = torch.randn(16)
    shapes = torch.export.ShapesCollection()
    shapes[x] = {0: Dim("n", min=2, max=64)}
    with pytest.raises(Exception) as ours:
        verishape.export(Divisible(), (x,), dynamic_shapes=shapes)
    assert "verishape: proved from (n % 8) == 0, 2 <= n: 8 <= n" in str(ours.value)
