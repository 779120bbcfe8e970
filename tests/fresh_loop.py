"""Run a coroutine function on an event loop of its own, in a thread of its own: the session's Playwright (the sync
API keeps an event loop running in the main thread once a browser test has run) would refuse `anyio.run` there."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio


def run_fresh(fn: Callable[..., Any], *args: Any) -> Any:
    """`anyio.run(fn, *args)` in a new thread; its result, or its exception raised here."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = anyio.run(fn, *args)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="fresh-event-loop")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")
