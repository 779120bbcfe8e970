"""Observer events emitted by the scheduler while a run proceeds (the trace store and UI consume them)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

# Event types. `data` contents per type:
RUN_START = "run_start"  # run_id, workflow (name), workflow_yaml, workflow_hash, inputs, seed, models, budget
RUN_END = "run_end"  # status (app/run/status.py), outputs (json), stats (RunStats.to_json()), error (str | None)
NODE_START = "node_start"  # kind, params (NodeKind.typed_params), inputs (json, truncated), model, seed, signature
NODE_END = "node_end"  # kind, outputs (json), duration_s, signature
NODE_CACHED = "node_cached"  # kind, outputs (json), signature, params (NodeKind.typed_params)
NODE_ERROR = "node_error"  # kind, error, cause (exception type), inputs_preview
NODE_SKIPPED = "node_skipped"  # reason: an upstream node failed / run cancelled
LM_CALL = "lm_call"  # see RunNodeContext.generate in app/run/scheduler.py for the fields
LM_REQUEST = "lm_request"  # node, method, model (backends.replay.calls.model_ref), request, result: one backend call
NODE_EVENT = "node_event"  # kind ("score" | "vote" | "tree" | "refine" | "note" ...), plus the node's payload
TOKEN = "token"  # sample, text  (streaming; high volume: not for persistent stores)
PROGRESS = "progress"  # done, total, message (node-level progress) or run-level when node_id is None


@dataclass
class Event:
    type: str
    run_id: str
    node_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)


class Observer(Protocol):
    def on_event(self, event: Event) -> None: ...


class EventBus:
    """Fans events out to observers; an observer that raises is logged and never breaks the run."""

    def __init__(self, observers: list[Observer] | tuple[Observer, ...] = ()) -> None:
        self._observers = list(observers)
        self._closed = False

    def close(self) -> None:
        """Drop every later event: a run has ended, and a node it left behind (stuck past the stop) may not
        write into its trace after its run_end."""
        self._closed = True

    def emit(self, event: Event) -> None:
        if self._closed:
            log.debug("dropped a %s event of an ended run", event.type)
            return
        for observer in self._observers:
            try:
                observer.on_event(event)
            except Exception:
                log.exception("observer %r failed on %s event", observer, event.type)


class EventRecorder:
    """Keeps every event in memory (tests, and the UI's per-run view)."""

    def __init__(self, skip: tuple[str, ...] = ()) -> None:
        self.events: list[Event] = []
        self._skip = skip

    def on_event(self, event: Event) -> None:
        if event.type not in self._skip:
            self.events.append(event)

    def of_type(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]
