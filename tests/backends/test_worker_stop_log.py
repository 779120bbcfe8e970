"""An engine worker ended by a stop signal (a clean `metagen serve` shutdown sends SIGTERM to its process group) is
logged at INFO, not as an ERROR; a crash still is an ERROR (issue 43, 1.4)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import pytest

from backends.llama.worker_backend import WorkerBackend


def _backend() -> WorkerBackend:
    """A WorkerBackend's bookkeeping without a worker process (only what worker_stopped reads)."""
    backend = object.__new__(WorkerBackend)
    backend.path, backend.kind = Path("/models/m.gguf"), "llama"
    backend._lock, backend._worker = threading.Lock(), None
    backend.crashes_in_a_row, backend.last_stop, backend.broken_reason = 0, None, None
    return backend


@pytest.mark.parametrize(("exitcode", "level"), [(-signal.SIGTERM, logging.INFO), (-signal.SIGINT, logging.INFO),
                                                 (-signal.SIGSEGV, logging.ERROR), (1, logging.ERROR)])
def test_a_stop_signal_is_no_error(caplog: pytest.LogCaptureFixture, exitcode: int, level: int) -> None:
    with caplog.at_level(logging.INFO, logger="backends.llama.worker_backend"):
        error = _backend().worker_stopped(None, exitcode)  # type: ignore[arg-type]
    (record,) = [r for r in caplog.records if "stopped" in r.getMessage()]
    assert record.levelno == level and "it restarts on the next request" in str(error)
