"""Progress of a pull inside each file: tqdm bars (CLI, Python) and a callback sink (the Models tab's progress)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class TqdmProgress:
    """A tqdm bar per file: bytes, rate and time left; resumed bytes count from where the partial stopped."""

    def __init__(self, **tqdm_kwargs: Any) -> None:
        self._kwargs = tqdm_kwargs
        self._bar: Any = None

    def start(self, name: str, total: int | None, initial: int) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, initial=initial, desc=name, unit="B", unit_scale=True, unit_divisor=1024,
                         dynamic_ncols=True, **self._kwargs)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class CallbackProgress:
    """Calls `report(name, done, total, rate_bytes_per_s)` at most every `every_s` seconds, and at the end."""

    def __init__(self, report: Callable[[str, int, int | None, float], None], every_s: float = 0.25) -> None:
        self._report, self._every = report, every_s
        self._name, self._total, self._done, self._start_done = "", None, 0, 0
        self._t0 = self._last = 0.0

    def start(self, name: str, total: int | None, initial: int) -> None:
        self._name, self._total, self._done, self._start_done = name, total, initial, initial
        self._t0 = self._last = time.monotonic()
        self._report(name, initial, total, 0.0)

    def advance(self, n: int) -> None:
        self._done += n
        now = time.monotonic()
        if now - self._last >= self._every:
            self._last = now
            self._report(self._name, self._done, self._total, self._rate(now))

    def _rate(self, now: float) -> float:
        return (self._done - self._start_done) / max(now - self._t0, 1e-6)

    def close(self) -> None:
        self._report(self._name, self._done, self._total, self._rate(time.monotonic()))
