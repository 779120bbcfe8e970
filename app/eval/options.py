"""The run options of an evaluation plan that forms and callers set after it is made: shared samples, bootstrap
resamples, repeats and the comparisons' baseline, each checked with a hint."""

from __future__ import annotations

from typing import Any

from app.eval.baseline import plan_points, resolve_baseline
from app.eval.plan import EvalPlan, EvalSetupError

MAX_BOOTSTRAP = 10_000
MAX_REPEATS = 100


def _whole(request: dict[str, Any], key: str, default: int, low: int, high: int, what: str) -> int:
    value = request.get(key)
    try:
        number = default if value in (None, "") else int(value)
    except (TypeError, ValueError):
        raise EvalSetupError([f"{key}: {what} must be a whole number from {low} to {high}, got {value!r}"]) from None
    if not low <= number <= high or (isinstance(value, float) and value != number):
        raise EvalSetupError([f"{key}: {what} must be a whole number from {low} to {high}, got {value!r}"])
    return number


def apply_options(plan: EvalPlan, request: dict[str, Any]) -> EvalPlan:
    """Set share_samples, bootstrap, repeats and baseline on the plan from a request dict (missing: defaults)."""
    plan.share_samples = bool(request.get("share_samples"))
    plan.bootstrap = _whole(request, "bootstrap", 0, 0, MAX_BOOTSTRAP, "the number of bootstrap resamples")
    plan.repeats = _whole(request, "repeats", 1, 1, MAX_REPEATS, "the runs per item")
    baseline = str(request.get("baseline") or "").strip() or None
    try:
        resolve_baseline(baseline, plan_points(plan.workflows))  # the same names as the CLI's --baseline
    except ValueError as exc:
        raise EvalSetupError([f"baseline: {exc}"]) from None
    plan.baseline = baseline
    return plan
