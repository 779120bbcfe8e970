"""A workflow request's runs on the worker thread (n runs with their own seeds, traced, batched by the engine)
and what their events and results become: streamed answer pieces, progress notes, the assistant messages."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app.run import events as ev
from app.run.events import Event
from app.run.scheduler import RunResult
from app.run.status import BUDGET_EXCEEDED, CANCELLED, FAILED
from app.serve.errors import ApiError
from app.serve.jobs import ClientGoneError, Job, run_failed
from app.serve.workflow_request import Graded, PreparedRun
from app.service.studio import StudioService
from backends.base import TokenCounts
from nodes.base import CandidateSet, format_value

PROGRESS_EVERY_S = 1.0
SIMPLE = (str, int, float, bool)


class ChoiceObserver:
    """Posts one run's events to its job: the graded node's tokens and final text, progress of other nodes."""

    def __init__(self, job: Job, index: int, graded: Graded) -> None:
        self.job = job
        self.index = index
        self.graded = graded
        self.tokens = 0
        self.last_note = 0.0

    def on_event(self, event: Event) -> None:
        node, graded = event.node_id, self.graded
        if node is None:
            return
        if event.type == ev.TOKEN:
            if node == graded.node_id and graded.streams_tokens:
                if event.data.get("sample", 0) == 0:
                    self.job.post("token", self.index, str(event.data.get("text", "")))
                return
            self.tokens += 1
            if time.monotonic() - self.last_note >= PROGRESS_EVERY_S:
                self.last_note = time.monotonic()
                self.job.post("progress", f"choice={self.index} node={node} tokens={self.tokens}")
            return
        if node == graded.node_id and event.type in (ev.NODE_END, ev.NODE_CACHED):
            value = (event.data.get("outputs") or {}).get(graded.port)
            if isinstance(value, str):
                self.job.post("text", self.index, value)
        if event.type in (ev.NODE_START, ev.NODE_END, ev.NODE_CACHED):
            state = {ev.NODE_START: "started", ev.NODE_END: "done", ev.NODE_CACHED: "cached"}[event.type]
            self.job.post("progress", f"choice={self.index} node={node} {state}")


def run_choices(job: Job, service: StudioService, prepared: PreparedRun, stream: bool) -> list[RunResult]:
    """Runs on the job's thread: the n runs at once (so the engine batches their requests), each traced."""
    store = service.trace_store

    def one(i: int) -> RunResult:
        observers: list[Any] = [store] if store is not None else []
        if stream:
            observers.append(ChoiceObserver(job, i, prepared.graded))
        return service.scheduler.run(prepared.wf, prepared.values, seed=prepared.seeds[i], budget=prepared.budget,
                                     cancel=job.token(), observers=observers, run_id=prepared.run_ids[i],
                                     hide_cache_hits=prepared.hide_cache_hits, children=prepared.children)

    if len(prepared.seeds) == 1:
        return [one(0)]
    with ThreadPoolExecutor(max_workers=len(prepared.seeds), thread_name_prefix=job.name) as pool:
        return list(pool.map(one, range(len(prepared.seeds))))


def graded_text(value: Any) -> str:
    """The assistant message of a graded output value (whitespace stripped, as generators strip theirs)."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, CandidateSet) and value.winner is not None and 0 <= value.winner < len(value.candidates):
        return value.candidates[value.winner].text.strip()
    return format_value(value).strip()


def answers(job: Job, prepared: PreparedRun, results: list[RunResult]) -> list[str]:
    """The assistant message of each run; ApiError for a run that did not succeed (500 with the node and cause
    for a failed one)."""
    for result in results:
        if result.status == FAILED:
            f = result.failure
            if f is None:
                raise run_failed(f"run {result.run_id} failed: {result.error}", run_id=result.run_id)
            raise run_failed(f"run {result.run_id} failed at node {f.node_id!r} ({f.kind}): {f.cause}: {f.message}",
                             run_id=result.run_id, node=f.node_id, node_kind=f.kind, cause=f.cause)
        if result.status == BUDGET_EXCEEDED:
            raise ApiError(400, f"run {result.run_id} stopped: {result.error} (this server's per-run caps)",
                           code="budget_exceeded", extra={"run_id": result.run_id})
        if result.status == CANCELLED:
            if job.cancelled:
                raise ClientGoneError()
            raise ApiError(503, f"run {result.run_id} was cancelled: {result.error}", code="run_cancelled",
                           extra={"run_id": result.run_id})
    return [graded_text(r.outputs.get(prepared.graded.output, "")) for r in results]


def total_usage(results: list[RunResult]) -> TokenCounts:
    counts = TokenCounts()
    for result in results:
        counts.add_tokens(result.stats)
    return counts


def metagen_field(prepared: PreparedRun, results: list[RunResult] | None = None,
                  trace_link: bool = False) -> dict[str, Any]:
    """The `metagen` field of responses: run ids (open them in the Traces tab), seeds, and after the runs their
    simple outputs and stats."""
    out: dict[str, Any] = {"workflow": prepared.model, "run_id": prepared.run_ids[0], "run_ids": prepared.run_ids,
                           "seeds": prepared.seeds, "output": prepared.graded.output}
    if trace_link:
        out["trace"] = f"/?run={prepared.run_ids[0]}"
    if prepared.overrides:
        out["overrides"] = prepared.overrides
    if results is not None:
        out["status"] = [r.status for r in results]
        out["outputs"] = [{k: v for k, v in r.outputs.items() if isinstance(v, SIMPLE)} for r in results]
        out["stats"] = [r.stats.to_json() for r in results]
    return out
