"""Shared test configuration.

Hypothesis runs derandomized by default (CI and local alike), so a failure reproduces from
the same command; set VERISHAPE_HYPOTHESIS=explore for fresh random examples.

The proof store never lands in the user's cache folder: each session gets a fresh store in
a temporary directory (removed at exit), set in the environment so that the CLI tests'
subprocesses inherit it.  VERISHAPE_TEST_PROOF_STORE names a file to use (and keep)
instead, for example to count what a full run stores; "off" runs the suite without it.
"""

import atexit
import os
import shutil
import tempfile

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
