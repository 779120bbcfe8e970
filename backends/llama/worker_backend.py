"""The studio's side of an engine worker: a backend whose requests run in a process of their own (one per loaded
model), multiplexed over one pipe with request ids; tokens, results and errors stream back, a cancel crosses as a
message, and a worker that dies fails only its requests in flight and restarts on the next request."""

from __future__ import annotations

import itertools
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
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
    SamplingParams,
    ScoreResult,
    TokenCallback,
)
from backends.llama.build_facts import signal_name
from backends.llama.worker.worker_main import WORKER_CODE, WORKER_PATH_ENV

log = logging.getLogger(__name__)

ENGINE_PROCESS_ENV = "METAGEN_ENGINE_PROCESS"
"""Environment variable: `0` runs llama.cpp inside the studio's process (for debugging); anything else, or unset,
runs each loaded model in a worker process of its own."""

CRASHES_BEFORE_BROKEN = 3
"""A model whose worker stops this many times in a row (no engine request succeeding between) is marked broken."""

CLOSE_WAIT_S = 5.0
"""How long closing waits for a worker to end by itself before killing it."""

_KIND_NAMES = {"llama": "llama.cpp engine", "rank": "llama.cpp rank engine"}


def engine_process_enabled() -> bool:
    """Whether models run in worker processes (the default) or in the studio's own ($METAGEN_ENGINE_PROCESS=0)."""
    return os.environ.get(ENGINE_PROCESS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def stop_cause(exitcode: int | None) -> str:
    """'SIGSEGV' for a process ended by a signal, 'exit status 3' otherwise (build_facts.signal_name)."""
    return "the pipe to it closed" if exitcode is None else signal_name(exitcode)


class _Worker:
    """One worker process and the thread that reads its pipe. The process is a fresh interpreter (exec'd, as
    multiprocessing's 'spawn' does, never a fork of this threaded process) that does not re-run the caller's main
    script, so a plain `import metagen` script without a `__main__` guard works."""

    def __init__(self, owner: WorkerBackend) -> None:
        self.owner = owner
        ours, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", WORKER_CODE, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, close_fds=True, env={**os.environ, WORKER_PATH_ENV: json.dumps(sys.path)})
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.send_lock = threading.Lock()
        self.pending: dict[int, queue.SimpleQueue[tuple[Any, ...]]] = {}
        self.pending_lock = threading.Lock()
        self.alive = True
        self.closing = False
        try:
            self.send(("load", 0, owner.kind, str(owner.path), owner.spec, owner.device_request,
                       logging.getLogger().getEffectiveLevel()))
        except OSError:
            pass  # it died at once: _wait_ready says how
        self.ready = self._wait_ready()
        self.reader = threading.Thread(target=self._read, daemon=True, name=f"engine-pipe {owner.path.name}")
        self.reader.start()

    @property
    def exitcode(self) -> int | None:
        return self.process.poll()

    def _wait_ready(self) -> dict[str, Any]:
        try:
            kind, _, value = self.conn.recv()
        except (EOFError, OSError):
            self.process.wait()
            self.alive = False
            self.conn.close()
            raise EngineStoppedError(self.owner.stopped_message(self.exitcode, "while loading")) from None
        if kind == "failed":
            self.alive = False
            self._end()
            self.conn.close()
            raise value
        return value  # type: ignore[no-any-return]

    def _end(self) -> None:
        """Wait for the process to end by itself, killing it after CLOSE_WAIT_S."""
        try:
            self.process.wait(CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            log.warning("the engine worker of %s did not end in %.0f s; killing it", self.owner.path.name,
                        CLOSE_WAIT_S)
            self.process.kill()
            self.process.wait()

    def send(self, message: tuple[Any, ...]) -> None:
        with self.send_lock:
            self.conn.send(message)

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            except Exception:  # a reply this process cannot unpickle: the stream stays framed, go on
                log.exception("an answer from the engine worker of %s could not be read", self.owner.path.name)
                continue
            with self.pending_lock:
                box = self.pending.get(message[1])
            if box is not None:
                box.put(message)
        self.process.wait()
        with self.pending_lock:
            self.alive = False
            boxes = list(self.pending.values())
            self.pending.clear()
        if not self.closing:
            error = self.owner.worker_stopped(self, self.exitcode)
            for box in boxes:
                box.put(("stopped", 0, error))
        else:
            for box in boxes:
                box.put(("stopped", 0, BackendError("This model was unloaded; get it again from the model pool.")))
        self.conn.close()

    def open(self, rid: int) -> queue.SimpleQueue[tuple[Any, ...]]:
        box: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        with self.pending_lock:
            if not self.alive:
                raise EngineStoppedError(self.owner.stopped_message(self.exitcode))
            self.pending[rid] = box
        return box

    def close_request(self, rid: int) -> None:
        with self.pending_lock:
            self.pending.pop(rid, None)

    def close(self) -> None:
        self.closing = True
        try:
            self.send(("close",))
        except (OSError, ValueError):
            pass
        self._end()
        if self.reader is not threading.current_thread():
            self.reader.join(CLOSE_WAIT_S)


class WorkerBackend:
    """A model served by a worker process: the LLMBackend protocol plus what the llama.cpp backend offers
    (beam_search, step_logprobs, single_token, rank, engine_stats; only those the hosted backend has).
    `kind` is "llama" (LlamaBackend: spec options, device, a speculative draft model in the same process) or
    "rank" (RankBackend). Identity, device and memory are answered here, from what the worker said when ready."""

    def __init__(self, path: str | Path, spec: ModelSpec | None = None, device: dict[str, Any] | None = None,
                 kind: str = "llama") -> None:
        self.path = Path(path).expanduser().resolve()
        self.kind = kind
        self.spec = spec or ModelSpec(source="path", path=str(self.path))
        self.device_request = dict(device) if device is not None else None
        self.weights: dict[str, Any] | None = None
        """Which weights these are and why (set by the model pool, as on LlamaBackend)."""
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._in_flight = 0
        self.crashes_in_a_row = 0
        self.restarts = 0
        self.broken_reason: str | None = None
        self.last_stop: str | None = None
        self._worker: _Worker | None = None
        self._worker = self._start()
        ready = self._worker.ready
        self._model_id: str = ready["model_id"]
        self.device: dict[str, Any] = ready["device"]
        self.file_info = ready["file_info"]
        self.fingerprint: str = ready["fingerprint"]
        self.n_ctx = ready["n_ctx"]
        self._memory_bytes: int = ready["memory_bytes"]
        self._methods: frozenset[str] = frozenset(ready["methods"])

    # -- the process -----------------------------------------------------------------------------------

    @property
    def what(self) -> str:
        return f"the {_KIND_NAMES.get(self.kind, 'engine')} for {self.path.name}"

    def stopped_message(self, exitcode: int | None, when: str = "") -> str:
        where = f" {when}" if when else ""
        return f"{self.what} stopped{where} ({stop_cause(exitcode)}); it restarts on the next request"

    def _start(self) -> _Worker:
        try:
            worker = _Worker(self)
        except EngineStoppedError as exc:
            broken = self._count_crash(str(exc).split(";")[0])
            if broken is not None:
                raise broken from None
            raise
        log.info("%s runs in worker process %d", self.what, worker.process.pid)
        return worker

    def _count_crash(self, stopped: str) -> ModelBrokenError | None:
        """Count one more stop in a row (`stopped`: "the ... engine for X stopped (SIGSEGV)"); the error that marks
        the model broken when it is the third."""
        self.crashes_in_a_row += 1
        self.last_stop = stopped
        if self.crashes_in_a_row < CRASHES_BEFORE_BROKEN:
            return None
        if self.broken_reason is None:
            self.broken_reason = (f"{stopped}, {self.crashes_in_a_row} times in a row; unload the model to try "
                                  "it again, and check the file and this machine's build with `metagen doctor`")
            log.error("%s is marked broken: %s", self.path.name, self.broken_reason)
        return ModelBrokenError(f"{self.path.name} is marked broken: {self.broken_reason}")

    def worker_stopped(self, worker: _Worker, exitcode: int | None) -> EngineStoppedError:
        """Called by a worker's reader when its process ended without being asked: the error for its requests."""
        message = self.stopped_message(exitcode)
        asked = exitcode is not None and -exitcode in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        log.log(logging.INFO if asked else logging.ERROR, "%s", message)  # a stop signal (a shutdown) is no crash
        with self._lock:
            if self._worker is worker:
                self._worker = None
            broken = self._count_crash(message.split(";")[0])
        return broken if broken is not None else EngineStoppedError(message)

    def _live_worker(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise BackendError("This model was unloaded; get it again from the model pool.")
            if self.broken_reason is not None:
                raise ModelBrokenError(f"{self.path.name} is marked broken: {self.broken_reason}")
            if self._worker is None or not self._worker.alive:
                self.restarts += 1
                log.info("restarting %s", self.what)
                self._worker = self._start()
            return self._worker

    @property
    def pid(self) -> int | None:
        """The worker process's id while one runs."""
        worker = self._worker
        return worker.process.pid if worker is not None and worker.alive else None

    # -- requests --------------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, cancel: CancelToken | None = None,
              on_token: TokenCallback | None = None, counted: bool = True, **kwargs: Any) -> Any:
        if cancel is not None and cancel.cancelled:
            raise CancelledError(cancel.reason or "cancelled")
        if counted:
            with self._lock:
                self._in_flight += 1
        try:
            worker = self._live_worker()
            rid = next(self._ids)
            box = worker.open(rid)
            try:
                if on_token is not None:
                    kwargs["stream"] = True
                try:
                    worker.send(("call", rid, method, args, kwargs, cancel is not None))
                except OSError:
                    pass  # the worker just died: its reader posts the error to this request's box
                unhook = cancel.on_cancel(lambda: self._relay_cancel(worker, rid, cancel)) if cancel else None
                try:
                    value = self._wait(worker, rid, box, on_token)
                    if counted:  # an engine request went through (tokenizing alone proves little)
                        with self._lock:
                            self.crashes_in_a_row = 0
                finally:
                    if unhook is not None:
                        unhook()
            finally:
                worker.close_request(rid)
        finally:
            if counted:
                with self._lock:
                    self._in_flight -= 1
        return value

    @staticmethod
    def _relay_cancel(worker: _Worker, rid: int, cancel: CancelToken, reason: str | None = None) -> None:
        try:
            worker.send(("cancel", rid, reason or cancel.reason or "cancelled"))
        except (OSError, ValueError):
            pass  # the worker is gone: its reader fails the request

    def _wait(self, worker: _Worker, rid: int, box: queue.SimpleQueue[tuple[Any, ...]],
              on_token: TokenCallback | None) -> Any:
        callback_error: BaseException | None = None
        while True:
            message = box.get()
            kind = message[0]
            if kind == "token":
                if on_token is not None and callback_error is None:
                    try:
                        on_token(message[2], message[3])
                    except BaseException as exc:  # stop the request, report the callback's error
                        callback_error = exc
                        try:
                            worker.send(("cancel", rid, "the token callback failed"))
                        except (OSError, ValueError):
                            pass
                continue
            if callback_error is not None:
                raise callback_error
            if kind == "done":
                return message[2]
            raise message[2]

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
        return self._call("render_prompt", prompt, add_generation_prompt, counted=False)  # type: ignore[no-any-return]

    def tokenize(self, text: str) -> list[int]:
        return self._call("tokenize", text, counted=False)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """The optional methods the hosted backend has (beam_search, step_logprobs, single_token, rank, ...)."""
        methods = self.__dict__.get("_methods", frozenset())
        if name not in methods or name in ("generate", "score", "choice_logprobs", "render_prompt", "tokenize",
                                           "info"):
            raise AttributeError(name)

        def call(*args: Any, cancel: CancelToken | None = None, **kwargs: Any) -> Any:
            if args and isinstance(args[-1], CancelToken):  # rank(query, documents, cancel) passes it positionally
                cancel, args = args[-1], args[:-1]
            return self._call(name, *args, cancel=cancel, counted=name != "single_token", **kwargs)

        call.__name__ = name
        return call

    # -- identity, memory, state ---------------------------------------------------------------------------

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
        return self.broken_reason

    def engine_stats(self) -> dict[str, Any]:
        """The engine's counters ({} while no worker runs)."""
        worker = self._worker
        if worker is None or not worker.alive or "engine_stats" not in self._methods:
            return {}
        try:
            return self._call("engine_stats", counted=False)  # type: ignore[no-any-return]
        except BackendError:
            return {}

    def info(self) -> dict[str, Any]:
        worker = self._worker
        process = {"pid": self.pid, "restarts": self.restarts, "crashes_in_a_row": self.crashes_in_a_row,
                   "last_stop": self.last_stop, "broken": self.broken_reason}
        if worker is not None and worker.alive:
            try:
                info = dict(self._call("info", counted=False))
            except BackendError:
                info = None
            if info is not None:
                if self.weights is not None:
                    info["weights"] = self.weights
                info["process"] = process
                return info
        return {"backend": "llama.cpp", "model_id": self.model_id, "loaded": not self._closed,
                "device": dict(self.device), "memory_bytes": self._memory_bytes, "weights": self.weights,
                "process": process}

    def close(self) -> None:
        """End the worker (its requests in flight fail with a clear error), so its memory goes back to the system."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()


def load_llama(path: Path, spec: ModelSpec, device: dict[str, Any]) -> Any:
    """The model pool's loader: the model in an engine worker process (default), or a LlamaBackend in this process
    when $METAGEN_ENGINE_PROCESS=0."""
    if engine_process_enabled():
        return WorkerBackend(path, spec, device)
    from backends.llama.worker.llama_backend import LlamaBackend

    return LlamaBackend(path, spec, device)


def load_rank(path: Path, spec: ModelSpec) -> Any:
    """A `pooling: rank` model in a worker process of its own (default), or a RankBackend in this process when
    $METAGEN_ENGINE_PROCESS=0."""
    if engine_process_enabled():
        return WorkerBackend(path, spec, None, kind="rank")
    from backends.llama.worker.rank_backend import RankBackend

    return RankBackend(path, spec)
