"""Blocking work for in-process callers that Ctrl+C (or a notebook's interrupt) stops cleanly: the work runs on a
worker thread, and an interrupt of the waiting thread cancels it and waits for it to stop before re-raising."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
POLL_S = 0.2
"""How often the waiting thread wakes (an interrupt lands between two waits)."""


def wait_interruptibly(work: Callable[[], T], cancel: Callable[[], None], name: str) -> T:
    """`work()`'s result (or its exception), waited for so that KeyboardInterrupt calls `cancel()` first."""
    outcome: dict[str, Any] = {}
    done = threading.Event()  # not Thread.join: a join interrupted by Ctrl+C may return early the next time

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        while not done.wait(POLL_S):
            pass
    except BaseException:
        cancel()
        done.wait()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
