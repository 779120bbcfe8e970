"""Live state of one run for the UI: an observer that folds scheduler events into per-node states."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from app.run import events as ev
from app.run.events import Event
from app.run.status import CANCELLED, END_STATUSES, INVALID, NODE_CACHED, NODE_SKIPPED, QUEUED, RUNNING, SUCCEEDED

FINISHED_STATES = (*END_STATUSES, INVALID)
TEXT_TAIL = 600
"""Characters of streamed partial output kept per node (the tail)."""


@dataclass
class NodeLive:
    """What the canvas shows on one node: state, token progress and the streamed partial output."""

    state: str = QUEUED
    """queued | running | cached | done | error | skipped"""
    progress: float = 0.0
    tokens: int = 0
    text: str = ""
    message: str = ""
    expected_tokens: int = 0
    samples: dict[int, str] = field(default_factory=dict)
    """Streamed text per sample (the node shows the one that moved last)."""


@dataclass
class LiveRun:
    """One run as the UI sees it; fed by scheduler events (thread-safe), read by polling snapshots."""

    run_id: str
    workflow: str
    node_ids: list[str]
    status: str = QUEUED
    created: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    done: int = 0
    total: int = 0
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    nodes: dict[str, NodeLive] = field(default_factory=dict)
    node_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    queue_position: int = 0
    version: int = 0
    expected_s: float | None = None
    """The run's expected seconds on this machine (`estimate.run_expected_s`), None when no speed was measured."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.total = len(self.node_ids)
        self.nodes = {node_id: NodeLive() for node_id in self.node_ids}
        self._nested_done: dict[str, int] = {}
        """Per workflow node: its sub-workflow's nodes done so far."""
        self._nested_streams: dict[str, dict[str, str]] = {}
        """Per workflow node: the streamed text of each of its sub-workflow's nodes (the tail)."""

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATES

    # ---------------------------------------------------------------- updates

    def mark_running(self) -> None:
        with self._lock:
            if self.status == QUEUED:
                self.status = RUNNING
                self.started = time.time()
            self.version += 1

    def finish(self, status: str, *, outputs: dict[str, Any] | None = None, error: str | None = None,
               stats: dict[str, Any] | None = None) -> None:
        with self._lock:
            self.status = status
            self.ended = time.time()
            if outputs is not None:
                self.outputs = outputs
            self.error = error
            if stats is not None:
                self.stats = stats
            for node in self.nodes.values():
                if node.state in (QUEUED, RUNNING):
                    node.state = NODE_SKIPPED if status != SUCCEEDED else node.state
                    if status == CANCELLED and not node.message:
                        node.message = "cancelled"
            self.version += 1

    def on_event(self, event: Event) -> None:
        with self._lock:
            self._apply(event)
            self.version += 1

    def _node(self, node_id: str | None) -> NodeLive | None:
        if node_id is None:
            return None
        return self.nodes.setdefault(node_id, NodeLive())

    def _apply(self, event: Event) -> None:
        if event.node_id is not None and "/" in event.node_id:
            self._apply_nested(event)
            return
        data = event.data
        node = self._node(event.node_id)
        if event.type == ev.RUN_START:
            self.status = RUNNING
            self.started = self.started or event.time
        elif event.type == ev.PROGRESS and node is None:
            self.done = int(data.get("done", self.done))
            self.total = int(data.get("total", self.total))
        elif node is None:
            return
        elif event.type == ev.NODE_START:
            node.state = RUNNING
            params = data.get("params") or {}
            n, max_tokens = params.get("n", 1), params.get("max_tokens")
            if isinstance(n, int) and isinstance(max_tokens, int) and max_tokens > 0:
                node.expected_tokens = max(1, n) * max_tokens
        elif event.type == ev.TOKEN:
            node.tokens += 1
            sample = int(data.get("sample") or 0)
            stream = (node.samples.get(sample, "") + str(data.get("text", "")))[-TEXT_TAIL:]
            node.samples[sample] = stream
            node.text = f"[sample {sample + 1}] {stream}" if len(node.samples) > 1 or sample else stream
            if node.expected_tokens:
                node.progress = max(node.progress, min(0.99, node.tokens / node.expected_tokens))
        elif event.type == ev.PROGRESS:
            total = float(data.get("total") or 0)
            if total > 0:
                node.progress = min(1.0, float(data.get("done", 0)) / total)
            node.message = str(data.get("message") or node.message)
        elif event.type == ev.NODE_END:
            node.state, node.progress = "done", 1.0
            self.node_outputs[event.node_id or ""] = data.get("outputs") or {}
        elif event.type == ev.NODE_CACHED:
            node.state, node.progress = NODE_CACHED, 1.0
            self.node_outputs[event.node_id or ""] = data.get("outputs") or {}
        elif event.type == ev.NODE_ERROR:
            node.state = "error"
            node.message = str(data.get("error") or "failed")
        elif event.type == ev.NODE_SKIPPED:
            node.state = NODE_SKIPPED
            node.message = str(data.get("reason") or "skipped")

    def _apply_nested(self, event: Event) -> None:
        """An event of a node inside a sub-workflow (`w/2/critique`): shown on the workflow node `w` (the canvas
        draws the top-level nodes), whose message counts the child nodes done and whose text streams theirs."""
        top, _, inner = (event.node_id or "").partition("/")
        node = self.nodes.get(top)
        if node is None:
            return
        if event.type in (ev.NODE_END, ev.NODE_CACHED):
            self._nested_done[top] = self._nested_done.get(top, 0) + 1
            node.message = f"{self._nested_done[top]} sub-workflow node(s) done"
            self.node_outputs[event.node_id or ""] = event.data.get("outputs") or {}
        elif event.type == ev.TOKEN:
            node.tokens += 1
            streams = self._nested_streams.setdefault(top, {})  # per child node: the one that moved last shows
            streams[inner] = (streams.get(inner, "") + str(event.data.get("text", "")))[-TEXT_TAIL:]
            node.text = f"[{inner}] {streams[inner]}"
        elif event.type == ev.NODE_ERROR:
            node.message = f"{inner}: {event.data.get('error') or 'failed'}"

    # ---------------------------------------------------------------- reading

    def snapshot(self) -> dict[str, Any]:
        """JSON for the browser: run status, progress and each node's state (without full outputs)."""
        with self._lock:
            running = [n for n in self.nodes.values() if n.state == RUNNING]
            fraction = (self.done + sum(n.progress for n in running)) / self.total if self.total else 0.0
            if self.status == SUCCEEDED:
                fraction = 1.0
            return {
                "run_id": self.run_id,
                "workflow": self.workflow,
                "status": self.status,
                "finished": self.finished,
                "queue_position": self.queue_position,
                "done": self.done,
                "total": self.total,
                "progress": round(min(1.0, fraction), 4),
                "elapsed_s": round((self.ended or time.time()) - (self.started or self.created), 2)
                if self.started else 0.0,
                "expected_s": self.expected_s,
                "error": self.error,
                "stats": dict(self.stats),
                "outputs": self.outputs if self.finished else {},
                "nodes": {node_id: {k: v for k, v in asdict(n).items() if k not in ("expected_tokens", "samples")}
                          for node_id, n in self.nodes.items()},
                "has_outputs": sorted(self.node_outputs),
                "version": self.version,
            }

    def outputs_of(self, node_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self.node_outputs.get(node_id)
