"""Export a run as one self-contained JSON document, and import such a document into a database.

The document is the record of `TraceStore.get_run` plus a header, with prompt texts stored once:
    {"format": "metagen-trace", "format_version": 1, "schema_version", "exported_at",
     "run": {id, workflow, workflow_yaml, workflow_hash, inputs, seed, models, model_ids, budget, status,
             error, outputs, stats, started_at, ended_at, wall_s, lm_calls, prompt_tokens, ...},
     "provenance": {writer_pid, writer_host, writer_identity, heartbeat_at, source, imported_from},
     "nodes": [{node_id, kind, status, cache_hit, params, inputs (preview), outputs, model, seed, signature,
                started_at, ended_at, duration_s, error, cause}],
     "lm_calls": [{call_id, node_id, purpose, model, sample_index, n, parent, tag, prompt_hash, completion,
                   prompt_tokens, prompt_tokens_evaluated, prompt_tokens_cached, completion_tokens,
                   scored_tokens, logprob, logprobs, seed, finish_reason, start, end, prefill_s, decode_s}],
     "prompts": {prompt_hash: text},
     "events": [{node_id, kind, time, data}],
     "requests": [{node, method, model, request, result[, cached]}]}
`requests` are the model calls as data (table lm_requests, backends/replay/calls.py) that run bundles are made of;
an export without them (an older one) imports as a run that cannot be bundled.
Import also accepts calls that carry their "prompt" inline (a get_run record with the header added).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from app.run.status import INTERRUPTED, RUNNING
from app.traces.db import TraceStoreError
from app.traces.jsonutil import dumps
from app.traces.records import RUN_JSON_FIELDS, TOTAL_FIELDS, load_run, run_exists
from app.traces.tables import (
    CALLS,
    CANDIDATES,
    LM_REQUESTS,
    NODE_EVENTS,
    NODES,
    PROMPTS,
    RUNS,
    SCHEMA_VERSION,
    LmCallRow,
    NodeRunRow,
    RunRow,
    TraceModel,
)
from app.traces.writer import candidate_rows, pack_entry, prompt_hash, unpack_entry

EXPORT_FORMAT = "metagen-trace"
EXPORT_VERSION = 1


def export_record(conn: Connection, run_id: str) -> dict[str, Any] | None:
    """The run as an export document: the record with prompts stored once in a `prompts` map."""
    record = load_run(conn, run_id, inline_prompts=False)
    if record is None:
        return None
    requests = [unpack_entry(data) for (data,) in conn.execute(
        select(LM_REQUESTS.c.data).where(LM_REQUESTS.c.run_id == run_id).order_by(LM_REQUESTS.c.id))]
    return {"format": EXPORT_FORMAT, "format_version": EXPORT_VERSION, "schema_version": SCHEMA_VERSION,
            "exported_at": time.time(), **record, "requests": requests}


def _check_document(data: Any) -> None:
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise TraceStoreError(
            "this is not a Metagen trace export (expected a JSON object with \"format\": \"metagen-trace\"); "
            "create one with `metagen traces export RUN_ID > run.json`")
    version = data.get("format_version")
    if not isinstance(version, int) or version > EXPORT_VERSION:
        raise TraceStoreError(f"this trace export has format_version {version!r}; this Metagen Studio reads "
                              f"up to {EXPORT_VERSION}: upgrade it to import this file")
    for key, kind in (("run", dict), ("nodes", list), ("lm_calls", list), ("events", list)):
        if not isinstance(data.get(key), kind):
            raise TraceStoreError(f"this trace export is damaged: {key!r} is missing or not a "
                                  f"{'list' if kind is list else 'JSON object'}")
    if not isinstance(data["run"].get("id"), str) or not data["run"]["id"]:
        raise TraceStoreError("this trace export is damaged: the run has no id")


def _free_id(conn: Connection, wanted: str) -> str:
    if not run_exists(conn, wanted):
        return wanted
    k = 1
    while run_exists(conn, f"{wanted}-imported{k if k > 1 else ''}"):
        k += 1
    return f"{wanted}-imported{k if k > 1 else ''}"


def import_document(conn: Connection, data: Any) -> str:
    """Insert an exported run; returns its id here (the original id, or a new one if that is taken)."""
    _check_document(data)
    try:
        return _insert(conn, data)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise TraceStoreError(f"this trace export is damaged: {type(exc).__name__}: {exc}") from exc
    except SQLAlchemyError as exc:  # a value the column cannot take, two nodes with one id...: the caller rolls back
        cause = getattr(exc, "orig", None) or exc  # the driver's own error, without the SQL and its parameters
        raise TraceStoreError(f"this trace export is damaged: {type(cause).__name__}: {cause}") from exc


def _complete(model: type[TraceModel], source: dict[str, Any]) -> dict[str, Any]:
    """Every column of the table: the value given in `source`, else the column's default (bulk inserts
    need rows of one shape)."""
    out = {}
    for name, info in model.model_fields.items():
        if name == "id" and model is LmCallRow:
            continue
        out[name] = source[name] if name in source else info.get_default(call_default_factory=True)
    return out


def _insert(conn: Connection, data: dict[str, Any]) -> str:
    run = dict(data["run"])
    original = run["id"]
    run_id = _free_id(conn, original)
    row = _complete(RunRow, run)
    for key in RUN_JSON_FIELDS:
        if key in run:
            row[key] = dumps(run[key])
    for key in TOTAL_FIELDS:
        row[key] = int(run.get(key) or 0)
    row.update(id=run_id, source="imported", imported_from=original, writer_pid=None, writer_host=None,
               writer_identity=None, heartbeat_at=None)
    if row.get("status") == RUNNING:
        row["status"] = INTERRUPTED
    conn.execute(RUNS.insert(), [row])

    nodes = []
    candidates = []
    for seq, node in enumerate(data["nodes"], start=1):
        n = _complete(NodeRunRow, node)
        n.update(run_id=run_id, seq=seq, params=dumps(node.get("params", {})), inputs=dumps(node.get("inputs", {})),
                 outputs=dumps(node["outputs"]) if node.get("outputs") is not None else None,
                 cache_hit=bool(node.get("cache_hit")))
        nodes.append(n)
        candidates.extend(candidate_rows(run_id, str(node["node_id"]), node.get("outputs") or {}))
    if nodes:
        conn.execute(NODES.insert(), nodes)
    if candidates:
        conn.execute(CANDIDATES.insert(), candidates)

    prompts: dict[str, str] = {str(k): str(v) for k, v in (data.get("prompts") or {}).items()}
    calls = []
    for call in data["lm_calls"]:
        c = _complete(LmCallRow, call)
        if "prompt" in call:
            digest = prompt_hash(str(call["prompt"]))
            prompts.setdefault(digest, str(call["prompt"]))
            c["prompt_hash"] = digest
        c.update(run_id=run_id, tag=dumps(call.get("tag") or {}),
                 logprobs=dumps(call["logprobs"]) if call.get("logprobs") is not None else None)
        calls.append(c)
    if prompts:
        conn.execute(sqlite_insert(PROMPTS).on_conflict_do_nothing(),
                     [{"hash": h, "text": t} for h, t in prompts.items()])
    if calls:
        conn.execute(CALLS.insert(), calls)
    events = [{"run_id": run_id, "node_id": e.get("node_id"), "kind": str(e.get("kind", "")),
               "time": float(e.get("time") or 0.0), "data": dumps(e.get("data") or {})} for e in data["events"]]
    if events:
        conn.execute(NODE_EVENTS.insert(), events)
    requests = [{"run_id": run_id, "node_id": r.get("node"), "method": str(r["method"]), "data": pack_entry(r)}
                for r in data.get("requests") or [] if isinstance(r, dict)]
    if requests:
        conn.execute(LM_REQUESTS.insert(), requests)
    return run_id
