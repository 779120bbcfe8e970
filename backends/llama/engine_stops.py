"""What the studio says when an engine worker stops (one sentence builder for "stopped", "stopped responding" and
"marked broken") and the one count of a model's stops in a row that marks it broken."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from backends.base import EngineStoppedError, ModelBrokenError

log = logging.getLogger(__name__)

CRASHES_BEFORE_BROKEN = 3
"""A model whose worker stops this many times in a row (no engine request succeeding between) is marked broken."""

RESPONDING = "stopped responding"
"""The cause of a worker ended because it gave no sign of life (a hang, a stopped process, a thrashing machine)."""


@dataclass(frozen=True)
class EngineStop:
    """One stop of a model's engine worker. `what`: "the llama.cpp engine for X"; `model`: the file name; `cause`:
    "SIGSEGV", "exit code 3", or a sentence for a worker the studio ended; `when`: "" or "while loading";
    `last_words`: the most telling line the worker wrote on stderr before it stopped; `counted`: whether it counts
    towards marking the model broken (a worker the studio ended after a cancel does not)."""

    what: str
    model: str
    cause: str
    when: str = ""
    last_words: str = ""
    counted: bool = True
    ended_by_studio: bool = False

    @property
    def headline(self) -> str:
        """'the llama.cpp engine for X stopped (SIGSEGV)' or 'the ... for X stopped responding (...)'."""
        where = f" {self.when}" if self.when else ""
        if self.ended_by_studio:
            return f"{self.what} {self.cause}{where}"
        return f"{self.what} stopped{where} ({self.cause})"

    @property
    def message(self) -> str:
        """The headline, what happens next, and the worker's last words when it left any."""
        after = "it was ended and restarts on the next request" if self.ended_by_studio else \
            "it restarts on the next request"
        words = f" (its last words on stderr: {self.last_words})" if self.last_words else ""
        return f"{self.headline}; {after}{words}"

    def error(self) -> EngineStoppedError:
        """A new exception for one caller (each failed request raises its own object)."""
        return EngineStoppedError(self.message, model=self.model, cause=self.cause)


def broken_reason(stop: EngineStop, times: int) -> str:
    """Why a model is marked broken, after its `times`-th stop in a row."""
    words = f" (its last words on stderr: {stop.last_words})" if stop.last_words else ""
    return (f"{stop.headline}, {times} times in a row{words}; unload the model to try it again, and check the file "
            "and this machine's build with `metagen doctor`")


def broken_error(model: str, reason: str, cause: str = "") -> ModelBrokenError:
    return ModelBrokenError(f"{model} is marked broken: {reason}", model=model, cause=cause)


class StopCounter:
    """A model's engine stops in a row (loading or serving), reset by a successful engine request; the
    CRASHES_BEFORE_BROKEN-th marks the model broken until it is unloaded. Thread-safe, its own lock."""

    def __init__(self, limit: int = CRASHES_BEFORE_BROKEN) -> None:
        self.limit = limit
        self.in_a_row = 0
        self.last: EngineStop | None = None
        self.broken: str | None = None
        self._lock = threading.Lock()

    def record(self, stop: EngineStop) -> EngineStoppedError:
        """Count `stop` (when it counts) and return the error its requests get: a ModelBrokenError once the model
        is broken, else the stop's own error."""
        with self._lock:
            self.last = stop
            if stop.counted:
                self.in_a_row += 1
                if self.in_a_row >= self.limit and self.broken is None:
                    self.broken = broken_reason(stop, self.in_a_row)
                    log.error("%s is marked broken: %s", stop.model, self.broken)
            broken = self.broken
        if broken is not None:
            return broken_error(stop.model, broken, stop.cause)
        return stop.error()

    def succeeded(self) -> None:
        with self._lock:
            self.in_a_row = 0
