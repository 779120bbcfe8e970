"""Fixtures shared by the evaluation tests."""

from tests.eval.hub_cache import hub_cache  # noqa: F401  (a pre-filled, offline datasets cache)
