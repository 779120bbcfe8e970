"""Progress bars in notebooks and terminals (`tqdm.auto`, imported lazily: without tqdm there are no bars)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from app.run import events as ev

log = logging.getLogger(__name__)

NODE_DONE = (ev.NODE_END, ev.NODE_CACHED, ev.NODE_ERROR, ev.NODE_SKIPPED)
RUN_BAR_DELAY_S = 1.0
"""A run's bar shows only once the run has taken this long (short runs print nothing)."""


def _bar(**kwargs: Any) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        log.debug("tqdm is not installed: no progress bar (pip install 'metagen-studio[notebook]')")
        return None
    tqdm.monitor_interval = 0  # no monitor thread: nothing of ours outlives a Studio
    return tqdm(**kwargs)


class RunBar:
    """An event observer that counts a run's finished nodes on a bar."""

    def __init__(self, name: str, total: int) -> None:
        self._bar = _bar(total=total, desc=name, unit="node", delay=RUN_BAR_DELAY_S, leave=False)
        self._lock = threading.Lock()

    def on_event(self, event: Any) -> None:
        if self._bar is not None and event.type in NODE_DONE and event.node_id is not None:
            with self._lock:
                self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class EvaluationBar:
    """An evaluation's progress callback: runs done of all, and the share correct so far."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._lock = threading.Lock()

    def __call__(self, progress: Any) -> None:
        with self._lock:
            if self._bar is None:
                self._bar = _bar(total=progress.total, desc="evaluate", unit="run") or False
            if self._bar:
                self._bar.n = progress.done
                self._bar.set_postfix_str(f"{progress.correct / max(progress.done, 1):.0%} correct", refresh=False)
                self._bar.refresh()

    def close(self) -> None:
        with self._lock:
            if self._bar:
                self._bar.close()
