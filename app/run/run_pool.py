"""A run's bounded pool of helper threads: work goes to a helper while one is free, else runs on the thread that
asked, so nested fan-out (mapped sub-workflows) never starts a thread per candidate and never waits on a full pool."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from backends.base import CancelledError, CancelToken, ModelSpec

T = TypeVar("T")
DEFAULT_HELPERS = 8
"""Helper threads one run may hold for its sub-workflows, on top of the scheduler's workers."""
ENGINE_BATCH = 64
"""Sequences a llama.cpp engine decodes in one batch unless its model sets n_seq_max (the worker's default)."""
REMOTE_CONCURRENCY = 8
"""Requests in flight to a remote server unless its model sets max_concurrency (the remote backend's default)."""


def _run_into(fut: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        fut.set_result(fn(*args))
    except BaseException as exc:  # handed to whoever waits on the future
        fut.set_exception(exc)


def _then_set(work: Callable[[], None], finished: threading.Event) -> Callable[[], None]:
    def body() -> None:
        try:
            work()
        finally:
            finished.set()

    return body


class RunPool:
    """At most `helpers` threads at once for one run. `submit` and `map` never block waiting for a free helper:
    the calling thread does the work itself, which is what keeps nested fan-out free of deadlocks."""

    def __init__(self, helpers: int = DEFAULT_HELPERS, name: str = "run") -> None:
        self._free = threading.Semaphore(max(0, helpers))
        self._name = name
        self._lock = threading.Lock()
        self.busy = 0
        self.peak = 0
        """Most helper threads held at once (for tests and benchmarks)."""

    def _take(self) -> bool:
        if not self._free.acquire(blocking=False):
            return False
        with self._lock:
            self.busy += 1
            self.peak = max(self.peak, self.busy)
        return True

    def _give(self) -> None:
        with self._lock:
            self.busy -= 1
        self._free.release()

    def _start(self, target: Callable[[], None]) -> bool:
        """`target` on a new helper thread (a helper slot already taken); False, the slot given back, when the
        system refuses another thread."""
        def body() -> None:
            try:
                target()
            finally:
                self._give()

        try:
            threading.Thread(target=body, name=f"{self._name}-helper", daemon=True).start()
        except RuntimeError:  # "can't start new thread": the work stays on the asking thread
            self._give()
            return False
        return True

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """`fn(*args)` on a helper when one is free, else now on this thread (the future is then already done)."""
        fut: Future[T] = Future()
        if not (self._take() and self._start(lambda: _run_into(fut, fn, args))):
            _run_into(fut, fn, args)
        return fut

    @staticmethod
    def submit_here(fn: Callable[..., T], *args: Any) -> Future[T]:
        """`fn(*args)` now on this thread, as a done future (work that would only wait for a helper anyway)."""
        fut: Future[T] = Future()
        _run_into(fut, fn, args)
        return fut

    def map(self, fn: Callable[[int, Any], T], items: Sequence[Any], cancel: CancelToken, *,
            limit: int | None = None, fail_fast: bool = False) -> list[Future[T]]:
        """`fn(index, item)` for every item, this thread and the free helpers (at most `limit` threads in all)
        taking the next item in turn; once `cancel` is set no further item starts (its future holds a
        CancelledError), nor, with `fail_fast`, once an item raised. Returns when all are done."""
        futures: list[Future[T]] = [Future() for _ in items]
        lock = threading.Lock()
        next_index = [0]
        failed: list[int] = []

        def work() -> None:
            while True:
                with lock:
                    i = next_index[0]
                    if i >= len(items):
                        return
                    next_index[0] += 1
                if cancel.cancelled:
                    futures[i].set_exception(CancelledError(cancel.reason or "cancelled"))
                    continue
                if failed:
                    futures[i].set_exception(CancelledError(f"not started: item {failed[0]} failed"))
                    continue
                _run_into(futures[i], fn, (i, items[i]))
                if fail_fast and futures[i].exception() is not None:
                    failed.append(i)

        helpers: list[threading.Event] = []
        threads = len(items) if limit is None else max(1, min(int(limit), len(items)))
        for _ in range(threads - 1):
            if not self._take():
                break
            finished = threading.Event()
            if not self._start(_then_set(work, finished)):
                break
            helpers.append(finished)
        work()
        for finished in helpers:
            finished.wait()
        return futures


def fanout_width(specs: Iterable[ModelSpec]) -> int:
    """Requests one run's nodes may have in flight at once through `NodeContext.map`: the most any of its models
    serves together (a llama.cpp engine's parallel sequences, n_seq_max; a remote server's max_concurrency over
    its replicas), so a round of requests is one engine batch and no more threads than that wait on it."""
    widths = [ENGINE_BATCH]
    for spec in specs:
        if spec.source == "openai":
            servers = spec.replicas or ((spec.base_url or "", spec.max_concurrency),)
            widths.append(sum(int(c or spec.max_concurrency or REMOTE_CONCURRENCY) for _, c in servers))
        else:
            widths.append(int(spec.option("n_seq_max", ENGINE_BATCH) or ENGINE_BATCH))
    return max(1, max(widths[1:] or widths))
