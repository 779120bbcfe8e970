"""The model pool: one loaded llama.cpp model per (file, device settings), shared by every node and run,
unloaded on request or least-recently-used first when a memory budget is exceeded."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.base import BackendError, LLMBackend, ModelFileError, ModelSpec
from backends.bundled import bundled_model_path
from backends.devices import resolve_device
from backends.llama_backend import LlamaBackend

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    key: str
    backend: LlamaBackend
    path: Path
    device: dict[str, Any]
    loaded_at: float
    last_used: float


def model_path(spec: ModelSpec) -> Path:
    """The GGUF file a spec names: the bundled SmolLM2, or a local path (must exist)."""
    if spec.source == "bundled":
        return bundled_model_path()
    if spec.source == "path":
        if not spec.path:
            raise ModelFileError("A model with source: path needs a `path:` to a .gguf file.")
        path = Path(spec.path).expanduser()
        if not path.exists():
            raise ModelFileError(f"Model file {path} does not exist. Check the path in the workflow's models section.")
        return path.resolve()
    raise BackendError(f"The llama.cpp pool cannot load a model with source {spec.source!r}; use bundled or path.")


class ModelPool:
    """Thread-safe cache of loaded models. `memory_budget_bytes` (None = unlimited) bounds the weights plus
    KV caches kept loaded; the least recently used idle model is unloaded first."""

    def __init__(self, memory_budget_bytes: int | None = None) -> None:
        self.memory_budget_bytes = memory_budget_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.RLock()

    @staticmethod
    def key_for(path: Path, device: dict[str, Any], spec: ModelSpec) -> str:
        settings = ",".join(f"{k}={device[k]}" for k in sorted(device) if k != "requested")
        options = ",".join(f"{k}={v}" for k, v in spec.options)
        return f"{path}|{settings}|{options}"

    def get(self, spec: ModelSpec) -> LLMBackend:
        """The loaded backend for this spec, loading it on first use."""
        path = model_path(spec)
        device = resolve_device(spec)
        key = self.key_for(path, device, spec)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                started = time.perf_counter()
                backend = LlamaBackend(path, spec, device)
                now = time.time()
                entry = _Entry(key, backend, path, device, now, now)
                self._entries[key] = entry
                log.info("loaded %s in %.2fs", backend.model_id, time.perf_counter() - started)
                self._enforce_budget(keep=key)
            entry.last_used = time.time()
            self._entries.move_to_end(key)
            return entry.backend

    def loaded(self) -> list[dict[str, Any]]:
        """What is loaded now: model id, file, device settings, memory and last use."""
        with self._lock:
            entries = list(self._entries.values())
        return [
            {
                "key": e.key,
                "model": e.backend.model_id,
                "name": e.backend.file_info.name,
                "path": str(e.path),
                "device": dict(e.backend.device),
                "size": e.backend.memory_bytes(),
                "loaded_at": e.loaded_at,
                "last_used": e.last_used,
                "busy": e.backend.busy,
            }
            for e in entries
        ]

    def unload(self, key: str | None = None) -> int:
        """Unload one model (by pool key, model id or file path) or, with None, all; returns how many."""
        with self._lock:
            if key is None:
                victims = list(self._entries)
            else:
                victims = [k for k, e in self._entries.items()
                           if key in (k, e.backend.model_id, str(e.path))]
            for victim in victims:
                self._close(victim)
        return len(victims)

    def close(self) -> None:
        self.unload(None)

    def total_bytes(self) -> int:
        with self._lock:
            return sum(e.backend.memory_bytes() for e in self._entries.values())

    def _enforce_budget(self, keep: str) -> None:
        if self.memory_budget_bytes is None:
            return
        while self.total_bytes() > self.memory_budget_bytes:
            victim = next((k for k, e in self._entries.items() if k != keep and not e.backend.busy), None)
            if victim is None:
                log.warning("model memory %s exceeds the budget %s, but every other model is in use",
                            self.total_bytes(), self.memory_budget_bytes)
                return
            log.info("unloading %s to stay within the memory budget", self._entries[victim].backend.model_id)
            self._close(victim)

    def _close(self, key: str) -> None:
        entry = self._entries.pop(key)
        entry.backend.close()

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
