"""Runs as MCP resources: `metagen://runs/{run_id}` reads a run's summary (status, error, inputs, outputs,
totals, each node's status and tokens) from the trace store, so an agent can inspect what happened."""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from app.serve.access import Caller
from app.serve.run_owners import may_read, owners_of
from app.service.studio import StudioService
from app.traces.db import TraceStoreError
from app.viz.summary import node_stats, run_summary

RUN_URI = "metagen://runs/{run_id}"
RUN_URI_RE = re.compile(r"metagen://runs/([A-Za-z0-9_-]{1,64})")
MIME = "application/json"
LISTED_RUNS = 50
"""Recent runs listed for a caller from this machine (a caller under share-mode rules sees none listed; it
reads the runs whose ids it was given)."""
FLUSH_S = 5.0
RUN_FIELDS = ("id", "workflow", "status", "error", "seed", "started_at", "ended_at", "wall_s", "inputs", "outputs")

TEMPLATE = types.ResourceTemplate(
    uri_template=RUN_URI, name="run", title="A workflow run's trace",
    description="The summary of a run (its status, error, inputs, outputs, token and call totals, and each "
                "node's status and tokens) as JSON; a tool call's result names its run_id.",
    mime_type=MIME)


def run_resource(run: dict[str, Any]) -> types.Resource:
    return types.Resource(uri=RUN_URI.format(run_id=run["id"]), name=f"run {run['id']}", mime_type=MIME,
                          title=f"{run['workflow']} · {run['status']}")


def list_runs(service: StudioService, caller: Caller) -> list[types.Resource]:
    """Recent runs this caller may read (none listed under share-mode rules: it reads the runs it was given)."""
    store = service.trace_store
    if store is None or caller.share_rules:
        return []
    runs = store.list_runs(limit=LISTED_RUNS)
    owners = owners_of(service, [r["id"] for r in runs])
    return [run_resource(r) for r in runs if may_read(owners.get(r["id"]), caller.key, caller.share_rules)]


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The resource's JSON: the run's own fields, its totals and its nodes."""
    run = record["run"]
    return {"run": {k: run.get(k) for k in RUN_FIELDS}, "totals": run_summary(record), "nodes": node_stats(record)}


def read_run(service: StudioService, caller: Caller, uri: str) -> types.ReadResourceResult:
    """The run's summary; MCPError INVALID_PARAMS for a URI that names no run, or a run of another API key (the
    same answer: another key's run ids are not confirmed)."""
    store = service.trace_store
    match = RUN_URI_RE.fullmatch(uri)
    if match is None:
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}: runs are {RUN_URI}")
    if store is None:
        raise MCPError(types.INVALID_PARAMS, "this server keeps no traces (it has no trace database)")
    store.flush(FLUSH_S)  # the run's last events may still be on their way to the database
    run_id = match.group(1)
    try:
        record = store.get_run(run_id)
    except TraceStoreError:
        record = None
    if record is not None and not may_read(owners_of(service, [run_id]).get(run_id), caller.key, caller.share_rules):
        record = None
    if record is None or record["run"].get("id") != run_id:  # whole ids only: a prefix would list others' runs
        raise MCPError(types.INVALID_PARAMS, f"no run {run_id!r} in the trace store (give the run_id a tool call "
                       "returned)")
    text = json.dumps(summary(record), ensure_ascii=False, default=str)
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=MIME, text=text)])
