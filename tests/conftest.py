"""Shared test configuration.

Every test starts from the same torch global state: Dynamo's, Inductor's and the FX
shape configs are restored after each test, and Dynamo's caches are reset, so that no test
passes or fails because of one that ran before it on the same worker (a torch 2.11 test
that flipped ``assume_static_by_default`` broke two unrelated Triton-mask tests).

Hypothesis runs derandomized by default (CI and local alike), so a failure reproduces from
the same command; set VERISHAPE_HYPOTHESIS=explore for fresh random examples.

The proof store never lands in the user's cache folder: each session gets a fresh store in
a temporary directory (removed at exit), set in the environment so that the CLI tests'
subprocesses inherit it.  VERISHAPE_TEST_PROOF_STORE names a file to use (and keep)
instead, for example to count what a full run stores; "off" runs the suite without it.
"""

import atexit
import contextlib
import os
import shutil
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "explore",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("VERISHAPE_HYPOTHESIS", "ci"))


def _session_proof_store() -> str:
    chosen = os.environ.get("VERISHAPE_TEST_PROOF_STORE")
    if chosen:
        return chosen
    folder = tempfile.mkdtemp(prefix="verishape-test-proofs-")
    # Registered before proofs.store is imported, so it runs after the store's own exit
    # hook (atexit is last-in, first-out) has written the run's row.
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return os.path.join(folder, "proofs.sqlite")


os.environ["VERISHAPE_PROOF_STORE"] = _session_proof_store()


_CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch.fx.experimental._config",
                   "torch._functorch.config")


@contextlib.contextmanager
def restored_torch_state():
    """Snapshot torch's config modules, restore them on exit, then drop Dynamo's caches."""
    import importlib

    import torch._dynamo

    modules = [importlib.import_module(name) for name in _CONFIG_MODULES]
    saved = [(m, m.save_config()) for m in modules]
    try:
        yield
    finally:
        for module, snapshot in saved:
            module.load_config(snapshot)
        torch._dynamo.reset()


@pytest.fixture
def fresh_frames():
    """Dynamo reset, its counters cleared and verishape's record of compiled frames emptied,
    before and after: a test that counts compiles, reuses or frames counts only its own
    (``pytestmark = pytest.mark.usefixtures("fresh_frames")``)."""
    import torch
    from torch._dynamo.utils import counters

    from verishape.compiler import frames

    torch._dynamo.reset()
    counters.clear()
    with frames._envs_lock:
        frames._envs_by_code.clear()
    yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def _isolated_torch_state():
    """Every test that runs with torch imported runs inside :func:`restored_torch_state`;
    tests that never import torch pay nothing."""
    if "torch" not in sys.modules:
        yield
        return
    with restored_torch_state():
        yield


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` need a CUDA device: where torch sees none they are deselected
    (said once, in the header), so a CPU run reports no skips; ``-m gpu`` on a GPU machine
    runs only them."""
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu:
        return
    import torch

    if torch.cuda.is_available():
        return
    config.hook.pytest_deselected(items=gpu)
    items[:] = [item for item in items if item.get_closest_marker("gpu") is None]
    config._verishape_gpu_deselected = len(gpu)


def pytest_report_header(config):
    return "gpu tests: deselected where torch sees no CUDA device (run them on one with: ./dev.sh test -m gpu)"
