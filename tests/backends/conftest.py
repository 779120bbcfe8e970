"""Shared fixtures for the llama.cpp backend tests: one small-context engine on the bundled model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backends.base import ModelSpec
from backends.llama.models.bundled import bundled_model_path


@pytest.fixture(scope="session")
def llama() -> Iterator[object]:
    """The bundled SmolLM2 on a real llama.cpp engine (context 1024, 4096 shared KV cells)."""
    from backends.llama.worker.llama_backend import LlamaBackend

    backend = LlamaBackend(
        bundled_model_path(),
        ModelSpec(device="cpu", n_ctx=1024, options=(("kv_size", 4096), ("n_seq_max", 32))),
    )
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def exact_llama() -> Iterator[object]:
    """The same with flash attention on: repeated requests reproduce each other bit for bit, so tests can
    compare the texts of separate requests exactly."""
    from backends.llama.worker.llama_backend import LlamaBackend

    backend = LlamaBackend(
        bundled_model_path(),
        ModelSpec(device="cpu", n_ctx=1024, flash_attn=True, options=(("kv_size", 2048), ("n_seq_max", 8))),
    )
    yield backend
    backend.close()
