"""Stored responses of POST /v1/responses, in the trace database (table `api_responses`): a conversation continues
with `previous_response_id` after a restart, and only the API key that made a response reads or deletes it. Each
row keeps only its own turn (the messages this request added and its answer), linked to its parent, so a chain of
turns costs its length, not its square; a key's stored bytes are capped (its oldest turns go first) and turns older
than the retention are removed."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, func, insert, select
from starlette.requests import Request

from app.serve.access import key_digest
from app.serve.config import ServeConfig
from app.service.studio import StudioService
from app.traces.tables import STORED_RESPONSES

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES_PER_KEY = 200_000_000
"""Stored text one API key (or a server without keys) may keep; past it its oldest turns are removed."""
DEFAULT_RETENTION_DAYS = 30.0
"""Stored turns older than this are removed (`metagen serve --responses-retention DAYS`)."""
MAX_CHAIN = 10_000
"""Most turns a conversation is read back through (a longer one reads as ending there)."""


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    conversation: list[dict[str, str]]
    """Every message so far, this response's answer last (instructions are not kept: they apply to one request)."""


def owner_of(request: Request, config: ServeConfig) -> str:
    """Who may read what this request stores: a digest of its API key ("" on a server without keys)."""
    return key_digest(request, config)


class ResponseStore:
    def __init__(self, engine: Engine, *, max_bytes_per_owner: int = DEFAULT_MAX_BYTES_PER_KEY,
                 retention_days: float = DEFAULT_RETENTION_DAYS) -> None:
        self._engine = engine
        self.max_bytes_per_owner = max_bytes_per_owner
        self.retention_days = retention_days

    def save(self, response: dict[str, Any], conversation: list[dict[str, Any]], owner: str) -> None:
        """Keep `response`, whose whole conversation is `conversation`: only the messages after its parent's are
        written (`{"turn": [...], "length": N}`), in one transaction with the retention and the key's cap."""
        metagen = response.get("metagen") or {}
        parent = response.get("previous_response_id")
        table = STORED_RESPONSES
        with self._engine.begin() as conn:
            known = 0
            if parent:
                row = conn.execute(select(table.c.conversation).where(table.c.id == parent,
                                                                      table.c.owner == owner)).first()
                known = _length(json.loads(row[0])) if row is not None else 0
            turn = {"turn": conversation[known:], "length": len(conversation)}
            conn.execute(insert(table).values(
                id=response["id"], owner=owner, model=response["model"], run_id=metagen.get("run_id"),
                created_at=float(response["created_at"]), previous_response_id=parent,
                conversation=json.dumps(turn, ensure_ascii=False),
                response=json.dumps(response, ensure_ascii=False)))
            self._trim(conn, owner)

    def _trim(self, conn: Any, owner: str) -> None:
        table = STORED_RESPONSES
        cutoff = time.time() - self.retention_days * 86_400
        conn.execute(delete(table).where(table.c.created_at < cutoff))
        size = func.length(table.c.conversation) + func.length(table.c.response)
        total = conn.execute(select(func.coalesce(func.sum(size), 0)).where(table.c.owner == owner)).scalar_one()
        if total <= self.max_bytes_per_owner:
            return
        for rid, bytes_ in conn.execute(select(table.c.id, size).where(table.c.owner == owner)
                                        .order_by(table.c.created_at)).all():
            if total <= self.max_bytes_per_owner:
                break
            conn.execute(delete(table).where(table.c.id == rid))
            total -= int(bytes_ or 0)
        log.info("stored responses of one key over %d bytes: the oldest removed", self.max_bytes_per_owner)

    def get(self, response_id: str, owner: str) -> StoredResponse | None:
        """The response and its whole conversation, read back along its parents (None when it is not kept, or a
        parent it needs was removed: the conversation would be missing its start)."""
        table = STORED_RESPONSES
        with self._engine.connect() as conn:
            row = conn.execute(select(table.c.response, table.c.conversation, table.c.previous_response_id).where(
                table.c.id == response_id, table.c.owner == owner)).first()
            if row is None:
                return None
            response, turns = json.loads(row[0]), []
            stored, parent = json.loads(row[1]), row[2]
            for _ in range(MAX_CHAIN):
                if not isinstance(stored, dict):  # a row written before turns were stored apart: whole
                    turns.append(stored)
                    break
                turns.append(stored["turn"])
                if _length(stored) == len(stored["turn"]) or not parent:
                    break
                up = conn.execute(select(table.c.conversation, table.c.previous_response_id).where(
                    table.c.id == parent, table.c.owner == owner)).first()
                if up is None:
                    return None
                stored, parent = json.loads(up[0]), up[1]
        return StoredResponse(response, [m for turn in reversed(turns) for m in turn])

    def delete(self, response_id: str, owner: str) -> bool:
        table = STORED_RESPONSES
        with self._engine.begin() as conn:
            result = conn.execute(delete(table).where(table.c.id == response_id, table.c.owner == owner))
        return bool(result.rowcount)


def _length(stored: Any) -> int:
    """The conversation length a stored row stands for (a whole list before turns were stored apart)."""
    return int(stored["length"]) if isinstance(stored, dict) else len(stored)


def response_store(service: StudioService, config: ServeConfig | None = None) -> ResponseStore | None:
    """The store on the service's trace database with `config`'s cap and retention (None when the database cannot
    be opened)."""
    traces = service.trace_store
    if traces is None:
        return None
    if config is None:
        return ResponseStore(traces.engine)
    return ResponseStore(traces.engine, max_bytes_per_owner=config.responses_max_bytes,
                         retention_days=config.responses_retention_days)
