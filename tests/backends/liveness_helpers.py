"""Helpers of the engine worker liveness tests: a call bounded in time, process lookups by id, stopping a process
(tests/backends/conftest.py continues or kills what a test stopped)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STALL_S = 3
"""The heartbeat rule these tests run under ($METAGEN_ENGINE_STALL_S): a silent worker is ended after 3 s."""
AT_ONCE_S = 1.0
"""What 'at once' means for a cancelled call or a failure the studio can see."""
LOAD_S = 90.0
"""A generous bound for a model load on a loaded machine; nothing is timed against it."""


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def children(pid: int) -> set[int]:
    """The direct children of a process (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def engine_workers(pid: int) -> set[int]:
    """The children of a process that are engine workers (their command line runs worker_main), not the short
    probes a command may start first."""
    found = set()
    for child in children(pid):
        try:
            if b"worker_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.add(child)
        except OSError:
            continue
    return found


def wait_for(condition: Callable[[], Any], limit_s: float, what: str) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {limit_s:g} s")


class Outcome:
    """A call run on a thread of its own: its result or exception, and when it ended."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.ended_at: float | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.value = fn()
        except BaseException as exc:
            self.error = exc
        self.ended_at = time.monotonic()

    def within(self, limit_s: float, what: str) -> Outcome:
        self.thread.join(limit_s)
        assert not self.thread.is_alive(), f"{what}: still waiting after {limit_s:g} s"
        return self


def stop(pid: int, stopped: list[int]) -> None:
    stopped.append(pid)
    os.kill(pid, signal.SIGSTOP)
