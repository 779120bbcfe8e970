"""The engine worker process (`python -c WORKER_CODE`): loads one model's backend (its draft model beside it) and
serves requests that arrive over a socket, each on its own thread so the engine batches them as in one process."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from backends.base import BackendError, CancelToken, ModelSpec

log = logging.getLogger(__name__)

KINDS = ("llama", "rank")
"""What a worker can host: a generating model (LlamaBackend) or a rank-pooling model (RankBackend)."""

EXPOSED = ("generate", "score", "choice_logprobs", "beam_search", "step_logprobs", "single_token", "rank",
           "render_prompt", "tokenize", "info", "engine_stats", "pair_tokens")
"""The backend methods a request may call (those the backend has are announced in the ready message)."""

STREAMS = ("generate",)
"""Methods whose tokens stream back (an `on_token` argument)."""


def build_backend(kind: str, path: Path, spec: ModelSpec, device: dict[str, Any] | None) -> Any:
    """The backend this worker hosts (imported here, so only the worker loads llama.cpp)."""
    if kind == "rank":
        from backends.llama.worker.rank_backend import RankBackend

        return RankBackend(path, spec)
    from backends.llama.worker.llama_backend import LlamaBackend

    return LlamaBackend(path, spec, device)


def describe(backend: Any) -> dict[str, Any]:
    """What the studio keeps of a loaded backend so that it answers without a round trip."""
    return {
        "model_id": backend.model_id,
        "device": dict(getattr(backend, "device", {}) or {}),
        "file_info": getattr(backend, "file_info", None),
        "fingerprint": getattr(backend, "fingerprint", ""),
        "memory_bytes": int(backend.memory_bytes()),
        "n_ctx": getattr(backend, "n_ctx", None),
        "methods": [m for m in EXPOSED if callable(getattr(backend, m, None))],
        "pid": os.getpid(),
    }


def portable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a BackendError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return BackendError(f"{type(exc).__name__}: {exc}")


class _Server:
    def __init__(self, conn: Connection, backend: Any) -> None:
        self.conn = conn
        self.backend = backend
        self.send_lock = threading.Lock()
        self.tokens: dict[int, CancelToken] = {}
        self.tokens_lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        with self.send_lock:
            self.conn.send(message)

    def serve(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                return  # the studio closed the pipe or went away
            kind = message[0]
            if kind == "call":
                _, rid, method, args, kwargs, cancellable = message
                token = CancelToken() if cancellable else None
                if token is not None:
                    with self.tokens_lock:
                        self.tokens[rid] = token
                threading.Thread(target=self.call, args=(rid, method, args, kwargs, token), daemon=True,
                                 name=f"request-{rid}").start()
            elif kind == "cancel":
                with self.tokens_lock:
                    token = self.tokens.get(message[1])
                if token is not None:
                    token.cancel(message[2] or "cancelled")
            elif kind == "close":
                return

    def call(self, rid: int, method: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             token: CancelToken | None) -> None:
        try:
            if method not in EXPOSED:
                raise BackendError(f"the engine worker does not serve {method!r}")
            if token is not None:
                kwargs["cancel"] = token
            if method in STREAMS and kwargs.pop("stream", False):
                kwargs["on_token"] = lambda index, text: self.send(("token", rid, index, text))
            value = getattr(self.backend, method)(*args, **kwargs)
            reply: tuple[Any, ...] = ("done", rid, value)
        except BaseException as exc:  # every failure goes back to the caller
            reply = ("error", rid, portable(exc))
        finally:
            with self.tokens_lock:
                self.tokens.pop(rid, None)
        try:
            self.send(reply)
        except (OSError, ValueError, pickle.PicklingError) as exc:
            if isinstance(exc, OSError):
                return
            self.send(("error", rid, BackendError(f"the engine's answer could not cross to the studio: {exc}")))


WORKER_PATH_ENV = "METAGEN_WORKER_SYS_PATH"
"""The studio's sys.path (JSON), so the worker imports the same code the studio runs."""

WORKER_CODE = ("import json, os, sys; sys.path[:0] = json.loads(os.environ.pop('METAGEN_WORKER_SYS_PATH', '[]')); "
               "from backends.llama.worker.worker_main import main; main(int(sys.argv[1]))")
"""What the worker's fresh interpreter runs (`python -c WORKER_CODE FD`), FD its end of the studio's socket."""


def main(fd: int) -> None:
    """The worker's entry point: read what to load from the studio, load it, say ready (or why not), serve."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C in the terminal is the studio's to handle
    conn = Connection(fd)
    try:
        _, _, kind, path, spec, device, log_level = conn.recv()
    except (EOFError, OSError):
        return
    logging.basicConfig(level=log_level, format="%(levelname)s engine worker %(process)d: %(message)s")
    try:
        backend = build_backend(kind, Path(path), spec, device)
    except BaseException as exc:
        conn.send(("failed", 0, portable(exc)))
        conn.close()
        return
    server = _Server(conn, backend)
    try:
        server.send(("ready", 0, describe(backend)))
        server.serve()
    finally:
        backend.close()
        conn.close()
