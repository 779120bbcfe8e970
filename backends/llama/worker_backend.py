"""The studio's side of an engine worker: a backend whose requests run in a process of their own (one per loaded
model), with typed methods for what worker_protocol's table says the worker serves; a worker that dies or hangs fails
only its requests in flight and restarts on the next request, and no lock is held while a model loads."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from backends.base import (
    BackendError,
    CancelledError,
    CancelToken,
    ChoiceResult,
    EngineStoppedError,
    GenerateResult,
    ModelBrokenError,
    ModelSpec,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    StepLogprobsResult,
    TokenCallback,
)
from backends.beam_search import BeamResult, BeamSettings
from backends.llama import worker_protocol as wp
from backends.llama.build_facts import signal_name
from backends.llama.engine_stops import EngineStop, StopCounter, broken_error
from backends.llama.models.tool_prompt import file_tool_prompt
from backends.llama.worker_process import UNLOADED, WorkerProcess
from backends.tools.types import ToolRequest

log = logging.getLogger(__name__)

ENGINE_PROCESS_ENV = "METAGEN_ENGINE_PROCESS"
"""Environment variable: `0` runs llama.cpp inside the studio's process (for debugging); anything else, or unset,
runs each loaded model in a worker process of its own."""

STATUS_WAIT_S = 5.0
"""How long info() and engine_stats() wait for a worker's answer before answering without it."""


def engine_process_enabled() -> bool:
    """Whether models run in worker processes (the default) or in the studio's own ($METAGEN_ENGINE_PROCESS=0)."""
    return os.environ.get(ENGINE_PROCESS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def stop_cause(exitcode: int | None) -> str:
    """'SIGSEGV' for a process ended by a signal, 'exit status 3' otherwise (build_facts.signal_name)."""
    return "the pipe to it closed" if exitcode is None else signal_name(exitcode)


SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""A worker ended by one of these was stopped with its studio (a clean `metagen serve` shutdown): no crash."""


class _EngineWorkerBackend:
    """What every worker-hosted backend shares: the worker's life (start, restart, stops counted), requests by the
    protocol table, identity and memory answered from the worker's ready message. `stops` is the model's count of
    stops in a row (the model pool hands in one that outlives a failed load); `wait=False` returns as soon as the
    worker process started (call wait_ready before anything else)."""

    kind = "llama"

    def __init__(self, path: str | Path, spec: ModelSpec | None = None, device: dict[str, Any] | None = None, *,
                 stops: StopCounter | None = None, liveness: wp.Liveness | None = None, wait: bool = True) -> None:
        self.path = Path(path).expanduser().resolve()
        self.spec = spec or ModelSpec(source="path", path=str(self.path))
        self.device_request = dict(device) if device is not None else None
        self.liveness = liveness or wp.liveness_from_env()
        self.stops = stops or StopCounter()
        self.weights: dict[str, Any] | None = None
        """Which weights these are and why (set by the model pool, as on LlamaBackend)."""
        self._lock = threading.Lock()
        """Held only to pick or start a worker (never while one loads, never by a failing request)."""
        self._count_lock = threading.Lock()
        self._closed = False
        self._in_flight = 0
        self.restarts = 0
        self._worker: WorkerProcess | None = WorkerProcess(self)
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self.close()
                raise

    # -- the process -----------------------------------------------------------------------------------------

    @property
    def what(self) -> str:
        return f"the {wp.KIND_NAMES.get(self.kind, 'engine')} for {self.path.name}"

    def load_order(self) -> dict[str, Any]:
        """What the worker loads (its first message)."""
        return {"kind": self.kind, "path": str(self.path), "spec": self.spec, "device": self.device_request,
                "log_level": logging.getLogger().getEffectiveLevel(), "beat_s": self.liveness.beat_s}

    def worker_stopped(self, worker: WorkerProcess, exitcode: int | None) -> EngineStoppedError:
        """Called by a worker's reader when its process ended unasked (or the watch ended it): counted, logged, and
        the error for its requests. Takes no lock of this backend, so it never waits behind a load."""
        ended = worker.ended
        stop = EngineStop(self.what, self.path.name, ended[0] if ended else stop_cause(exitcode),
                          when="while loading" if worker.loading else "", last_words=worker.last_words(),
                          counted=ended[1] if ended else True, ended_by_studio=ended is not None)
        if not ended:
            asked = exitcode is not None and -exitcode in SHUTDOWN_SIGNALS
            log.log(logging.INFO if asked else logging.ERROR, "%s", stop.message)
        return self.stops.record(stop)

    def wait_ready(self, cancel: CancelToken | None = None) -> None:
        """Wait (with `cancel`) until a worker is ready, starting one if none runs."""
        self._live_worker(cancel)

    def _live_worker(self, cancel: CancelToken | None) -> WorkerProcess:
        """The ready worker, (re)starting it when needed; the lock is held only to pick or start one, never while
        it loads: concurrent callers wait on the same start, each with its own cancel."""
        while True:
            with self._lock:
                if self._closed:
                    raise BackendError(UNLOADED)
                if self.stops.broken is not None:
                    raise broken_error(self.path.name, self.stops.broken)
                worker = self._worker
                if worker is None or not worker.alive or worker.ended is not None:
                    if worker is not None:
                        self.restarts += 1
                        log.info("restarting %s", self.what)
                    worker = self._worker = WorkerProcess(self)
            worker.wait_settled_cancels(cancel)
            ready = worker.wait_ready(cancel)
            if worker.usable:
                self._adopt(ready)
                return worker

    def _adopt(self, ready: dict[str, Any]) -> None:
        self._model_id: str = ready["model_id"]
        self.device: dict[str, Any] = ready["device"]
        self.file_info = ready["file_info"]
        self.fingerprint: str = ready["fingerprint"]
        self.n_ctx = ready["n_ctx"]
        self._memory_bytes: int = ready["memory_bytes"]

    @property
    def pid(self) -> int | None:
        """The worker process's id while one runs."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive else None

    # -- requests --------------------------------------------------------------------------------------------

    def _call(self, name: str, *args: Any, cancel: CancelToken | None = None,
              on_token: TokenCallback | None = None, **kwargs: Any) -> Any:
        method = wp.method(self.kind, name)
        if cancel is not None:
            cancel.raise_if_cancelled()
        if method.engine_work:
            with self._count_lock:
                self._in_flight += 1
        streamed: list[bool] = []

        def relay(index: int, text: str) -> None:
            streamed.append(True)
            if on_token is not None:
                on_token(index, text)

        try:
            for attempt in (1, 2):
                worker = self._live_worker(cancel)
                if cancel is not None:
                    cancel.raise_if_cancelled()  # it may have fired while the worker (re)started
                try:
                    value = worker.request(method, args, kwargs, cancel if method.cancellable else None,
                                           relay if on_token is not None else None)
                except EngineStoppedError as exc:
                    # a request that got nothing yet from a worker that stopped (a hang the watch ended, a crash)
                    # runs once more on a fresh worker: the caller sees an answer, not the stop
                    if attempt == 2 or streamed or isinstance(exc, ModelBrokenError) or (
                            cancel is not None and cancel.cancelled):
                        raise
                    log.warning("%s: %s; trying the request once more on a fresh worker", self.what, exc)
                    continue
                if method.engine_work:  # an engine request went through (tokenizing alone proves little)
                    self.stops.succeeded()
                return value
            raise AssertionError("unreachable")
        finally:
            if method.engine_work:
                with self._count_lock:
                    self._in_flight -= 1

    def _status(self, name: str) -> Any:
        """A status answer from the running worker, never starting one: None when none is ready or it does not
        answer within STATUS_WAIT_S."""
        worker = self._worker
        if worker is None or not worker.usable:
            return None
        try:
            return worker.request(wp.method(self.kind, name), (), {}, deadline_s=STATUS_WAIT_S)
        except (BackendError, CancelledError):
            return None

    def generate(self, prompt: Prompt, params: SamplingParams, n: int = 1, seeds: Sequence[int] | None = None,
                 on_token: TokenCallback | None = None, cancel: CancelToken | None = None) -> GenerateResult:
        return self._call("generate", prompt, params, n=n, seeds=list(seeds) if seeds is not None else None,  # type: ignore[no-any-return]
                          on_token=on_token, cancel=cancel)

    def score(self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None) -> ScoreResult:
        return self._call("score", prefix, list(continuations), cancel=cancel)  # type: ignore[no-any-return]

    def choice_logprobs(self, prompt: Prompt, choices: Sequence[str],
                        cancel: CancelToken | None = None) -> ChoiceResult:
        return self._call("choice_logprobs", prompt, list(choices), cancel=cancel)  # type: ignore[no-any-return]

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        return self._call("render_prompt", prompt, add_generation_prompt)  # type: ignore[no-any-return]

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        """Rendered here in the studio's process from the file's header (no engine call, no model load)."""
        return file_tool_prompt(self.path, messages, request, add_generation_prompt)

    def tokenize(self, text: str) -> list[int]:
        return self._call("tokenize", text)  # type: ignore[no-any-return]

    # -- identity, memory, state -----------------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return self._model_id

    def memory_bytes(self) -> int:
        """Weights plus KV cache of the loaded model (what unloading it frees), as the worker measured them."""
        return self._memory_bytes

    @property
    def busy(self) -> bool:
        return not self._closed and self._in_flight > 0

    @property
    def broken(self) -> str | None:
        """Why this model is marked broken, or None."""
        return self.stops.broken

    @property
    def last_stop(self) -> str | None:
        """How the worker last stopped (with its last words on stderr), or None."""
        last = self.stops.last
        return last.message if last is not None else None

    def stderr_tail(self) -> list[str]:
        worker = self._worker
        return list(worker.stderr_tail) if worker is not None else []

    def info(self) -> dict[str, Any]:
        """The worker's own info plus its process's story; answered here (never restarting a worker) when none runs
        or it does not answer."""
        process = {"pid": self.pid, "restarts": self.restarts, "crashes_in_a_row": self.stops.in_a_row,
                   "last_stop": self.last_stop, "broken": self.broken, "stderr_tail": self.stderr_tail()[-5:]}
        info = self._status("info")
        if info is not None:
            info = dict(info)
            if self.weights is not None:
                info["weights"] = self.weights
            info["process"] = process
            return info  # type: ignore[no-any-return]
        return {"backend": "llama.cpp", "model_id": getattr(self, "_model_id", self.path.name),
                "loaded": not self._closed, "device": dict(getattr(self, "device", {})),
                "memory_bytes": getattr(self, "_memory_bytes", 0), "weights": self.weights, "process": process}

    def close(self) -> None:
        """End the worker (its requests in flight fail with a clear error), so its memory goes back to the system."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()


class WorkerBackend(_EngineWorkerBackend):
    """A generating model (LlamaBackend) in a worker process: the LLMBackend protocol plus beam search, step
    log-probabilities, single tokens and the engine's counters; its speculative draft model in the same process."""

    kind = "llama"

    def beam_search(self, prompt: Prompt, params: SamplingParams, settings: BeamSettings,
                    cancel: CancelToken | None = None) -> BeamResult:
        return self._call("beam_search", prompt, params, settings, cancel=cancel)  # type: ignore[no-any-return]

    def step_logprobs(self, sequences: Sequence[Sequence[str]], tokens: Sequence[str],
                      cancel: CancelToken | None = None) -> StepLogprobsResult:
        return self._call("step_logprobs", [list(s) for s in sequences], list(tokens), cancel=cancel)  # type: ignore[no-any-return]

    def single_token(self, text: str) -> int:
        return self._call("single_token", text)  # type: ignore[no-any-return]

    def engine_stats(self) -> dict[str, Any]:
        """The engine's counters ({} while no worker runs or it does not answer; never starts one)."""
        return self._status("engine_stats") or {}


class RankWorkerBackend(_EngineWorkerBackend):
    """A `pooling: rank` model (RankBackend) in a worker process: one score per document."""

    kind = "rank"

    def rank(self, query: str, documents: Sequence[str], cancel: CancelToken | None = None) -> RankResult:
        return self._call("rank", query, list(documents), cancel=cancel)  # type: ignore[no-any-return]

    def pair_tokens(self, query: str, document: str, query_tokens: list[int] | None = None) -> list[int]:
        return self._call("pair_tokens", query, document, query_tokens)  # type: ignore[no-any-return]


def load_llama(path: Path, spec: ModelSpec, device: dict[str, Any], *, stops: StopCounter | None = None,
               wait: bool = True) -> Any:
    """The model pool's loader: the model in an engine worker process (default), or a LlamaBackend in this process
    when $METAGEN_ENGINE_PROCESS=0."""
    if engine_process_enabled():
        return WorkerBackend(path, spec, device, stops=stops, wait=wait)
    from backends.llama.worker.llama_backend import LlamaBackend

    return LlamaBackend(path, spec, device)


def load_rank(path: Path, spec: ModelSpec) -> Any:
    """A `pooling: rank` model in a worker process of its own (default), or a RankBackend in this process when
    $METAGEN_ENGINE_PROCESS=0."""
    if engine_process_enabled():
        return RankWorkerBackend(path, spec)
    from backends.llama.worker.rank_backend import RankBackend

    return RankBackend(path, spec)
