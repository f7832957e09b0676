"""Shared test configuration.

Hypothesis runs derandomized by default (CI and local alike), so a failure reproduces from
the same command; set VERISHAPE_HYPOTHESIS=explore for fresh random examples.
"""

import os

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
