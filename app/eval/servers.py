"""The servers behind an evaluation's replicated remote models: how many items to keep in flight (the sum of their
concurrency) and how many requests each server served during the evaluation."""

from __future__ import annotations

import logging
from typing import Any

from app.eval.plan import EvalPlan
from app.workflow.model_specs import model_specs
from backends.base import ModelSpec

log = logging.getLogger(__name__)

DEFAULT_SERVER_CONCURRENCY = 8
"""A server's concurrency when neither its mapping nor the entry sets max_concurrency (OpenAIBackend's default)."""


def replica_specs(plan: EvalPlan) -> list[ModelSpec]:
    """The specs with several servers (`base_url` a list) that the plan's workflows use, each once."""
    found: dict[ModelSpec, None] = {}
    for wf in plan.workflows:
        try:
            specs = model_specs(wf.workflow)
        except ValueError:
            continue  # the run reports the bad entry
        found.update((s, None) for s in specs.values() if s.source == "openai" and s.replicas)
    return list(found)


def plan_concurrency(plan: EvalPlan) -> int | None:
    """Items in flight for an evaluation on replicated servers: the largest sum of a model's servers' concurrency;
    None when no model has several servers (the caller's default holds)."""
    sums = [sum(cap or spec.max_concurrency or DEFAULT_SERVER_CONCURRENCY for _, cap in spec.replicas)
            for spec in replica_specs(plan)]
    return max(sums) if sums else None


def served_snapshot(plan: EvalPlan, provider: Any) -> dict[str, int]:
    """Requests served so far by each server of the plan's replicated models (url -> count)."""
    out: dict[str, int] = {}
    for spec in replica_specs(plan):
        served = getattr(provider(spec), "served", None)
        if callable(served):
            for url, count in served().items():
                out[url] = out.get(url, 0) + int(count)
    return out


def served_since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Requests each server served between two snapshots (every server named, 0 included)."""
    return {url: after[url] - before.get(url, 0) for url in after}
