"""Which API key started which run (table `run_owners`): recorded as /v1 and MCP runs are prepared, read when a run
is asked for as an MCP resource, so one key cannot read another's inputs and answers."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import insert, select

from app.service.studio import StudioService
from app.traces.tables import RUN_OWNERS

log = logging.getLogger(__name__)


def record_owner(service: StudioService, run_ids: Sequence[str], owner: str) -> None:
    """Note `owner` as the starter of these runs (nothing when the trace database cannot be opened)."""
    store = service.trace_store
    if store is None or not run_ids:
        return
    with store.engine.begin() as conn:
        conn.execute(insert(RUN_OWNERS), [{"run_id": rid, "owner": owner} for rid in run_ids])


def owners_of(service: StudioService, run_ids: Sequence[str]) -> dict[str, str]:
    """run id -> the key digest that started it, for the runs that have one."""
    store = service.trace_store
    if store is None or not run_ids:
        return {}
    with store.engine.connect() as conn:
        rows = conn.execute(select(RUN_OWNERS.c.run_id, RUN_OWNERS.c.owner)
                            .where(RUN_OWNERS.c.run_id.in_(list(run_ids)))).all()
    return {r[0]: r[1] for r in rows}


def may_read(owner: str | None, key: str, share_rules: bool) -> bool:
    """Whether a caller (its key digest, under share-mode rules or not) may read a run started by `owner` (None:
    not through the API: the studio's own run, for this machine's owner only)."""
    if owner is None:
        return not share_rules
    return owner == key
