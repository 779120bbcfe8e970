"""Shared fixtures for the llama.cpp backend tests: one small-context engine on the bundled model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backends.base import ModelSpec
from backends.bundled import bundled_model_path


@pytest.fixture(scope="session")
def llama() -> Iterator[object]:
    """The bundled SmolLM2 on a real llama.cpp engine (context 1024, 4096 shared KV cells)."""
    from backends.llama_backend import LlamaBackend

    backend = LlamaBackend(
        bundled_model_path(),
        ModelSpec(device="cpu", n_ctx=1024, options=(("kv_size", 4096), ("n_seq_max", 32))),
    )
    yield backend
    backend.close()
