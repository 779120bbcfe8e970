"""The run panel's view of a run this server does not run: its final state from the trace store (a page open
across a studio restart asks for a run the new server never started)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

ENDED_WITH_THE_STUDIO = "ended when the studio stopped"
"""Why a run that was going when its studio process died is `lost` (the trace keeps what it finished)."""
FINAL = {"succeeded", "failed", "cancelled", "budget_exceeded", "invalid"}


def ended_run_snapshot(store: Any, run_id: str) -> dict[str, Any] | None:
    """A finished snapshot of a stored run that no process of this studio runs (None: not stored, or its writer
    still runs elsewhere): its own final status, or `lost` for a run cut off by its studio's end."""
    if store is None or not run_id:
        return None
    try:
        record = store.get_run(run_id)
    except Exception as exc:  # an unknown id, or an unreadable store: the caller's usual "no live run" error
        log.info("no stored run %s: %s", run_id, exc)
        return None
    run = record.get("run") or {}
    status = str(run.get("status") or "")
    if status == "interrupted":
        status, error = "lost", f"{ENDED_WITH_THE_STUDIO} (its trace keeps what it finished; see the Traces tab)"
    elif status in FINAL:
        error = run.get("error")
    else:
        return None
    nodes = record.get("nodes") or []
    done = sum(1 for n in nodes if n.get("status") in ("succeeded", "cached"))
    return {"run_id": run.get("id") or run_id, "status": status, "finished": True, "progress": 1.0,
            "done": done, "total": len(nodes), "nodes": {}, "error": error, "elapsed_s": run.get("wall_s"),
            "output_views": [], "has_outputs": [], "stored": True}
