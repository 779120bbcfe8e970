"""The run's bounded helper pool: never more helpers than its bound, nested maps without deadlock, cancel obeyed."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.run.run_pool import RunPool
from backends.base import CancelledError, CancelToken


def test_nested_maps_on_one_helper_finish_and_hold_at_most_one_helper() -> None:
    pool = RunPool(helpers=1)
    cancel = CancelToken()

    def inner(i: int, item: int) -> int:
        return item * 10

    def outer(i: int, item: int) -> int:
        return sum(f.result() for f in pool.map(inner, list(range(item)), cancel))

    results = [f.result() for f in pool.map(outer, [3, 4, 5, 6], cancel)]
    assert results == [30, 60, 100, 150]
    assert pool.peak == 1 and pool.busy == 0


def test_map_uses_free_helpers_at_once() -> None:
    pool = RunPool(helpers=2)
    barrier = threading.Barrier(3, timeout=10)  # the caller and two helpers, together

    def wait(i: int, item: Any) -> int:
        return barrier.wait()

    assert sorted(f.result() for f in pool.map(wait, [0, 1, 2], CancelToken())) == [0, 1, 2]
    assert pool.peak == 2


def test_no_item_starts_after_a_cancel() -> None:
    pool = RunPool(helpers=0)
    cancel = CancelToken()
    ran: list[int] = []

    def work(i: int, item: int) -> int:
        ran.append(i)
        if i == 1:
            cancel.cancel("stop")
        return i

    futures = pool.map(work, list(range(5)), cancel)
    assert ran == [0, 1]
    with pytest.raises(CancelledError):
        futures[2].result()


def test_submit_runs_here_when_no_helper_is_free() -> None:
    pool = RunPool(helpers=0)
    fut = pool.submit(threading.get_ident)
    assert fut.done() and fut.result() == threading.get_ident()


def test_a_refused_thread_gives_the_slot_back_and_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = RunPool(helpers=1)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert pool.submit(threading.get_ident).result() == threading.get_ident()
    assert pool.busy == 0 and pool.submit(lambda: 2).result() == 2
