"""The engine worker process (`python -c WORKER_CODE`): loads one model's backend (its draft model beside it) and
serves the requests of backends/llama/worker_protocol.py's table that arrive over a socket, each on its own thread so
the engine batches them as in one process; it beats while alive and ends itself when the studio goes away."""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from backends.base import BackendError, CancelToken, ModelSpec
from backends.llama import worker_protocol as wp

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
"""Linux prctl option: the signal this process gets when the thread that started it ends."""

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
"""How the worker writes its log lines on stderr (the studio reads them back into its own log by level and name)."""


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
        "pid": os.getpid(),
    }


def pickled_exception(exc: BaseException) -> bytes:
    """The exception pickled when it survives the trip, else a BackendError with its text."""
    try:
        data = pickle.dumps(exc, pickle.HIGHEST_PROTOCOL)
        pickle.loads(data)
        return data
    except Exception:
        return pickle.dumps(BackendError(f"{type(exc).__name__}: {exc}"), pickle.HIGHEST_PROTOCOL)


def end_with_parent(parent_pid: int) -> None:
    """Die with the studio: on Linux the kernel sends SIGKILL when the studio's spawning thread ends (even to a
    stopped worker); everywhere, a studio already gone ends this process at once (the socket's end is watched too)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError) as exc:
            log.debug("no parent-death signal: %s", exc)
    if os.getppid() != parent_pid:
        os._exit(0)


class _Server:
    def __init__(self, conn: Connection, kind: str) -> None:
        self.conn = conn
        self.kind = kind
        self.backend: Any = None
        self.progress = 0
        """Grows while the model loads (the studio's load-stall rule watches it)."""
        self.send_lock = threading.Lock()
        self.tokens: dict[int, CancelToken] = {}
        self.tokens_lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self.send_lock:
            self.conn.send_bytes(data)

    def moved(self) -> None:
        """The load made progress (llama.cpp's callback)."""
        self.progress += 1

    def beat(self, every_s: float) -> None:
        """Say 'alive' every `every_s`; a studio that went away (the socket's end) ends this process."""
        while True:
            time.sleep(every_s)
            try:
                self.send(wp.frame(wp.BEAT, self.progress))
            except (OSError, ValueError):
                os._exit(0)

    def serve(self) -> bool:
        """Answer requests until the studio says close (True) or goes away (False)."""
        while True:
            try:
                kind, rid, payload = wp.parse(self.conn.recv_bytes())
            except (EOFError, OSError):
                return False
            if kind == wp.CALL:
                token = CancelToken()
                with self.tokens_lock:
                    self.tokens[rid] = token
                threading.Thread(target=self.call, args=(rid, payload, token), daemon=True,
                                 name=f"request-{rid}").start()
            elif kind == wp.CANCEL:
                with self.tokens_lock:
                    token = self.tokens.get(rid)
                if token is not None:
                    token.cancel(payload.decode("utf-8", "replace") or "cancelled")
                self.send(wp.frame(wp.CANCELLED, rid))
            elif kind == wp.CLOSE:
                return True

    def call(self, rid: int, payload: bytes, token: CancelToken) -> None:
        """Run one request and send its answer, pickled here: whatever fails is an error reply for this id."""
        name = "?"
        try:
            name, args, kwargs, stream = pickle.loads(payload)
            spec = wp.method(self.kind, name)
            if spec.cancellable:
                kwargs["cancel"] = token
            if spec.streams and stream:
                kwargs["on_token"] = lambda index, text: self.send(wp.token_frame(rid, index, text))
            value = getattr(self.backend, name)(*args, **kwargs)
            try:
                reply = wp.frame(wp.DONE, rid, pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
            except Exception as exc:
                raise BackendError(f"the engine's answer to {name} could not cross to the studio: "
                                   f"{type(exc).__name__}: {exc}") from None
        except BaseException as exc:  # every failure goes back to its caller
            reply = wp.frame(wp.ERROR, rid, pickled_exception(exc))
        finally:
            with self.tokens_lock:
                self.tokens.pop(rid, None)
        try:
            self.send(reply)
        except (OSError, ValueError):
            pass  # the studio went away: the main loop ends this process


WORKER_PATH_ENV = "METAGEN_WORKER_SYS_PATH"
"""The studio's sys.path (JSON), so the worker imports the same code the studio runs."""

WORKER_CODE = ("import json, os, sys; sys.path[:0] = json.loads(os.environ.pop('METAGEN_WORKER_SYS_PATH', '[]')); "
               "from backends.llama.worker.worker_main import main; main(int(sys.argv[1]), int(sys.argv[2]))")
"""What the worker's fresh interpreter runs (`python -c WORKER_CODE FD PARENT_PID`), FD its end of the socket."""


def main(fd: int, parent_pid: int) -> None:
    """The worker's entry point: read what to load from the studio, load it while beating, say ready (or why
    not), serve; a studio that goes away ends it without ceremony."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C in the terminal is the studio's to handle
    end_with_parent(parent_pid)
    conn = Connection(fd)
    try:
        _, _, payload = wp.parse(conn.recv_bytes())
    except (EOFError, OSError):
        return
    order = pickle.loads(payload)
    logging.basicConfig(level=order["log_level"], format=LOG_FORMAT)
    server = _Server(conn, order["kind"])
    threading.Thread(target=server.beat, args=(order["beat_s"],), daemon=True, name="beat").start()
    try:
        from backends.llama.worker import llama_model

        llama_model.LOAD_PROGRESS.append(server.moved)
        server.backend = build_backend(order["kind"], Path(order["path"]), order["spec"], order["device"])
        server.moved()
        ready = wp.frame(wp.READY, 0, pickle.dumps(describe(server.backend), pickle.HIGHEST_PROTOCOL))
    except BaseException as exc:
        server.send(wp.frame(wp.FAILED, 0, pickled_exception(exc)))
        conn.close()
        return
    try:
        server.send(ready)
        closed = server.serve()
    except (OSError, ValueError):
        closed = False
    if not closed:
        os._exit(0)  # the studio is gone: nothing here is worth an orderly end
    server.backend.close()
    conn.close()
