"""The work of one request on worker threads, bridged to the event loop: a slot of the run queue, events
posted to the loop as they happen, cancel when the client goes away."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from app.serve.errors import ApiError, queue_full
from app.share.run_gate import QueueFullError, RunGate
from backends.base import CancelledError, CancelToken

log = logging.getLogger(__name__)

DISCONNECT_POLL_S = 0.25
CLIENT_GONE = "cancelled: the client disconnected"

Event = tuple[Any, ...]
"""("token", choice, text) | ("text", choice, text) | ("progress", message) | ("done", result) | ("error", exc)."""


class ClientGoneError(Exception):
    """The client disconnected; nothing is left to answer."""


class Job:
    """Runs `work(job)` on a thread once the run gate gives it a slot; `work` may post events and must honour
    the job's cancel tokens. Create it on the event loop."""

    def __init__(self, gate: RunGate, name: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.gate = gate
        self.name = name
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.finished = False
        self._admission: asyncio.Future[Exception | None] = self.loop.create_future()
        self._admitted = False
        self._queued = False
        self._lock = threading.Lock()
        self._tokens: list[CancelToken] = []
        self._cancel_reason: str | None = None

    # -- on the worker thread
    def token(self) -> CancelToken:
        """A cancel token that the job's cancel() reaches (one per run or engine request)."""
        token = CancelToken()
        with self._lock:
            self._tokens.append(token)
            if self._cancel_reason is not None:
                token.cancel(self._cancel_reason)
        return token

    @property
    def cancelled(self) -> bool:
        return self._cancel_reason is not None

    def post(self, *event: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the loop is closed: the server is stopping
            log.debug("dropped a %s event of %s", event[0], self.name)

    def _admit(self, error: Exception | None) -> None:
        with self._lock:
            if self._admitted:
                return
            self._admitted = True

        def settle() -> None:
            if not self._admission.done():
                self._admission.set_result(error)

        try:
            self.loop.call_soon_threadsafe(settle)
        except RuntimeError:
            log.debug("admission of %s after the loop closed", self.name)

    def _waiting(self) -> bool:
        """The run gate's poll while the job waits for a slot (its first call: the job is queued)."""
        if not self._queued:
            self._queued = True
            self._admit(None)
            self.post("progress", f"queued: waiting for a free run slot ({self.gate.running} running)")
        return self.cancelled

    def _main(self, work: Callable[[Job], Any]) -> None:
        try:
            with self.gate.slot(cancelled=self._waiting):
                self._admit(None)
                if self.cancelled:
                    raise CancelledError(self._cancel_reason or "cancelled")
                result = work(self)
            self.post("done", result)
        except QueueFullError as exc:
            with self._lock:
                first = not self._admitted
            if first:
                self._admit(exc)
            else:
                self.post("error", CancelledError(str(exc)))
        except BaseException as exc:
            self._admit(None)
            self.post("error", exc)
        finally:
            self.finished = True

    # -- on the event loop
    def start(self, work: Callable[[Job], Any]) -> None:
        threading.Thread(target=self._main, args=(work,), name=self.name, daemon=True).start()

    def cancel(self, reason: str = CLIENT_GONE) -> None:
        with self._lock:
            if self._cancel_reason is None:
                self._cancel_reason = reason
            tokens = list(self._tokens)
        for token in tokens:
            token.cancel(reason)

    async def admitted(self) -> None:
        """Wait until the job runs or waits in the queue; ApiError 429 when the queue is full."""
        error = await self._admission
        if error is not None:
            raise queue_full(str(error))

    async def next_event(self, timeout: float) -> Event | None:
        try:
            return await asyncio.wait_for(self.events.get(), timeout)
        except asyncio.TimeoutError:
            return None

    async def result(self, request: Request) -> Any:
        """The work's result (its exception is raised); cancels the job and raises ClientGoneError when the
        client disconnects first."""
        while True:
            event = await self.next_event(DISCONNECT_POLL_S)
            if event is None:
                if await request.is_disconnected():
                    self.cancel()
                    raise ClientGoneError()
                continue
            if event[0] == "done":
                return event[1]
            if event[0] == "error":
                raise event[1]


def run_failed(message: str, **extra: Any) -> ApiError:
    return ApiError(500, message, code="run_failed", extra=extra)
