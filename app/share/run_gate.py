"""The run gate: how many runs may go at once and how many may wait (share mode: 1 running, a few waiting)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.share.policy import SharePolicy


class QueueFullError(RuntimeError):
    """Too many runs are waiting; the visitor should try again later."""


class RunGate:
    """Limits concurrent runs and the queue in front of them (share mode: 1 running, a few waiting)."""

    def __init__(self, max_concurrent: int, max_queue: int) -> None:
        self.max_concurrent = max(1, max_concurrent)
        self.max_queue = max(0, max_queue)
        self._cond = threading.Condition()
        self._running = 0
        self._waiting = 0

    @classmethod
    def for_policy(cls, policy: SharePolicy) -> RunGate:
        return cls(policy.max_concurrent_runs, policy.max_queue)

    @property
    def running(self) -> int:
        with self._cond:
            return self._running

    @property
    def waiting(self) -> int:
        with self._cond:
            return self._waiting

    @contextmanager
    def slot(self, cancelled: Any = None, poll_s: float = 0.2, admitted: bool = False) -> Iterator[int]:
        """Wait for a run slot; yields the queue position the run had on arrival (0 = ran at once).
        Raises QueueFullError when the queue is full, unless the job was `admitted` earlier against the queue bound
        and is bounded apart (an evaluation: one app-wide), which then waits its turn; gives up when `cancelled()`
        becomes true."""
        with self._cond:
            position = 0
            if self._running >= self.max_concurrent:
                if self._waiting >= self.max_queue and not admitted:
                    raise QueueFullError(f"the app is busy: {self._running} run(s) running and {self._waiting} "
                                         "waiting; try again in a minute")
                self._waiting += 1
                position = self._waiting
                try:
                    while self._running >= self.max_concurrent:
                        if cancelled is not None and cancelled():
                            raise QueueFullError("the run was cancelled while it waited for a free slot")
                        self._cond.wait(poll_s)
                finally:
                    self._waiting -= 1
            self._running += 1
        try:
            yield position
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()
