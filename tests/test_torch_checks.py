"""torch's own consistency checks keep working on verishape frames.

* Translation validation (``torch.fx.experimental._config.translation_validation``):
  stock validates the ShapeEnv's recorded guards when it produces the frame's guards;
  a verishape frame must validate the same guards, once, and fail the same way.
* Recorded-events replay (``check_shape_env_recorded_events``): stock rebuilds the
  ShapeEnv from its recorded events and compares it with the live one; a verishape frame
  must replay into a VeriShapeEnv and compare equal.
"""

from __future__ import annotations

import pytest
import torch
from compile_helpers import capturing
from torch.fx.experimental import _config as fx_config
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.experimental.validator import (
    BisectValidationException,
    ValidationException,
)

import verishape
from verishape.core.shape_env import VeriShapeEnv


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def split_by(x, shape):
    return x.split(shape)


def pair(x, y):
    """Guards ``a != b`` and ``a > b``: minimization drops the first (implied by the
    second), which stock's range-based filter cannot.  Linear, so translation
    validation (Z3 over reals) stays fast."""
    a, b = x.shape[0], y.shape[0]
    z = x.sum() if a != b else x.sum() * 2
    return z + 1 if a > b else z


def ratio(x, y):
    """``a > b`` follows from the guard ``a >= 2 * b`` and ``b >= 2``: verishape decides
    it while tracing (stock records a second guard).  Linear, as ``pair``."""
    a, b = x.shape[0], y.shape[0]
    z = x.sum() if a >= 2 * b else x.sum() * 2
    return z + 1 if a > b else z


def asserts(x):
    a, b = x[0].item(), x[1].item()
    torch._check(a >= 0)
    torch._check(b >= 1)
    torch._check(a * b >= a)  # discharged by a proof: stock defers a runtime assert
    return torch.ones(a) * b


def mixed(x, n):
    """The program of issue 40's report: ``.item()``, ``torch._check``, a ``%`` branch and
    ``x.shape[0] // 2``, traced whole.  Torch's translation validation of its ``//`` and ``%``
    spends minutes in Z3 (52 s with stock's env, 135 s with VeriShapeEnv's guards, measured
    once, passing): here it is cut at half a second a query (torch then logs "could not
    validate" and goes on); the recorded-events check, what the report quoted, runs whole."""
    k = n.item()
    torch._check(k >= 1)
    torch._check(k <= x.shape[0])
    half = x.shape[0] // 2
    y = x[:half] * 2 if x.shape[0] % 2 == 0 else x[:half] + 1
    return y.sum() + torch.ones(k).sum()


# ---------------------------------------------------------------- translation validation

def _flipped_guard_config(bisect: bool):
    """Stock's own fault injection: the equality guard of ``split`` is recorded flipped,
    so the installed guards no longer imply what tracing checked."""
    return fx_config.patch(inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY=True, translation_validation=True,
                           translation_validation_no_bisect=not bisect)


@pytest.mark.parametrize("backend,bisect,error", [("eager", False, ValidationException),
                                                  ("aot_eager", True, BisectValidationException)],
                         ids=["eager-no-bisect", "aot_eager-bisect"])
def test_a_broken_guard_fails_translation_validation_as_in_stock(backend, bisect, error):
    with torch._dynamo.config.patch(assume_static_by_default=False, suppress_errors=False), \
            _flipped_guard_config(bisect):
        for compile_fn in (torch.compile, verishape.compile):
            torch._dynamo.reset()
            with pytest.raises(error, match="translation validation failed"):
                compile_fn(split_by, backend=backend)(torch.randn(20), (5, 10, 5))


@pytest.fixture
def validations(monkeypatch):
    """Per validation run: the env's class and the guard expressions it was asked to
    check (every target expression the env had registered so far)."""
    targets: dict[int, list] = {}
    runs: list[tuple[str, list[str]]] = []
    add, check = ShapeEnv._add_target_expr, ShapeEnv._check_translation_validate

    def spy_add(self, expr):
        targets.setdefault(id(self), []).append(expr)
        return add(self, expr)

    def spy_check(self):
        if self._translation_validation_enabled:
            runs.append((type(self).__name__, sorted(set(map(str, targets.get(id(self), []))))))
        return check(self)

    monkeypatch.setattr(ShapeEnv, "_add_target_expr", spy_add)
    monkeypatch.setattr(ShapeEnv, "_check_translation_validate", spy_check)
    return runs


def test_validation_runs_once_on_the_recorded_guards_not_the_minimized_list(validations):
    envs: list = []
    with fx_config.patch(translation_validation=True):
        torch.compile(pair, backend="eager", dynamic=True)(torch.randn(8), torch.randn(5))
        torch._dynamo.reset()
        verishape.compile(pair, backend=capturing(envs), dynamic=True)(torch.randn(8), torch.randn(5))
    assert [cls for cls, _ in validations] == ["ShapeEnv", "VeriShapeEnv"]
    (_, stock_targets), (_, verishape_targets) = validations
    assert verishape_targets == stock_targets
    # ... although the installed list was shorter: validation did not see it.
    (minimization,) = [m for m in envs[0].verishape_log.minimizations if m.applied]
    assert len(minimization.kept) < len(minimization.stock)


# ---------------------------------------------------------------- recorded-events replay

@pytest.mark.parametrize("fn,args,acted", [
    (pair, (torch.randn(8), torch.randn(5)), lambda log: any(m.applied for m in log.minimizations)),
    (ratio, (torch.randn(8), torch.randn(3)), lambda log: any(r.obligation.kind == "guard_avoided" for r in log.records)),
    (asserts, (torch.tensor([3, 2]),), lambda log: any(r.obligation.kind == "assert_discharged" for r in log.records)),
], ids=["minimizes", "decides", "discharges"])
def test_recorded_events_replay_compares_equal(fn, args, acted):
    from torch.fx.experimental.recording import replay_shape_env_events

    envs: list = []
    with torch._dynamo.config.patch(capture_scalar_outputs=True), \
            fx_config.patch(translation_validation=True, check_shape_env_recorded_events=True):
        out = verishape.compile(fn, backend=capturing(envs), dynamic=True)(*args)
        (env,) = envs
        replayed = replay_shape_env_events(env.events)
    assert torch.equal(out, fn(*args))
    assert isinstance(env, VeriShapeEnv) and env.check_recorded_events
    assert acted(env.verishape_log)  # verishape changed something the replay must reproduce
    # What the check compared against: a VeriShapeEnv, equal to the live one.
    assert type(replayed) is VeriShapeEnv
    env.check_equal(replayed)


# ---------------------------------------------------------------- the global swap

@pytest.fixture
def swapped_everywhere(monkeypatch):
    """VeriShapeEnv in place of ShapeEnv as a module global of every loaded torch module,
    the way a run of PyTorch's own tests with verishape would install it: every site
    that builds a ShapeEnv (Dynamo, export, replay, fake tensors) builds ours."""
    import sys

    from verishape.compiler import frames

    frames.install()  # Dynamo's site holds verishape's per-frame chooser: swapped too
    builders = (ShapeEnv, frames._shape_env_factory)
    swapped = [name for name, mod in list(sys.modules.items())
               if name.startswith("torch") and getattr(mod, "ShapeEnv", None) in builders]
    for name in swapped:
        monkeypatch.setattr(sys.modules[name], "ShapeEnv", VeriShapeEnv)
    assert "torch._dynamo.output_graph" in swapped
    return swapped


@pytest.mark.parametrize("fn,args,acted", [
    (pair, (torch.randn(8), torch.randn(5)), lambda log: any(m.applied for m in log.minimizations)),
    (ratio, (torch.randn(8), torch.randn(3)), lambda log: any(r.obligation.kind == "guard_avoided" for r in log.records)),
    (asserts, (torch.tensor([3, 2]),), lambda log: any(r.obligation.kind == "assert_discharged" for r in log.records)),
    (mixed, (torch.randn(10), torch.tensor(3)), lambda log: bool(log.records)),
], ids=["minimizes", "decides", "discharges", "issue-40-program"])
def test_torch_checks_pass_with_verishape_swapped_in_everywhere(swapped_everywhere, fn, args, acted):
    """Stock's own checks, switched on, run on the env Dynamo built (a VeriShapeEnv that
    changed a decision) against its replay, and pass: verishape's fields are not torch's
    state.  A check that fails raises out of the compile."""
    envs: list = []
    limit = {"translation_validation_timeout": 500} if fn is mixed else {}
    with torch._dynamo.config.patch(capture_scalar_outputs=True), \
            fx_config.patch(translation_validation=True, check_shape_env_recorded_events=True, **limit):
        out = torch.compile(fn, backend=capturing(envs, "eager"), dynamic=True, fullgraph=True)(*args)
    assert torch.equal(out, fn(*args))
    (env,) = envs
    assert type(env) is VeriShapeEnv and env.check_recorded_events
    assert acted(env.verishape_log)


def test_float_sizes_cost_a_frame_a_bounded_solver_budget(swapped_everywhere, monkeypatch):
    """PyTorch's ``test_unspec_float_precision`` (``interpolate`` with an unspecialized float
    scale factor) with VeriShapeEnv in every torch module: its questions over
    ``TruncToInt(zf * ToFloat(s))`` took 9 s against stock's 0.6 s, 11 solver calls of
    0.5 to 1.3 s that all ended unknown. Now they are asked under the float resource limit and
    the frame's budget (Note [A scope's solver budget]): at most two calls of a
    scope are stopped by the limit, the rest are stock's; the answer is eager's.  Those a
    sign or a zero of the scale breaks (``TruncToInt(zf * s) >= 0`` at ``zf = -1``) are
    refuted at such a point with no solver call (``solvers.refute``), so the limit's stops
    fall on questions no point breaks, and the ones that follow from the guards stock then
    installs are proved."""
    from torch._dynamo.testing import CompileCounter

    from verishape import solvers
    from verishape.core.premises import use_prover

    monkeypatch.setattr(torch._dynamo.config, "specialize_float", False)
    monkeypatch.setattr(torch._dynamo.config, "assume_static_by_default", False)
    envs = []
    init = VeriShapeEnv.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **kwargs)
        envs.append(self)

    monkeypatch.setattr(VeriShapeEnv, "__init__", keep)

    def fn(image, scale_factor):
        return torch.nn.functional.interpolate(image[None], scale_factor=scale_factor, mode="bilinear",
                                               recompute_scale_factor=True, align_corners=False)[0].shape

    x, scale = torch.rand([3, 427, 640]), 1.873536229133606
    prover = solvers.Prover(store=None)
    with use_prover(prover):
        got = torch.compile(fn, backend=CompileCounter())(x, scale)
    assert got == fn(x, scale)
    assert envs and all(e.verishape_budget.stops <= e.verishape_budget.stops_allowed for e in envs)
    assert any(e.verishape_budget.declined for e in envs)  # the budget, not the float limit alone, stopped it
    assert prover.stats.refuted_concretely >= 1 and prover.stats.proved >= 1, prover.stats
    assert prover.stats.solver_calls <= 12, prover.stats
