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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.base import BackendError, CancelledError, CancelToken, LLMBackend, ModelBrokenError, ModelSpec
from backends.llama.devices import resolve_device
from backends.llama.engine_stops import StopCounter
from backends.llama.models.bundled import model_path
from backends.llama.models.cpu_weights import WeightsChoice, WeightsChooser
from backends.llama.worker.speculative import speculation_summary
from backends.llama.worker_backend import load_llama
from backends.llama.worker_process import fresh

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


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass
class _Entry:
    key: str
    backend: Any
    path: Path
    weights: WeightsChoice | None
    device: dict[str, Any]
    loaded_at: float
    last_used: float


@dataclass
class _Load:
    """A model being loaded: callers wait on `done` (each with its own cancel); no pool lock is held meanwhile."""

    key: str
    path: Path
    needed: int
    done: threading.Event = field(default_factory=threading.Event)
    backend: Any = None
    """The backend as soon as the loader made it (a worker backend exists, and can be closed, before it is ready)."""
    error: BaseException | None = None
    waiters: int = 0
    abandoned: bool = False


class ModelPool:
    """Thread-safe cache of loaded models. `memory_budget_bytes` (None = `default_memory_budget()`) bounds
    the weights plus KV caches kept loaded: before a new model loads, the least recently used idle models
    are unloaded until it fits, and a model that cannot fit beside busy ones is refused (BackendError).
    `loader` builds a backend (by default `load_llama`: each model in an engine worker process of its own, or
    in this process with $METAGEN_ENGINE_PROCESS=0; tests pass a stub). A model is loaded on a thread of its own
    while no pool lock is held (callers for it wait, each with its own cancel; other models and `unload` go on).
    A model whose engine stops CRASHES_BEFORE_BROKEN times in a row (loading or serving: one count per model,
    backends/llama/engine_stops.py) is marked broken (`broken()`) and refused until it is unloaded.
    `weights_dir` is where re-quantised CPU copies and their measurements are kept
    (backends/llama/models/cpu_weights.py; the app passes <models>/.cpu-weights); without it every model runs its
    original weights."""

    def __init__(self, memory_budget_bytes: int | None = None, loader: Loader | None = None,
                 weights_dir: Path | None = None) -> None:
        self.memory_budget_bytes = default_memory_budget() if memory_budget_bytes is None else memory_budget_bytes
        self._loader: Loader | None = loader
        self.weights = WeightsChooser(weights_dir)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._loading: dict[str, _Load] = {}
        self._broken: dict[str, tuple[str, str]] = {}
        """Pool key -> (file name, reason) of models refused until unloaded."""
        self._stops: dict[str, tuple[str, StopCounter]] = {}
        """Pool key -> (file name, its engine's stops in a row), kept across failed loads until unloaded."""
        self._lock = threading.RLock()
        self._choose_lock = threading.Lock()
        self._closing: list[Any] = []
        """Backends taken out of the pool under the lock, closed once it is released (a worker's close may take
        seconds, and every `get` would wait on the lock meanwhile)."""

    @staticmethod
    def key_for(path: Path, device: dict[str, Any], spec: ModelSpec) -> str:
        settings = ",".join(f"{k}={device[k]}" for k in sorted(device) if k != "requested")
        options = ",".join(f"{k}={v}" for k, v in spec.options)
        speculative = f"|speculative={spec.speculative}" if spec.speculative else ""
        return f"{path}|{settings}|{options}{speculative}"

    def get(self, spec: ModelSpec, cancel: CancelToken | None = None) -> LLMBackend:
        """The loaded backend for this spec, loading it on first use (and, for `cpu_weights: auto` on a file
        type without a fast CPU path, making and measuring a Q8_0 copy the first time on this machine). A caller
        waiting for a load returns with CancelledError when `cancel` fires; the load goes on for the others."""
        load, ready = self._find_or_start(spec)
        if ready is not None:
            return ready  # type: ignore[no-any-return]
        assert load is not None
        try:
            while not load.done.wait(0.05 if cancel is not None else 1.0):
                if cancel is not None and cancel.cancelled:
                    raise CancelledError(cancel.reason or "cancelled")
        finally:
            with self._lock:
                load.waiters -= 1
        if load.error is not None:
            raise fresh(load.error)
        with self._lock:
            entry = self._entries.get(load.key)
            if entry is not None and entry.backend is load.backend:
                entry.last_used = time.time()
        return load.backend  # type: ignore[no-any-return]

    def prefetch(self, spec: ModelSpec) -> None:
        """Start loading this spec's model on a thread of its own, not waiting for it (a command starts its models
        while it does its own start-up); a failure is what the next `get` raises."""

        def start() -> None:
            try:
                self._find_or_start(spec, wait=False)
            except Exception as exc:  # the run's own get says what is wrong
                log.debug("prefetching %s: %s", spec, exc)

        threading.Thread(target=start, daemon=True, name="model prefetch").start()

    def _find_or_start(self, spec: ModelSpec, wait: bool = True) -> tuple[_Load | None, Any]:
        """(None, the backend) when loaded, else (the load to wait for, None), starting it when none runs; a
        failed load nobody waited for (a prefetch) is claimed here. `wait=False`: do not count as a waiter."""
        source = model_path(spec)
        device = resolve_device(spec)
        with self._choose_lock:  # a first `auto` choice measures copies: one at a time, but never under _lock
            choice = self.weights.choose(source, spec, device, together=lambda: self.room_for_probe(source))
        path = Path(choice.path)
        key = self.key_for(path, device, spec)
        try:
            return self._find_or_start_locked(path, key, choice, spec, device, wait)
        finally:
            self._close_taken_out()

    def _find_or_start_locked(self, path: Path, key: str, choice: WeightsChoice, spec: ModelSpec,
                              device: dict[str, Any], wait: bool) -> tuple[_Load | None, Any]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and getattr(entry.backend, "broken", None):
                self._broken[key] = (path.name, entry.backend.broken)
                self._close(key)
                entry = None
            if key in self._broken:
                raise ModelBrokenError(f"{path.name} is marked broken: {self._broken[key][1]}", model=path.name)
            if entry is not None:
                entry.last_used = time.time()
                self._entries.move_to_end(key)
                return None, entry.backend
            load = self._loading.get(key)
            if load is not None and load.done.is_set():  # failed, and nobody waited for it
                del self._loading[key]
                if wait:
                    raise fresh(load.error or BackendError(f"loading {path.name} failed"))
                load = None
            if load is None:
                self._make_room(path, key)
                load = _Load(key, path, _file_size(path))
                self._loading[key] = load
                threading.Thread(target=self._run_load, args=(load, choice, spec, device), daemon=True,
                                 name=f"load {path.name}").start()
            if wait:
                load.waiters += 1
            return load, None

    def _run_load(self, load: _Load, choice: WeightsChoice, spec: ModelSpec, device: dict[str, Any]) -> None:
        """The load's thread: build the backend, then, under the lock, make it an entry (or close it when it was
        unloaded meanwhile)."""
        started = time.perf_counter()
        try:
            backend = self._build(load, self._with_draft_weights(spec, device), device)
            backend.weights = choice.to_json()
        except BaseException as exc:
            with self._lock:
                counted = self._stops.get(load.key)
                if counted is not None and counted[1].broken is not None:
                    self._broken[load.key] = (load.path.name, counted[1].broken)
                elif isinstance(exc, ModelBrokenError):  # a loader of its own marked it
                    self._broken[load.key] = (load.path.name, str(exc))
                if load.waiters or load.abandoned:
                    self._loading.pop(load.key, None)
                load.error = exc
                load.done.set()
            return
        load.backend = backend
        with self._lock:
            self._loading.pop(load.key, None)
            if load.abandoned:
                load.error = BackendError(f"{load.path.name} was unloaded while it loaded; get it again")
            else:
                now = time.time()
                self._entries[load.key] = _Entry(load.key, backend, load.path, choice, device, now, now)
                log.info("loaded %s in %.2fs", backend.model_id, time.perf_counter() - started)
                self._enforce_budget(keep=load.key)
            load.done.set()
        self._close_taken_out()
        if load.error is not None:
            backend.close()

    def _build(self, load: _Load, spec: ModelSpec, device: dict[str, Any]) -> Any:
        """The loader's backend; the default loader's worker gets the model's stop counter, and is reachable by
        `unload` (to end it) before it is ready."""
        if self._loader is not None:
            return self._loader(load.path, spec, device)
        with self._lock:
            _, stops = self._stops.setdefault(load.key, (load.path.name, StopCounter()))
        backend = load_llama(load.path, spec, device, stops=stops, wait=False)
        load.backend = backend
        if load.abandoned:
            backend.close()
        wait_ready = getattr(backend, "wait_ready", None)
        if callable(wait_ready):
            wait_ready()
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
                "last_stop": getattr(e.backend, "last_stop", None),
            }
            for e in entries
        ]

    def stops(self) -> dict[str, str]:
        """How each model's engine last stopped (file name -> the sentence, its last words on stderr included), for
        the models that stopped since they were loaded; `doctor` shows them."""
        with self._lock:
            return {name: counter.last.message for name, counter in self._stops.values() if counter.last is not None}

    def unload(self, key: str | None = None) -> int:
        """Unload one model (by pool key, model id, file path or file name) or, with None, all, ending its engine
        worker (one still loading is ended too); a broken model so named is forgotten (it may load again). Returns
        how many were loaded."""
        with self._lock:
            if key is None:
                victims = list(self._entries)
                loads = list(self._loading.values())
                self._broken.clear()
                self._stops.clear()
            else:
                victims = [k for k, e in self._entries.items()
                           if key in (k, e.backend.model_id, str(e.path), e.path.name,
                                      e.weights and e.weights.source_path)]
                loads = [load for k, load in self._loading.items()
                         if key in (k, str(load.path), load.path.name) or k.startswith(f"{key}|")]
                for table in (self._broken, self._stops):
                    for k, (name, _) in list(table.items()):
                        if key in (k, name) or k.startswith(f"{key}|") or k in victims:
                            del table[k]
            for load in loads:
                load.abandoned = True
                self._loading.pop(load.key, None)
            for victim in victims:
                self._close(victim)
        self._close_taken_out()
        for load in loads:  # a worker still loading ends now; its load's thread closes anything else it makes
            if load.backend is not None:
                load.backend.close()
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
        needed = _file_size(path)
        budget = self.memory_budget_bytes
        needed += sum(load.needed for load in self._loading.values())
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
        """Take a model out of the pool (under the lock); `_close_taken_out` closes it once the lock is released."""
        entry = self._entries.pop(key)
        self._closing.append(entry.backend)

    def _close_taken_out(self) -> None:
        """Close the backends `_close` took out, outside the lock: other models' `get` goes on meanwhile."""
        with self._lock:
            backends, self._closing = self._closing, []
        for backend in backends:
            try:
                backend.close()
            except Exception as exc:  # one worker's failed close must not keep the others open
                log.warning("closing %s: %s", getattr(backend, "model_id", backend), exc)

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
