"""Run bundles and replays for the UI: a traced run's bundle (app/traces/bundle.py), and the run replayed without the
model (app/run/replay.py) under the studio's own rules."""

from __future__ import annotations

from typing import Any

from app.run.replay import ReplayError, ReplayOutcome, replay_bundle
from app.service.errors import UserError
from app.traces.bundle import BundleError
from app.traces.db import TraceStoreError
from app.workflow.problems import WorkflowError


def run_bundle(service: Any, run_id: str) -> dict[str, Any]:
    """The bundle of a traced run; a UserError saying why when it cannot be made."""
    store = service.trace_store
    if store is None:
        raise UserError("the trace database is not open, so there is no run to bundle")
    try:
        return store.export_bundle(run_id)  # type: ignore[no-any-return]
    except (BundleError, TraceStoreError) as exc:
        raise UserError(str(exc)) from None


def replay_run(service: Any, run_id: str) -> ReplayOutcome:
    """A traced run replayed from its bundle, with no model: every call answered from the recording (not traced)."""
    bundle = run_bundle(service, run_id)
    try:
        return replay_bundle(bundle, registry=service.registry, like=service.scheduler)
    except (ReplayError, WorkflowError) as exc:
        raise UserError(f"run {run_id} cannot be replayed: {exc}") from None
