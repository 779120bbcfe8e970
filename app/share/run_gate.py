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
        self._reserved = 0

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

    @property
    def pending(self) -> int:
        """Jobs waiting for a slot, and those admitted by `reserve` that have not come to `slot` yet."""
        with self._cond:
            return self._waiting + self._reserved

    def reserve(self) -> None:
        """Admit a job that comes to `slot(reserved=True)` from a thread of its own (a run accepted by the studio):
        it takes its queue place now, so jobs admitted while its thread starts cannot overfill the queue. Raises
        QueueFullError when the queue is full; `cancel_reservation` gives back a place that is never used."""
        with self._cond:
            pending = self._waiting + self._reserved
            if pending >= self.max_queue:
                raise QueueFullError(f"{pending} runs are already waiting; wait for one to finish or cancel one")
            self._reserved += 1

    def cancel_reservation(self) -> None:
        with self._cond:
            self._reserved = max(0, self._reserved - 1)
            self._cond.notify_all()

    @contextmanager
    def slot(self, cancelled: Any = None, poll_s: float = 0.2, admitted: bool = False,
             reserved: bool = False) -> Iterator[int]:
        """Wait for a run slot; yields the queue position the run had on arrival (0 = ran at once).
        Raises QueueFullError when the queue is full, unless the job was admitted earlier: `reserved` (its place
        taken by `reserve`) or `admitted` against the queue bound and bounded apart (an evaluation: one app-wide),
        which then waits its turn; gives up when `cancelled()` becomes true."""
        with self._cond:
            position = 0
            if reserved:
                self._reserved = max(0, self._reserved - 1)
                admitted = True
            if self._running >= self.max_concurrent:
                if self._waiting + self._reserved >= self.max_queue and not admitted:
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
