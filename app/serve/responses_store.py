"""Stored responses of POST /v1/responses, in the trace database (table `api_responses`): a conversation continues
with `previous_response_id` after a restart, and only the API key that made a response reads or deletes it."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, insert, select
from starlette.requests import Request

from app.serve.access import api_key_of
from app.serve.config import ServeConfig
from app.service.studio import StudioService
from app.traces.tables import STORED_RESPONSES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    conversation: list[dict[str, str]]
    """Every message so far, this response's answer last (instructions are not kept: they apply to one request)."""


def owner_of(request: Request, config: ServeConfig) -> str:
    """Who may read what this request stores: a digest of its API key ("" on a server without keys)."""
    key = api_key_of(request) if config.api_keys else None
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] if key else ""


class ResponseStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def save(self, response: dict[str, Any], conversation: list[dict[str, str]], owner: str) -> None:
        metagen = response.get("metagen") or {}
        with self._engine.begin() as conn:
            conn.execute(insert(STORED_RESPONSES).values(
                id=response["id"], owner=owner, model=response["model"], run_id=metagen.get("run_id"),
                created_at=float(response["created_at"]), previous_response_id=response.get("previous_response_id"),
                conversation=json.dumps(conversation, ensure_ascii=False),
                response=json.dumps(response, ensure_ascii=False)))

    def get(self, response_id: str, owner: str) -> StoredResponse | None:
        table = STORED_RESPONSES
        with self._engine.connect() as conn:
            row = conn.execute(select(table.c.response, table.c.conversation).where(
                table.c.id == response_id, table.c.owner == owner)).first()
        if row is None:
            return None
        return StoredResponse(json.loads(row[0]), json.loads(row[1]))

    def delete(self, response_id: str, owner: str) -> bool:
        table = STORED_RESPONSES
        with self._engine.begin() as conn:
            result = conn.execute(delete(table).where(table.c.id == response_id, table.c.owner == owner))
        return bool(result.rowcount)


def response_store(service: StudioService) -> ResponseStore | None:
    """The store on the service's trace database (None when the database cannot be opened)."""
    traces = service.trace_store
    return ResponseStore(traces.engine) if traces is not None else None
