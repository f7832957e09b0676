"""A pytest plugin for ``torch_suite.py``: one side of a run of PyTorch's own tests.

``TORCH_SUITE_SIDE=verishape`` puts a stand-in for ``ShapeEnv`` in place of the module global of
every loaded torch module, before each test (a module torch imports lazily, inside an earlier
test, is swapped at the next): every site that builds a ShapeEnv (Dynamo, export, fake tensors,
replays) builds a :class:`verishape.VeriShapeEnv`, and every ``isinstance`` check through that
name still accepts stock's.  A bare swap to ``VeriShapeEnv`` (``compile_cost.py``'s PyTorch rows,
``tests/test_torch_checks.py``) made torch's own assertion on a stock env that a test built itself
fail (``torch.fx.experimental.recording``: "Expected ShapeEnv, got ShapeEnv", PyTorch's
``test_shape_env_no_recording``): the harness's doing, not verishape's, which never swaps torch's
names.  ``stock`` leaves torch alone.

Either side appends one JSON line per test to ``TORCH_SUITE_OUT``: its outcome (the first
failing phase's, else the call's), its seconds (setup, call and teardown), and on the verishape
side how many VeriShapeEnvs the test built and the solver's calls, seconds and over-budget
questions in it.  A test that built none ran no verishape code: ``torch_suite.py`` says so, so
that an equal outcome there is not counted as agreement.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

SIDE = os.environ.get("TORCH_SUITE_SIDE", "stock")
_OUT = os.environ.get("TORCH_SUITE_OUT")
_builders: tuple[Any, ...] = ()
_built = [0]
_tests: dict[str, dict[str, Any]] = {}


def pytest_configure(config: pytest.Config) -> None:
    """Both sides import Dynamo and Inductor here, so that neither side's first test pays for
    them (verishape's set-up below imports them, and its own modules: one-time costs, outside
    every test's seconds on both sides)."""
    global _builders
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    if SIDE != "verishape":
        return
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from verishape import VeriShapeEnv
    from verishape.compiler import frames

    frames.install()
    _builders = (ShapeEnv, frames._shape_env_factory)
    init = VeriShapeEnv.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        _built[0] += 1
        init(self, *args, **kwargs)

    VeriShapeEnv.__init__ = counted  # type: ignore[method-assign]


def _swap() -> None:
    global _stand_in
    if _stand_in is None:
        from verishape import VeriShapeEnv

        _stand_in = _standing_in(_builders[0], VeriShapeEnv)
    for name, mod in list(sys.modules.items()):
        if name.startswith("torch") and getattr(mod, "ShapeEnv", None) in _builders:
            mod.ShapeEnv = _stand_in


_stand_in: Any = None


def _standing_in(stock: type, ours: type) -> type:
    """A class whose call builds ``ours`` and whose instance and subclass checks are ``stock``'s;
    its other attributes are ``ours``'."""

    class Builds(type):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return ours(*args, **kwargs)

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, stock)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, stock)

        def __getattr__(cls, name: str) -> Any:
            return getattr(ours, name)

    return Builds("ShapeEnv", (), {"__module__": __name__, "__doc__": ours.__doc__})


def _solver() -> tuple[int, float, int]:
    from verishape.core.premises import current_prover

    stats = current_prover().stats
    return stats.solver_calls, stats.solver_time_s, stats.over_budget


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    row: dict[str, Any] = {"seconds": 0.0, "outcome": None}
    if SIDE == "verishape":
        _swap()
        row["start"] = (_built[0], *_solver())
    _tests[item.nodeid] = row


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    row = _tests.setdefault(report.nodeid, {"seconds": 0.0, "outcome": None})
    row["seconds"] += report.duration
    failed_phase = report.when != "call" and report.outcome != "passed"
    if row["outcome"] in (None, "passed") and (report.when == "call" or failed_phase):
        row["outcome"] = ("error" if report.outcome == "failed" and report.when != "call" else report.outcome)
        if hasattr(report, "wasxfail"):
            row["outcome"] = "xfailed" if report.outcome == "skipped" else "xpassed"
    if report.when == "teardown":
        _write(report.nodeid, row)


def _write(nodeid: str, row: dict[str, Any]) -> None:
    if SIDE == "verishape" and "start" in row:
        built, calls, seconds, over = row.pop("start")
        now_calls, now_seconds, now_over = _solver()
        row.update(envs_built=_built[0] - built, solver_calls=now_calls - calls,
                   solver_s=round(now_seconds - seconds, 4), over_budget=now_over - over)
    if _OUT:
        with open(_OUT, "a") as out:
            out.write(json.dumps({"test": nodeid, **row}) + "\n")
