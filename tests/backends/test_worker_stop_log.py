"""An engine worker ended by a stop signal (a clean `metagen serve` shutdown sends SIGTERM to its process group) is
logged at INFO, not as an ERROR; a crash still is an ERROR (issue 43, 1.4)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from backends.llama.engine_stops import StopCounter
from backends.llama.worker_backend import WorkerBackend


def _backend() -> WorkerBackend:
    """A WorkerBackend's bookkeeping without a worker process (only what worker_stopped reads)."""
    backend = object.__new__(WorkerBackend)
    backend.path, backend.kind, backend.stops = Path("/models/m.gguf"), "llama", StopCounter()
    return backend


def _worker() -> SimpleNamespace:
    """A worker process that ended unasked (not ended by the studio), while serving."""
    return SimpleNamespace(ended=None, loading=False, last_words=lambda: [])


@pytest.mark.parametrize(("exitcode", "level"), [(-signal.SIGTERM, logging.INFO), (-signal.SIGINT, logging.INFO),
                                                 (-signal.SIGSEGV, logging.ERROR), (1, logging.ERROR)])
def test_a_stop_signal_is_no_error(caplog: pytest.LogCaptureFixture, exitcode: int, level: int) -> None:
    with caplog.at_level(logging.INFO, logger="backends.llama.worker_backend"):
        error = _backend().worker_stopped(_worker(), exitcode)  # type: ignore[arg-type]
    (record,) = [r for r in caplog.records if "stopped" in r.getMessage()]
    assert record.levelno == level and "it restarts on the next request" in str(error)
