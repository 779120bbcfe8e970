"""Model providers: turn a workflow's model specs into backends (llama.cpp pool, or the fake for dry runs)."""

from __future__ import annotations

from typing import Any

from backends.base import LLMBackend, ModelSpec


def fake_provider(**fake_kwargs: Any):  # type: ignore[no-untyped-def]
    """A provider that answers every model with one shared FakeBackend (dry runs and unit tests)."""
    from backends.fake import FakeBackend

    backend = FakeBackend(**fake_kwargs)

    def provide(spec: ModelSpec) -> LLMBackend:
        return backend

    return provide


def llama_provider(pool: Any = None):  # type: ignore[no-untyped-def]
    """The real provider: bundled/path specs go to a llama.cpp ModelPool (one loaded model per file and
    device settings per pool), `source: fake` specs to a seeded-echo FakeBackend."""
    from backends.fake import FakeBackend

    fake = FakeBackend()

    def provide(spec: ModelSpec) -> LLMBackend:
        nonlocal pool
        if spec.source == "fake":
            return fake
        if pool is None:
            from backends.pool import ModelPool

            pool = ModelPool()
        return pool.get(spec)

    return provide
