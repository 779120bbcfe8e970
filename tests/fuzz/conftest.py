"""Hypothesis profiles of the fuzz tests: `ci` (the default: a fast, reproducible run) and `long` (benchmarks/fuzz.py).

Pick one with METAGEN_FUZZ_PROFILE=long. No example database is written (the checkout stays clean); `ci` is
derandomized, so every CI run tries the same examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                 HealthCheck.filter_too_much]

settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_QUIET_CHECKS, print_blob=True)
settings.register_profile("long", max_examples=10_000, deadline=None, derandomize=False, database=None,
                          suppress_health_check=_QUIET_CHECKS, print_blob=True)
settings.load_profile(os.environ.get("METAGEN_FUZZ_PROFILE", "ci"))
