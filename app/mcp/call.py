"""One tool call: the workflow run through the /v1 request checks (the caller's policy, caps, run queue), its
progress reported as nodes finish, and a cancel of the call (notifications/cancelled, or the HTTP stream closing)
relayed to the run."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import mcp_types as types

from app.mcp.progress import NODE_DONE, NodeProgress
from app.mcp.results import failure, success
from app.mcp.tools import ToolCatalog
from app.run.scheduler import RunResult
from app.serve.access import Caller, gate_for
from app.serve.catalog import FileModel, find_model
from app.serve.config import ServeConfig
from app.serve.errors import ApiError
from app.serve.jobs import Job
from app.serve.params import ApiRequest
from app.serve.workflow_request import PreparedRun, prepare
from app.serve.workflow_runs import answers
from app.service.studio import StudioService

log = logging.getLogger(__name__)

Report = Callable[[float, float, str], Awaitable[None]]
"""Sends one progress notification (progress, total, message); a no-op when the caller sent no progress token."""
CANCELLED_BY_CLIENT = "cancelled: the MCP client cancelled the tool call"
EVENT_WAIT_S = 5.0


def _run(job: Job, service: StudioService, prepared: PreparedRun) -> RunResult:
    """On the job's thread: the run, traced, its nodes' progress posted to the job."""
    observers: list[Any] = [service.trace_store] if service.trace_store is not None else []
    observers.append(NodeProgress(job, len(prepared.wf.nodes)))
    return service.scheduler.run(prepared.wf, prepared.values, seed=prepared.seeds[0], budget=prepared.budget,
                                 cancel=job.token(), observers=observers, run_id=prepared.run_ids[0],
                                 hide_cache_hits=prepared.hide_cache_hits, children=prepared.children)


def _arguments(catalog: ToolCatalog, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The call's arguments with each declared default filled in (the tool's input schema lists them)."""
    entry = catalog.get(name)
    defaults = {k: s.default for k, s in entry.workflow.inputs.items() if s.default is not None} if entry else {}
    return {**defaults, **(arguments or {})}


def _prepare(service: StudioService, caller: Caller, catalog: ToolCatalog, name: str,
             arguments: dict[str, Any] | None, auto: str | None = None) -> PreparedRun:
    target = find_model(service, caller.policy, name, auto)
    if isinstance(target, FileModel):
        raise ApiError(404, f"{name!r} is a model file, not a workflow: tools/list shows the workflow tools",
                       param="name", code="model_not_found")
    return prepare(service, caller, target, ApiRequest(model=name, inputs=_arguments(catalog, name, arguments)))


async def _wait(job: Job, report: Report) -> RunResult:
    while True:
        event = await job.next_event(EVENT_WAIT_S)
        if event is None:
            continue
        if event[0] == NODE_DONE:
            await report(event[1], event[2], event[3])
        elif event[0] == "done":
            return event[1]  # type: ignore[no-any-return]
        elif event[0] == "error":
            raise event[1]


async def call_workflow(service: StudioService, config: ServeConfig, caller: Caller, catalog: ToolCatalog,
                        name: str, arguments: dict[str, Any] | None, report: Report) -> types.CallToolResult:
    """Run the workflow `name` with `arguments`; a refused or failed run is a tool error (isError)."""
    try:
        prepared = _prepare(service, caller, catalog, name, arguments, config.auto)
    except Exception as exc:
        return failure(exc)
    run_id = prepared.run_ids[0]
    job = Job(gate_for(caller, config), f"mcp-{run_id}")
    job.start(partial(_run, service=service, prepared=prepared))
    ended = False
    try:
        await job.admitted()
        await report(0, len(prepared.wf.nodes), f"run {run_id} started: read metagen://runs/{run_id}")
        result = await _wait(job, report)
        ended = True
        answers(job, prepared, [result])
        return success(prepared, result)
    except Exception as exc:  # a refused, failed or stopped run; the job has ended
        ended = True
        return failure(exc)
    finally:
        if not ended and not job.finished:  # the call was cancelled (or its stream closed) while the run went on
            log.info("MCP call of %s cancelled: stopping run %s", name, run_id)
            job.cancel(CANCELLED_BY_CLIENT)
