"""Run statuses, defined once. The values are stored in traces and shown in the UI: never change them.

A run the scheduler finishes ends in one of END_STATUSES. The trace store and the live-run view add
states of their own around those (listed below) so that every place compares against these names.
"""

from __future__ import annotations

SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
BUDGET_EXCEEDED = "budget_exceeded"
END_STATUSES = (SUCCEEDED, FAILED, CANCELLED, BUDGET_EXCEEDED)
"""How Scheduler.run ends (RunResult.status, the run_end event's `status`)."""

RUNNING = "running"
"""Trace store: a run (or node) started and not ended yet."""
INTERRUPTED = "interrupted"
"""Trace store: a run whose process died while it was running."""
QUEUED = "queued"
"""Live-run view: accepted, waiting for the scheduler."""
INVALID = "invalid"
"""Live-run view: refused before any model was touched (the workflow or its inputs are invalid)."""

UNGRADED = "ungraded"
"""Evaluation item: its run succeeded but the grader itself could not run (a sandbox that did not start, a math
worker that died, a metric that raised): no verdict, counted apart from the graded items."""

# Per-node statuses (a node in the trace store and the views, never a whole run). A node also uses RUNNING,
# SUCCEEDED, FAILED, CANCELLED and INTERRUPTED above.
NODE_CACHED = "cached"
"""A node whose outputs came from the cache (it did not run)."""
NODE_SKIPPED = "skipped"
"""A node that never ran (an input it needed failed, or the run stopped first)."""

BUDGET_STOP = "budget exceeded"
"""How the cancel reason of a run stopped by its budget starts."""


def budget_stop_reason(why: str) -> str:
    """The cancel reason for a budget that ran out, e.g. "budget exceeded: max_lm_calls=8 ..."."""
    return f"{BUDGET_STOP}: {why}"


def is_budget_stop(reason: str | None) -> bool:
    """Whether a cancel reason says that a budget ran out (rather than a user or a failure)."""
    return reason is not None and reason.startswith(BUDGET_STOP)


def stop_status(reason: str | None) -> str:
    """The end status of a run stopped early for `reason`: BUDGET_EXCEEDED or CANCELLED."""
    return BUDGET_EXCEEDED if is_budget_stop(reason) else CANCELLED
