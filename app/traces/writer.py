"""Turns observer events into trace rows, one transaction per batch of events."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import zlib
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from app.run import events as ev
from app.run.events import Event
from app.run.status import CANCELLED, FAILED, INTERRUPTED, NODE_CACHED, NODE_SKIPPED, RUNNING, SUCCEEDED
from app.traces.jsonutil import dumps, preview
from app.traces.recovery import host_name, process_identity
from app.traces.tables import CALLS, CANDIDATES, LM_REQUESTS, NODE_EVENTS, NODES, PROMPTS, RUNS

log = logging.getLogger(__name__)

PERSISTED = frozenset({ev.RUN_START, ev.RUN_END, ev.NODE_START, ev.NODE_END, ev.NODE_CACHED, ev.NODE_ERROR,
                       ev.NODE_SKIPPED, ev.LM_CALL, ev.NODE_EVENT, ev.LM_REQUEST})
"""TOKEN (streaming pieces) and PROGRESS are transient: the LM_CALL and NODE_END events hold their results."""

CANCEL_CAUSES = frozenset({"CancelledError", "BudgetExceededError"})


LM_CALL_FIELDS = ("call_id", "purpose", "model", "sample_index", "n", "parent", "tag", "prompt", "completion",
                  "prompt_tokens", "prompt_tokens_evaluated", "prompt_tokens_cached", "completion_tokens",
                  "scored_tokens", "logprob", "logprobs", "seed", "finish_reason", "start", "end", "prefill_s",
                  "decode_s")


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def lm_call_row(run_id: str, node_id: str | None, data: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    """The lm_calls row of an LM_CALL event, plus its prompt hash and text."""
    prompt = str(data.get("prompt") or "")
    digest = prompt_hash(prompt)
    tag = dict(data.get("tag") or {})
    extra = {k: v for k, v in data.items() if k not in LM_CALL_FIELDS}
    if extra:
        tag["extra"] = extra
    logprobs = data.get("logprobs")
    row = {
        "run_id": run_id, "node_id": node_id or "", "call_id": str(data.get("call_id", "")),
        "purpose": str(data.get("purpose", "")), "model": str(data.get("model", "")),
        "sample_index": int(data.get("sample_index") or 0), "n": int(data.get("n") or 1),
        "parent": data.get("parent"), "tag": dumps(tag), "prompt_hash": digest,
        "completion": str(data.get("completion") or ""),
        "prompt_tokens": int(data.get("prompt_tokens") or 0),
        "prompt_tokens_evaluated": int(data.get("prompt_tokens_evaluated") or 0),
        "prompt_tokens_cached": int(data.get("prompt_tokens_cached") or 0),
        "completion_tokens": int(data.get("completion_tokens") or 0),
        "scored_tokens": data.get("scored_tokens"), "logprob": data.get("logprob"),
        "logprobs": dumps(logprobs) if logprobs is not None else None,
        "seed": data.get("seed"), "finish_reason": str(data.get("finish_reason") or ""),
        "start": float(data.get("start") or 0.0), "end": float(data.get("end") or 0.0),
        "prefill_s": float(data.get("prefill_s") or 0.0), "decode_s": float(data.get("decode_s") or 0.0),
    }
    return row, digest, prompt


def pack_entry(entry: dict[str, Any]) -> bytes:
    """A recorded model call (LM_REQUEST's data) as stored: compact JSON, zlib level 1 (cheap, a third the size)."""
    return zlib.compress(json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)
                         .encode("utf-8", "surrogatepass"), 1)


def unpack_entry(data: bytes) -> dict[str, Any]:
    return json.loads(zlib.decompress(data).decode("utf-8", "surrogatepass"))  # type: ignore[no-any-return]


def candidate_rows(run_id: str, node_id: str, outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per candidate of every candidate set among a node's outputs."""
    rows = []
    for port, value in (outputs or {}).items():
        if not (isinstance(value, dict) and value.get("__type__") == "candidates"):
            continue
        winner = value.get("winner")
        for i, cand in enumerate(value.get("candidates") or []):
            rows.append({
                "run_id": run_id, "node_id": node_id, "port": port, "idx": i,
                "text": str(cand.get("text", "")), "answer": cand.get("answer"), "score": cand.get("score"),
                "scores": dumps(cand.get("scores") or {}), "cluster": cand.get("cluster"),
                "winner": winner == i, "seed": cand.get("seed"), "source": str(cand.get("source", "")),
                "finish_reason": str(cand.get("finish_reason", "")),
                "completion_tokens": int(cand.get("completion_tokens") or 0),
                "meta": dumps(cand.get("meta") or {}),
            })
    return rows


class EventWriter:
    """Writes batches of events; used from a single writer thread."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._seq: dict[str, int] = {}
        self._pid = os.getpid()
        self._host = host_name()
        self._identity = process_identity(self._pid)

    def write(self, events: list[Event]) -> None:
        """Write the batch in one transaction; if that fails, event by event so one bad event loses
        nothing else."""
        events = [e for e in events if e.type in PERSISTED]
        if not events:
            return
        try:
            with self._engine.begin() as conn:
                self._apply(conn, events)
        except Exception:
            if len(events) == 1:
                log.exception("could not store %s event of run %s", events[0].type, events[0].run_id)
                return
            for one in events:
                self.write([one])

    def heartbeat(self, run_ids: Iterable[str], now: float) -> None:
        ids = list(run_ids)
        if not ids:
            return
        try:
            with self._engine.begin() as conn:
                conn.execute(update(RUNS).where(RUNS.c.id.in_(ids), RUNS.c.status == RUNNING)
                             .values(heartbeat_at=now))
        except Exception:
            log.exception("could not record the heartbeat of runs %s", ids)

    # ------------------------------------------------------------------ internals

    def _next_seq(self, run_id: str) -> int:
        self._seq[run_id] = self._seq.get(run_id, 0) + 1
        return self._seq[run_id]

    def _apply(self, conn: Connection, events: list[Event]) -> None:
        prompts: dict[str, str] = {}
        calls: list[dict[str, Any]] = []
        notes: list[dict[str, Any]] = []
        requests: list[dict[str, Any]] = []

        def flush() -> None:
            if requests:
                conn.execute(LM_REQUESTS.insert(), requests)
                requests.clear()
            if prompts:
                conn.execute(sqlite_insert(PROMPTS).on_conflict_do_nothing(),
                             [{"hash": h, "text": t} for h, t in prompts.items()])
                prompts.clear()
            if calls:
                conn.execute(CALLS.insert(), calls)
                calls.clear()
            if notes:
                conn.execute(NODE_EVENTS.insert(), notes)
                notes.clear()

        for event in events:
            data = event.data or {}
            if event.type == ev.LM_CALL:
                row, digest, text = lm_call_row(event.run_id, event.node_id, data)
                prompts.setdefault(digest, text)
                calls.append(row)
            elif event.type == ev.LM_REQUEST:
                requests.append({"run_id": event.run_id, "node_id": event.node_id,
                                 "method": str(data.get("method", "")), "data": pack_entry(data)})
            elif event.type == ev.NODE_EVENT:
                payload = {k: v for k, v in data.items() if k != "kind"}
                notes.append({"run_id": event.run_id, "node_id": event.node_id, "kind": str(data.get("kind", "")),
                              "time": event.time, "data": dumps(payload)})
            elif event.type == ev.RUN_START:
                self._run_start(conn, event)
            elif event.type == ev.RUN_END:
                flush()
                self._run_end(conn, event)
            else:
                self._node_event(conn, event)
        flush()

    def _run_start(self, conn: Connection, event: Event) -> None:
        d = event.data
        values = {
            "workflow": str(d.get("workflow", "")), "workflow_yaml": str(d.get("workflow_yaml", "")),
            "workflow_hash": str(d.get("workflow_hash", "")), "inputs": dumps(d.get("inputs", {})),
            "seed": int(d.get("seed") or 0), "models": dumps(d.get("models", {})),
            "budget": dumps(d.get("budget", {})), "status": RUNNING, "started_at": event.time,
            "heartbeat_at": event.time, "writer_pid": self._pid, "writer_host": self._host,
            "writer_identity": self._identity, "source": str(d.get("source") or "live"),
            "imported_from": d.get("imported_from"),
        }
        conn.execute(sqlite_insert(RUNS).values(id=event.run_id, **values)
                     .on_conflict_do_update(index_elements=["id"], set_=values))

    def _run_end(self, conn: Connection, event: Event) -> None:
        d = event.data
        stats = d.get("stats") or {}
        models = [m for (m,) in conn.execute(
            select(CALLS.c.model).where(CALLS.c.run_id == event.run_id).distinct().order_by(CALLS.c.model))]
        values: dict[str, Any] = {
            "status": str(d.get("status", "")), "error": d.get("error"), "outputs": dumps(d.get("outputs", {})),
            "stats": dumps(stats), "ended_at": event.time, "heartbeat_at": event.time,
            "wall_s": stats.get("wall_s"), "model_ids": dumps(models),
        }
        for key in ("lm_calls", "prompt_tokens", "prompt_tokens_evaluated", "prompt_tokens_cached",
                    "completion_tokens", "nodes_run", "nodes_cached"):
            values[key] = int(stats.get(key) or 0)
        conn.execute(update(RUNS).where(RUNS.c.id == event.run_id).values(**values))
        # a node still marked running when its run ended was stopped with the run
        status = CANCELLED if values["status"] != SUCCEEDED else INTERRUPTED
        conn.execute(update(NODES).where(NODES.c.run_id == event.run_id, NODES.c.status == RUNNING)
                     .values(status=status, ended_at=event.time))

    def _upsert_node(self, conn: Connection, event: Event, values: dict[str, Any],
                     update_only: dict[str, Any] | None = None) -> None:
        """Insert the node run or update the columns in `values` (plus SQL expressions in `update_only`
        that refer to the existing row)."""
        stmt = sqlite_insert(NODES).values(run_id=event.run_id, node_id=event.node_id,
                                           seq=self._next_seq(event.run_id), **values)
        conn.execute(stmt.on_conflict_do_update(index_elements=["run_id", "node_id"],
                                                set_={**values, **(update_only or {})}))

    def _node_event(self, conn: Connection, event: Event) -> None:
        if event.node_id is None:
            return
        d = event.data
        kind = str(d.get("kind", ""))
        if event.type == ev.NODE_START:
            self._upsert_node(conn, event, {
                "kind": kind, "status": RUNNING, "params": dumps(d.get("params", {})),
                "inputs": dumps(preview(d.get("inputs", {}))), "model": d.get("model"), "seed": d.get("seed"),
                "signature": d.get("signature"), "started_at": event.time})
        elif event.type in (ev.NODE_END, ev.NODE_CACHED):
            cached = event.type == ev.NODE_CACHED
            outputs = d.get("outputs") or {}
            values: dict[str, Any] = {"kind": kind, "status": NODE_CACHED if cached else SUCCEEDED,
                                      "cache_hit": cached, "outputs": dumps(outputs),
                                      "signature": d.get("signature"), "ended_at": event.time}
            if cached:
                values.update(started_at=event.time, duration_s=0.0)
                if "params" in d:  # a cached node never starts, so its params come with this event
                    values["params"] = dumps(d["params"])
            else:
                values["duration_s"] = d.get("duration_s")
            self._upsert_node(conn, event, values)
            conn.execute(delete(CANDIDATES).where(CANDIDATES.c.run_id == event.run_id,
                                                  CANDIDATES.c.node_id == event.node_id))
            rows = candidate_rows(event.run_id, event.node_id, outputs)
            if rows:
                conn.execute(CANDIDATES.insert(), rows)
        elif event.type == ev.NODE_ERROR:
            cause = str(d.get("cause", ""))
            self._upsert_node(conn, event, {
                "kind": kind, "status": CANCELLED if cause in CANCEL_CAUSES else FAILED,
                "error": d.get("error"), "cause": cause, "ended_at": event.time},
                update_only={"duration_s": event.time - NODES.c.started_at})
        elif event.type == ev.NODE_SKIPPED:
            self._upsert_node(conn, event, {"kind": kind, "status": NODE_SKIPPED, "error": d.get("reason")})
