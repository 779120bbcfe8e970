"""Talking to a server within bounds: the answer's size, a deadline, and the run's cancel, even mid-read.

A blocking send or read runs in a helper thread while the caller waits on the cancel token and the deadline
(polled every POLL_S): a cancelled run or one past its deadline stops waiting at once and closes the response,
leaving the helper to end with its socket. Bodies are read chunk by chunk and refused past their size.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx

from backends.base import CancelledError, CancelToken

POLL_S = 0.05
T = TypeVar("T")


class TooLargeError(Exception):
    """The answer passed its size bound (`limit` bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit:,} bytes")
        self.limit = limit


class DeadlineError(Exception):
    """The answer did not arrive before its deadline."""


def _check(cancel: CancelToken | None, deadline: float | None) -> None:
    if cancel is not None and cancel.cancelled:
        raise CancelledError(cancel.reason or "cancelled")
    if deadline is not None and time.monotonic() >= deadline:
        raise DeadlineError()


def interruptible(fn: Callable[[], T], cancel: CancelToken | None, deadline: float | None,
                  late: Callable[[T], Any] | None = None) -> T:
    """fn() in a helper thread, given up on cancel (CancelledError) or past the deadline (DeadlineError); a result
    that arrives after that is handed to `late` (to close it). Without cancel and deadline: fn() in this thread."""
    if cancel is None and deadline is None:
        return fn()
    box: dict[str, Any] = {}
    done = threading.Event()
    lock = threading.Lock()

    def run() -> None:
        try:
            value = fn()
        except BaseException as exc:
            box["error"] = exc
        else:
            with lock:
                if box.get("abandoned") and late is not None:
                    late(value)
                    return
                box["value"] = value
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="remote-io").start()
    while not done.wait(POLL_S):
        try:
            _check(cancel, deadline)
        except BaseException:
            with lock:
                box["abandoned"] = True
                value = box.pop("value", None)
            if value is not None and late is not None:
                late(value)
            raise
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def iter_chunks(response: httpx.Response, cancel: CancelToken | None, deadline: float | None,
                max_bytes: int) -> Iterator[bytes]:
    """The body's chunks as they come; TooLargeError past `max_bytes`, CancelledError / DeadlineError as above
    (the response is closed then). Errors of the read itself (timeouts, a dropped connection) come up as raised."""
    if cancel is None and deadline is None:
        total = 0
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > max_bytes:
                response.close()
                raise TooLargeError(max_bytes)
            yield chunk
        return
    chunks: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=64)
    stop = threading.Event()

    def reader() -> None:
        try:
            for chunk in response.iter_bytes():
                while not stop.is_set():
                    try:
                        chunks.put(("chunk", chunk), timeout=POLL_S)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            chunks.put(("end", None))
        except BaseException as exc:
            if not stop.is_set():
                chunks.put(("error", exc))

    threading.Thread(target=reader, daemon=True, name="remote-read").start()
    total = 0
    try:
        while True:
            try:
                kind, item = chunks.get(timeout=POLL_S)
            except queue.Empty:
                _check(cancel, deadline)
                continue
            if kind == "end":
                return
            if kind == "error":
                raise item
            total += len(item)
            if total > max_bytes:
                raise TooLargeError(max_bytes)
            yield item
            _check(cancel, deadline)
    finally:
        stop.set()
        response.close()


def read_body(response: httpx.Response, cancel: CancelToken | None, deadline: float | None, max_bytes: int) -> bytes:
    """The whole body, bounded as `iter_chunks`."""
    return b"".join(iter_chunks(response, cancel, deadline, max_bytes))


def iter_lines(chunks: Iterator[bytes], max_line: int) -> Iterator[str]:
    """Text lines of a chunk stream; TooLargeError for a line longer than `max_line` bytes."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode("utf-8", errors="replace")
        if len(pending) > max_line:
            raise TooLargeError(max_line)
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", errors="replace")
