"""Share mode's per-visitor run limit for API callers: each API key (or, without keys, each caller under share-mode
rules) may have at most the policy's `max_runs_per_visitor` unfinished runs on /v1 and MCP together; more are
refused with 429 at once instead of all waiting in the queue (40 concurrent MCP calls of one key were admitted)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from app.share.run_gate import QueueFullError, RunGate


class KeyRuns:
    """Unfinished runs per caller key (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def unfinished(self, key: str) -> int:
        with self._lock:
            return self._counts.get(key, 0)

    @contextmanager
    def hold(self, key: str, limit: int) -> Iterator[None]:
        """One run of `key` for the block's length; QueueFullError when `key` already has `limit`."""
        with self._lock:
            mine = self._counts.get(key, 0)
            if mine >= limit:
                raise QueueFullError(f"this API key already has {mine} run(s) going (the limit is {limit} per key "
                                     "on this server); wait for one to finish")
            self._counts[key] = mine + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._counts[key] - 1
                if left:
                    self._counts[key] = left
                else:
                    del self._counts[key]


class KeyedGate:
    """The run gate as one caller sees it: its key's run limit first, then the server's slots and queue."""

    def __init__(self, gate: RunGate, runs: KeyRuns, key: str, limit: int) -> None:
        self.gate, self.runs, self.key, self.limit = gate, runs, key, limit

    def __getattr__(self, name: str) -> Any:  # running, waiting, max_concurrent, max_queue
        return getattr(self.gate, name)

    @contextmanager
    def slot(self, cancelled: Any = None, **kwargs: Any) -> Iterator[int]:
        with self.runs.hold(self.key, self.limit), self.gate.slot(cancelled=cancelled, **kwargs) as position:
            yield position
