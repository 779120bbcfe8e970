"""Reads runs back from the trace database as plain dicts (the record the CLI, UI and charts use)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from app.run.status import RUNNING
from app.traces.jsonutil import loads
from app.traces.tables import CALLS, CANDIDATES, NODE_EVENTS, NODES, PROMPTS, RUNS

PROVENANCE_FIELDS = ("writer_pid", "writer_host", "writer_identity", "heartbeat_at", "source", "imported_from")
"""Where a record came from, kept apart from what it says (an imported copy says the same)."""
RUN_JSON_FIELDS = ("inputs", "models", "model_ids", "budget", "outputs", "stats")
TOTAL_FIELDS = ("lm_calls", "prompt_tokens", "prompt_tokens_evaluated", "prompt_tokens_cached",
                "completion_tokens", "nodes_run", "nodes_cached")
LIST_FIELDS = ("id", "workflow", "workflow_hash", "status", "seed", "started_at", "ended_at", "wall_s",
               *TOTAL_FIELDS, "error", "source")


def _decode(row: dict[str, Any], json_fields: tuple[str, ...], defaults: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in json_fields:
        out[key] = loads(out.get(key), defaults.get(key, {}))
    return out


def list_runs(conn: Connection, workflow: str | None = None, status: str | None = None,
              limit: int = 100) -> list[dict[str, Any]]:
    """Newest first. Totals of runs still going are counted from their calls so far."""
    query = select(*(RUNS.c[f] for f in LIST_FIELDS)).order_by(RUNS.c.started_at.desc()).limit(limit)
    if workflow:
        query = query.where(RUNS.c.workflow == workflow)
    if status:
        query = query.where(RUNS.c.status == status)
    runs = [dict(m) for m in conn.execute(query).mappings()]
    for run in runs:
        if run["status"] == RUNNING:
            run.update(_live_totals(conn, run["id"]))
    return runs


def _live_totals(conn: Connection, run_id: str) -> dict[str, int]:
    row = conn.execute(select(
        func.count(), func.coalesce(func.sum(CALLS.c.prompt_tokens_evaluated), 0),
        func.coalesce(func.sum(CALLS.c.prompt_tokens_cached), 0),
        func.coalesce(func.sum(CALLS.c.completion_tokens), 0),
    ).where(CALLS.c.run_id == run_id)).one()
    return {"lm_calls": row[0], "prompt_tokens_evaluated": row[1], "prompt_tokens_cached": row[2],
            "completion_tokens": row[3]}


def run_exists(conn: Connection, run_id: str) -> bool:
    return conn.execute(select(RUNS.c.id).where(RUNS.c.id == run_id)).first() is not None


def find_run_ids(conn: Connection, prefix: str) -> list[str]:
    """Run ids starting with `prefix` (so a CLI user may type the first few characters)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return [r for (r,) in conn.execute(select(RUNS.c.id).where(RUNS.c.id.like(escaped + "%", escape="\\"))
                                       .limit(10))]


def load_run(conn: Connection, run_id: str, inline_prompts: bool = True) -> dict[str, Any] | None:
    """The full record of a run: run, provenance, nodes, lm_calls, events (None if there is no such run).
    With inline_prompts, each call carries its prompt text; else a top-level `prompts` map holds them."""
    row = conn.execute(select(RUNS).where(RUNS.c.id == run_id)).mappings().first()
    if row is None:
        return None
    run = _decode(dict(row), RUN_JSON_FIELDS, {"model_ids": []})
    provenance = {k: run.pop(k) for k in PROVENANCE_FIELDS}
    nodes = []
    for m in conn.execute(select(NODES).where(NODES.c.run_id == run_id).order_by(NODES.c.seq)).mappings():
        node = _decode(dict(m), ("params", "inputs", "outputs"), {"outputs": None})
        node.pop("run_id")
        node.pop("seq")
        node["cache_hit"] = bool(node["cache_hit"])
        nodes.append(node)
    prompts = {h: t for h, t in conn.execute(
        select(PROMPTS.c.hash, PROMPTS.c.text).where(PROMPTS.c.hash.in_(
            select(CALLS.c.prompt_hash).where(CALLS.c.run_id == run_id).distinct())))}
    calls = []
    for m in conn.execute(select(CALLS).where(CALLS.c.run_id == run_id).order_by(CALLS.c.id)).mappings():
        call = _decode(dict(m), ("tag", "logprobs"), {"tag": {}, "logprobs": None})
        del call["id"], call["run_id"]
        if inline_prompts:
            call["prompt"] = prompts.get(call["prompt_hash"], "")
        calls.append(call)
    events = [
        {"node_id": m["node_id"], "kind": m["kind"], "time": m["time"], "data": loads(m["data"], {})}
        for m in conn.execute(select(NODE_EVENTS).where(NODE_EVENTS.c.run_id == run_id)
                              .order_by(NODE_EVENTS.c.id)).mappings()
    ]
    if not run["model_ids"] and calls:  # a run that never ended: the engines seen so far
        run["model_ids"] = sorted({c["model"] for c in calls})
    record: dict[str, Any] = {"run": run, "provenance": provenance, "nodes": nodes, "lm_calls": calls,
                              "events": events}
    if not inline_prompts:
        record["prompts"] = prompts
    return record


def load_candidates(conn: Connection, run_id: str, node_id: str | None = None, offset: int = 0,
                    limit: int = 100) -> list[dict[str, Any]]:
    """A page of the candidates nodes produced (for tables of 1,000 candidates and more)."""
    query = select(CANDIDATES).where(CANDIDATES.c.run_id == run_id)
    if node_id is not None:
        query = query.where(CANDIDATES.c.node_id == node_id)
    query = query.order_by(CANDIDATES.c.node_id, CANDIDATES.c.port, CANDIDATES.c.idx).offset(offset).limit(limit)
    out = []
    for m in conn.execute(query).mappings():
        cand = _decode(dict(m), ("scores", "meta"), {})
        cand["winner"] = bool(cand["winner"])
        out.append(cand)
    return out
