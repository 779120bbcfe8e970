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


def llama_provider(pool: Any = None):  # type: ignore[no-untyped-def]
    """The real provider: bundled/path specs go to a llama.cpp ModelPool (one loaded model per file and
    device settings per pool), `source: openai` specs to one OpenAIBackend per server, model and settings,
    `source: fake` specs to a seeded-echo FakeBackend; `pooling: rank` specs to one RankBackend per file and
    settings (kept beside the pool: a rank model never generates), in a worker process of its own like the pool's.
    `provide.close()` ends the engine workers it started (tests close what they open)."""
    from backends.fake import FakeBackend

    fake = FakeBackend()
    remotes: dict[tuple[Any, ...], LLMBackend] = {}
    remotes_lock = threading.Lock()
    rankers: dict[ModelSpec, LLMBackend] = {}

    def provide(spec: ModelSpec) -> LLMBackend:
        if spec.source == "fake":
            return fake
        if spec.source == "openai":
            from backends.remote.openai_backend import OpenAIBackend
            from backends.remote.openai_replicas import ReplicaBackend

            with remotes_lock:
                key = remote_key(spec)
                if key not in remotes:
                    remotes[key] = ReplicaBackend(spec) if spec.replicas else OpenAIBackend(spec)
                return remotes[key]
        if spec.pooling == "rank":
            from backends.llama.worker_backend import load_rank
            from backends.pool import model_path

            with remotes_lock:
                if spec not in rankers:
                    rankers[spec] = load_rank(model_path(spec), spec)
                return rankers[spec]
        return the_pool().get(spec)

    def the_pool() -> Any:
        nonlocal pool
        with remotes_lock:
            if pool is None:
                from app.platform.paths import models_dir
                from backends.llama.models.cpu_weights import WEIGHTS_SUBDIR
                from backends.pool import ModelPool

                pool = ModelPool(weights_dir=models_dir() / WEIGHTS_SUBDIR)
            return pool

    def prefetch(spec: ModelSpec) -> None:
        """Start loading a local model in its engine worker now, without waiting (a no-op for other sources and
        with the engine in this process): the worker's start overlaps whatever the caller does next."""
        from backends.llama.worker_backend import engine_process_enabled

        if spec.source in ("fake", "openai") or spec.pooling == "rank" or not engine_process_enabled():
            return
        prefetch_into = getattr(the_pool(), "prefetch", None)
        if callable(prefetch_into):
            prefetch_into(spec)

    own_pool = pool is None

    def close() -> None:
        """Unload what this provider loaded: the engine workers of the pool it made (a pool it was given is its
        owner's to close), its rank models and its remote clients. It makes new ones if asked again."""
        nonlocal pool
        with remotes_lock:
            made = [*rankers.values(), *remotes.values()]
            rankers.clear()
            remotes.clear()
        for backend in made:
            closing = getattr(backend, "close", None)
            if callable(closing):
                closing()
        if own_pool and pool is not None:
            pool.close()
            pool = None

    provide.remotes = lambda: list(remotes.values())  # type: ignore[attr-defined]
    provide.close = close  # type: ignore[attr-defined]
    provide.prefetch = prefetch  # type: ignore[attr-defined]
    return provide


def remote_backends(provider: Any) -> list[LLMBackend]:
    """The remote backends a provider has made so far (for the Models tab's server table); [] when it keeps none."""
    remotes = getattr(provider, "remotes", None)
    return list(remotes()) if callable(remotes) else []
