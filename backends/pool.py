"""The model pool: one loaded llama.cpp model per (file, device settings), shared by every node and run,
unloaded on request or least-recently-used first when a memory budget is exceeded."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.base import BackendError, EngineStoppedError, LLMBackend, ModelBrokenError, ModelSpec
from backends.llama.devices import resolve_device
from backends.llama.models.bundled import model_path
from backends.llama.models.cpu_weights import WeightsChoice, WeightsChooser
from backends.llama.worker.speculative import speculation_summary
from backends.llama.worker_backend import CRASHES_BEFORE_BROKEN, load_llama

log = logging.getLogger(__name__)

POOL_MEMORY_ENV = "METAGEN_POOL_MEMORY"
"""Environment variable: the pool's memory budget in bytes (suffixes K, M, G accepted, e.g. `4G`)."""
MIN_DEFAULT_BUDGET = 2 * 1024**3

Loader = Callable[[Path, ModelSpec, dict[str, Any]], Any]
"""Builds a backend for (weights file, spec, device): a WorkerBackend (or a LlamaBackend in-process)."""


def _total_ram_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def parse_size(text: str) -> int:
    """'4G' / '512M' / '1000000' -> bytes; raises ValueError on anything else."""
    value = text.strip().upper().removesuffix("B")
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}.get(value[-1:], 1)
    number = float(value[:-1] if scale != 1 else value)
    if number <= 0:
        raise ValueError(f"a memory budget must be positive, got {text!r}")
    return int(number * scale)


def default_memory_budget() -> int:
    """$METAGEN_POOL_MEMORY when set and valid, else max(2 GiB, half the machine's RAM)."""
    env = os.environ.get(POOL_MEMORY_ENV, "").strip()
    if env:
        try:
            return parse_size(env)
        except ValueError:
            log.warning("ignoring %s=%r: give a size in bytes such as 4G or 4000000000", POOL_MEMORY_ENV, env)
    ram = _total_ram_bytes()
    return max(MIN_DEFAULT_BUDGET, ram // 2 if ram else 0)


@dataclass
class _Entry:
    key: str
    backend: Any
    path: Path
    weights: WeightsChoice | None
    device: dict[str, Any]
    loaded_at: float
    last_used: float


class ModelPool:
    """Thread-safe cache of loaded models. `memory_budget_bytes` (None = `default_memory_budget()`) bounds
    the weights plus KV caches kept loaded: before a new model loads, the least recently used idle models
    are unloaded until it fits, and a model that cannot fit beside busy ones is refused (BackendError).
    `loader` builds a backend (by default `load_llama`: each model in an engine worker process of its own, or
    in this process with $METAGEN_ENGINE_PROCESS=0; tests pass a stub). A model whose engine stops
    CRASHES_BEFORE_BROKEN times in a row is marked broken (`broken()`) and refused until it is unloaded.
    `weights_dir` is where re-quantised CPU copies and their measurements are kept
    (backends/llama/models/cpu_weights.py; the app passes <models>/.cpu-weights); without it every model runs its
    original weights."""

    def __init__(self, memory_budget_bytes: int | None = None, loader: Loader | None = None,
                 weights_dir: Path | None = None) -> None:
        self.memory_budget_bytes = default_memory_budget() if memory_budget_bytes is None else memory_budget_bytes
        self._loader: Loader = loader or load_llama
        self.weights = WeightsChooser(weights_dir)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._broken: dict[str, tuple[str, str]] = {}
        """Pool key -> (file name, reason) of models refused until unloaded."""
        self._load_stops: dict[str, int] = {}
        """Pool key -> engine stops in a row while loading."""
        self._lock = threading.RLock()

    @staticmethod
    def key_for(path: Path, device: dict[str, Any], spec: ModelSpec) -> str:
        settings = ",".join(f"{k}={device[k]}" for k in sorted(device) if k != "requested")
        options = ",".join(f"{k}={v}" for k, v in spec.options)
        speculative = f"|speculative={spec.speculative}" if spec.speculative else ""
        return f"{path}|{settings}|{options}{speculative}"

    def get(self, spec: ModelSpec) -> LLMBackend:
        """The loaded backend for this spec, loading it on first use (and, for `cpu_weights: auto` on a file
        type without a fast CPU path, making and measuring a Q8_0 copy the first time on this machine)."""
        source = model_path(spec)
        device = resolve_device(spec)
        with self._lock:
            choice = self.weights.choose(source, spec, device, together=lambda: self.room_for_probe(source))
            path = Path(choice.path)
            key = self.key_for(path, device, spec)
            entry = self._entries.get(key)
            if entry is not None and getattr(entry.backend, "broken", None):
                self._broken[key] = (path.name, entry.backend.broken)
                self._close(key)
                entry = None
            if key in self._broken:
                raise ModelBrokenError(f"{path.name} is marked broken: {self._broken[key][1]}")
            if entry is None:
                self._make_room(path, key)
                started = time.perf_counter()
                backend = self._load(key, path, self._with_draft_weights(spec, device), device)
                backend.weights = choice.to_json()
                now = time.time()
                entry = _Entry(key, backend, path, choice, device, now, now)
                self._entries[key] = entry
                log.info("loaded %s in %.2fs", backend.model_id, time.perf_counter() - started)
                self._enforce_budget(keep=key)
            entry.last_used = time.time()
            self._entries.move_to_end(key)
            return entry.backend

    def _load(self, key: str, path: Path, spec: ModelSpec, device: dict[str, Any]) -> Any:
        """The loader's backend; an engine that stops while loading CRASHES_BEFORE_BROKEN times in a row marks the
        model broken."""
        try:
            backend = self._loader(path, spec, device)
        except EngineStoppedError as exc:
            stops = self._load_stops.get(key, 0) + 1
            self._load_stops[key] = stops
            if stops >= CRASHES_BEFORE_BROKEN:
                reason = f"{str(exc).split(';')[0]} while loading, {stops} times in a row; unload the model to " \
                         "try it again, and check the file and this machine's build with `metagen doctor`"
                self._broken[key] = (path.name, reason)
                self._load_stops.pop(key, None)
                raise ModelBrokenError(f"{path.name} is marked broken: {reason}") from exc
            raise
        self._load_stops.pop(key, None)
        return backend

    def broken(self) -> dict[str, str]:
        """Models marked broken, file name -> the reason (their engine stopped several times in a row); a broken
        model is refused until it is unloaded (`unload(name)` or `unload()`)."""
        with self._lock:
            found = {name: reason for name, reason in self._broken.values()}
            for e in self._entries.values():
                reason = getattr(e.backend, "broken", None)
                if reason:
                    found[e.path.name] = reason
        return found

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
                "source_path": e.weights.source_path if e.weights else str(e.path),
                "weights": e.weights.to_json() if e.weights else None,
                "device": dict(e.backend.device),
                "size": e.backend.memory_bytes(),
                "loaded_at": e.loaded_at,
                "last_used": e.last_used,
                "busy": e.backend.busy,
                "speculative": speculation_summary(e.backend),
                "pid": getattr(e.backend, "pid", None),
                "broken": getattr(e.backend, "broken", None),
            }
            for e in entries
        ]

    def unload(self, key: str | None = None) -> int:
        """Unload one model (by pool key, model id, file path or file name) or, with None, all, ending its engine
        worker; a broken model so named is forgotten (it may load again). Returns how many were loaded."""
        with self._lock:
            if key is None:
                victims = list(self._entries)
                self._broken.clear()
            else:
                victims = [k for k, e in self._entries.items()
                           if key in (k, e.backend.model_id, str(e.path), e.path.name,
                                      e.weights and e.weights.source_path)]
                for k, (name, _) in list(self._broken.items()):
                    if key in (k, name) or k.startswith(f"{key}|"):
                        del self._broken[k]
            for victim in victims:
                self._close(victim)
        return len(victims)

    def close(self) -> None:
        self.unload(None)

    def total_bytes(self) -> int:
        with self._lock:
            return sum(e.backend.memory_bytes() for e in self._entries.values())

    def _with_draft_weights(self, spec: ModelSpec, device: dict[str, Any]) -> ModelSpec:
        """The spec with its speculative draft model (if any) pointed at the weights its `cpu_weights` picks, so
        a draft entry naming the target's file with `cpu_weights: q4_0` drafts with the quantised copy."""
        speculative = spec.speculative
        if speculative is None or speculative.draft is None:
            return spec
        draft = speculative.draft
        source = model_path(draft)
        choice = self.weights.choose(source, draft, device,
                                     together=lambda: self.room_for_probe(source))
        log.info("speculative draft %s: %s", speculative.draft_alias, choice.summary())
        resolved = dataclasses.replace(draft, source="path", path=choice.path)
        return dataclasses.replace(spec, speculative=dataclasses.replace(speculative, draft=resolved))

    def room_for_probe(self, source: Path) -> bool:
        """Whether measuring a source against its Q8_0 copy (about 2.5 times the source's size together) fits
        beside the loaded models; if not the two are measured one after the other."""
        try:
            needed = int(source.stat().st_size * 2.5)
        except OSError:
            return False
        return self.total_bytes() + needed <= self.memory_budget_bytes

    def _make_room(self, path: Path, key: str) -> None:
        """Unload idle models, least recently used first, until a model file of this size fits the budget;
        BackendError when the models in use leave no room for it."""
        try:
            needed = path.stat().st_size
        except OSError:
            needed = 0
        budget = self.memory_budget_bytes
        while self._entries and self.total_bytes() + needed > budget:
            victim = next((k for k, e in self._entries.items() if not e.backend.busy), None)
            if victim is None:
                raise BackendError(
                    f"Not enough model memory to load {path.name}: the models in use take "
                    f"{self.total_bytes() / 1e6:.0f} MB of the {budget / 1e6:.0f} MB budget and it needs about "
                    f"{needed / 1e6:.0f} MB. Wait for the running models to finish, or raise "
                    f"${POOL_MEMORY_ENV}.")
            log.info("unloading %s to make room for %s (memory budget %d bytes)",
                     self._entries[victim].backend.model_id, path.name, budget)
            self._close(victim)
        if needed > budget:
            log.warning("%s (%d bytes) is larger than the model memory budget (%d bytes); loading it alone",
                        path.name, needed, budget)

    def _enforce_budget(self, keep: str) -> None:
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
