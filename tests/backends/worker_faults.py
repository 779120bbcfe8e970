"""Faults planted in a real engine worker for the liveness tests (imported inside the worker only, before its main):
answers that cannot be pickled or unpickled, and an abort with a message on stderr as llama.cpp's GGML_ASSERT does."""

from __future__ import annotations

import os
import signal
import sys
import threading
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

ABORT_LINE = "/src/ggml.c:1234: GGML_ASSERT(ctx->mem_buffer != NULL) failed"
"""What the planted abort writes on stderr before it aborts (a line as llama.cpp writes it)."""


def worker_code(original: str) -> str:
    """The worker's `-c` program with these faults installed after its sys.path is set up."""
    marker = "from backends.llama.worker.worker_main import main"
    assert marker in original, "the worker's program changed: update worker_faults.worker_code"
    return original.replace(marker, f"sys.path.insert(0, {str(HERE)!r}); import worker_faults; "
                                     f"worker_faults.install(); {marker}")


def _alien() -> Any:
    """An object of a class only this worker has (pickled by reference to a module the studio lacks)."""
    module = types.ModuleType("metagen_worker_only")
    sys.modules[module.__name__] = module

    class Alien:
        pass

    Alien.__module__ = module.__name__
    Alien.__qualname__ = "Alien"
    module.Alien = Alien  # type: ignore[attr-defined]
    return Alien()


def _abort(_signum: int, _frame: Any) -> None:
    os.write(2, f"{ABORT_LINE}\n".encode())
    os.abort()


def install() -> None:
    """tokenize("lock") answers a lock, tokenize("local") a local function, tokenize("alien") an object the studio
    cannot unpickle; SIGUSR1 writes ABORT_LINE on stderr and aborts."""
    from backends.llama.worker.llama_backend import LlamaBackend

    original = LlamaBackend.tokenize

    def tokenize(self: Any, text: str) -> Any:
        if text == "lock":
            return threading.Lock()
        if text == "local":
            return lambda: None
        if text == "alien":
            return _alien()
        return original(self, text)

    LlamaBackend.tokenize = tokenize  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR1, _abort)
