"""A run's progress for an MCP caller: an observer on the run's event bus that posts each top-level node done
(nodes done of nodes, with the node's name) to the call's job."""

from __future__ import annotations

import threading

from app.run import events as ev
from app.run.events import Event
from app.serve.jobs import Job

NODE_DONE = "node_done"
"""The job event ("node_done", done, total, message)."""
FINISHED = {ev.NODE_END: "done", ev.NODE_CACHED: "from the cache", ev.NODE_ERROR: "failed",
            ev.NODE_SKIPPED: "skipped"}


class NodeProgress:
    """Counts the run's own nodes as they finish (a sub-workflow's inner nodes count as their workflow node)."""

    def __init__(self, job: Job, total: int) -> None:
        self.job = job
        self.total = total
        self.done = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def on_event(self, event: Event) -> None:
        node = event.node_id
        state = FINISHED.get(event.type)
        if state is None or node is None or "/" in node:
            return
        with self._lock:
            if node in self._seen:
                return
            self._seen.add(node)
            self.done += 1
            done = self.done
        self.job.post(NODE_DONE, done, self.total, f"node {node} {state} ({done}/{self.total})")
