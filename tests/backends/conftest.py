"""Shared fixtures for the llama.cpp backend tests: one small-context engine on the bundled model."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.base import ModelSpec
from backends.llama.models.bundled import bundled_model_path

LLAMA_SPEC = ModelSpec(device="cpu", n_ctx=1024, options=(("kv_size", 4096), ("n_seq_max", 32)))
"""The bundled SmolLM2 on a real llama.cpp engine (context 1024, 4096 shared KV cells)."""
EXACT_SPEC = ModelSpec(device="cpu", n_ctx=1024, flash_attn=True, options=(("kv_size", 2048), ("n_seq_max", 8)))
"""The same with flash attention on: repeated requests reproduce each other bit for bit."""


def _engine(spec: ModelSpec) -> Iterator[object]:
    from backends.llama.worker.llama_backend import LlamaBackend

    backend = LlamaBackend(bundled_model_path(), spec)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def llama() -> Iterator[object]:
    """The bundled SmolLM2 on a real llama.cpp engine (LLAMA_SPEC), shared by the session."""
    yield from _engine(LLAMA_SPEC)


@pytest.fixture(scope="session")
def exact_llama() -> Iterator[object]:
    """The same with flash attention on (EXACT_SPEC): tests can compare the texts of separate requests exactly."""
    yield from _engine(EXACT_SPEC)


@pytest.fixture
def fresh_llama() -> Iterator[object]:
    """`llama` on an engine of its own (see fresh_exact_llama)."""
    yield from _engine(LLAMA_SPEC)


@pytest.fixture
def fresh_exact_llama() -> Iterator[object]:
    """`exact_llama` on an engine of its own, for a test that compares two generations bit for bit: after other
    tests the session's engine holds cached prompts, a fresh prompt's KV cells land elsewhere and flash attention
    sums them in another order, so two requests may round apart and a near-tie between tokens flips."""
    yield from _engine(EXACT_SPEC)


@pytest.fixture
def stopped() -> Iterator[list[int]]:
    """Process ids of engine workers a test stopped with SIGSTOP: continued and killed at teardown whatever happened
    (only while the id is still an engine worker's: an id may be reused once its process ended)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            if b"worker_main" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


@pytest.fixture
def quick_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine workers watched under a 3 s heartbeat rule (liveness_helpers.STALL_S; a studio subprocess inherits it)."""
    monkeypatch.setenv("METAGEN_ENGINE_STALL_S", "3")
