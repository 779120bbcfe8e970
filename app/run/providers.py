"""Model providers: turn a workflow's model specs into backends (llama.cpp pool, remote servers, or the fake)."""

from __future__ import annotations

import threading
from typing import Any

from backends.base import LLMBackend, ModelSpec


def fake_provider(**fake_kwargs: Any):  # type: ignore[no-untyped-def]
    """A provider that answers every model with one shared FakeBackend (dry runs and unit tests)."""
    from backends.fake import FakeBackend

    backend = FakeBackend(**fake_kwargs)

    def provide(spec: ModelSpec) -> LLMBackend:
        return backend

    return provide


def remote_key(spec: ModelSpec) -> tuple[Any, ...]:
    """What makes two `source: openai` specs the same remote backend (device settings play no part)."""
    return (spec.base_url, spec.replicas, spec.model, spec.api_key_env, spec.max_concurrency, spec.timeout_s,
            spec.context_length,
            spec.options, spec.api)


class LlamaProvider:
    """The real provider: bundled/path specs go to a llama.cpp ModelPool (one loaded model per file and
    device settings per pool), `source: openai` specs to one OpenAIBackend per server, model and settings,
    `source: fake` specs to a seeded-echo FakeBackend; `pooling: rank` specs to one RankBackend per file and
    settings (kept beside the pool: a rank model never generates), in a worker process of its own like the pool's.
    `close()` ends the engine workers it started (tests close what they open)."""

    def __init__(self, pool: Any = None) -> None:
        from backends.fake import FakeBackend

        self._fake = FakeBackend()
        self._pool = pool
        self._own_pool = pool is None
        self._remotes: dict[tuple[Any, ...], LLMBackend] = {}
        self._rankers: dict[ModelSpec, LLMBackend] = {}
        self._lock = threading.Lock()

    def __call__(self, spec: ModelSpec) -> LLMBackend:
        if spec.source == "fake":
            return self._fake
        if spec.source == "openai":
            return self._remote(spec)
        if spec.pooling == "rank":
            return self._ranker(spec)
        return self.pool().get(spec)

    def _remote(self, spec: ModelSpec) -> LLMBackend:
        from backends.remote.openai_backend import OpenAIBackend
        from backends.remote.openai_replicas import ReplicaBackend

        with self._lock:
            key = remote_key(spec)
            if key not in self._remotes:
                self._remotes[key] = ReplicaBackend(spec) if spec.replicas else OpenAIBackend(spec)
            return self._remotes[key]

    def _ranker(self, spec: ModelSpec) -> LLMBackend:
        from backends.llama.worker_backend import load_rank
        from backends.pool import model_path

        with self._lock:
            if spec not in self._rankers:
                self._rankers[spec] = load_rank(model_path(spec), spec)
            return self._rankers[spec]

    def pool(self) -> Any:
        """The model pool (made on first use, in the models folder's CPU-weights place)."""
        with self._lock:
            if self._pool is None:
                from app.platform.paths import models_dir
                from backends.llama.models.cpu_weights import WEIGHTS_SUBDIR
                from backends.pool import ModelPool

                self._pool = ModelPool(weights_dir=models_dir() / WEIGHTS_SUBDIR)
            return self._pool

    def remotes(self) -> list[LLMBackend]:
        with self._lock:
            return list(self._remotes.values())

    def prefetch(self, spec: ModelSpec) -> None:
        """Start loading a local model in its engine worker now, without waiting (a no-op for other sources and
        with the engine in this process): the worker's start overlaps whatever the caller does next."""
        from backends.llama.worker_backend import engine_process_enabled

        if spec.source in ("fake", "openai") or spec.pooling == "rank" or not engine_process_enabled():
            return
        prefetch_into = getattr(self.pool(), "prefetch", None)
        if callable(prefetch_into):
            prefetch_into(spec)

    def close(self) -> None:
        """Unload what this provider loaded: the engine workers of the pool it made (a pool it was given is its
        owner's to close), its rank models and its remote clients. It makes new ones if asked again."""
        with self._lock:
            made = [*self._rankers.values(), *self._remotes.values()]
            self._rankers.clear()
            self._remotes.clear()
            pool, self._pool = (self._pool, None) if self._own_pool else (None, self._pool)
        for backend in made:
            closing = getattr(backend, "close", None)
            if callable(closing):
                closing()
        if pool is not None:
            pool.close()


def llama_provider(pool: Any = None) -> LlamaProvider:
    """The real provider (LlamaProvider), on `pool` when given (its owner closes it), else on one it makes."""
    return LlamaProvider(pool)


def remote_backends(provider: Any) -> list[LLMBackend]:
    """The remote backends a provider has made so far (for the Models tab's server table); [] when it keeps none."""
    remotes = getattr(provider, "remotes", None)
    return list(remotes()) if callable(remotes) else []
