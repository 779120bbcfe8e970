"""The studio's end of one engine worker process: starting it (from one long-lived thread, so the kernel's
parent-death signal means the studio), the socket's reader that is also its liveness watch, its stderr kept and
logged, and requests that wait on an answer, their cancel or the worker's end — never on nothing."""

from __future__ import annotations

import atexit
import collections
import copy
import itertools
import json
import logging
import os
import pickle
import queue
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import IO, Any, Protocol

from backends.base import BackendError, CancelledError, CancelToken, EngineStoppedError, TokenCallback
from backends.llama import worker_protocol as wp
from backends.llama.worker.worker_main import WORKER_CODE, WORKER_PATH_ENV

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 5.0
STOPPED_WAIT_S = 5.0
"""How long a worker whose socket closed may take to exit before it is killed (and then once more)."""
"""How long closing waits for a responsive worker to end by itself before killing it."""
STDERR_LINES = 40
"""Lines of a worker's stderr kept for the stopped message, the Models tab and `doctor`."""
ACKED_REPLY_WAIT = 3
"""A cancelled caller whose worker acknowledged the cancel waits this many reply_wait_s for its answer."""
UNLOADED = "This model was unloaded; get it again from the model pool."

_TELLING = re.compile(r"error|assert|abort|fatal|out of memory|oom|failed|exception|terminate|killed|panic", re.I)
_LOG_LINE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) ([\w.]+): (.*)$")
_QUIET = re.compile(r"^(DEBUG|INFO|WARNING) [\w.]+: ")
_STOPPED = "stopped"
_WOKEN = "woken"
_ids = itertools.count(1)


class Owner(Protocol):
    """What a worker process needs from the backend it serves."""

    what: str
    liveness: wp.Liveness

    def load_order(self) -> dict[str, Any]: ...

    def worker_stopped(self, worker: WorkerProcess, exitcode: int | None) -> EngineStoppedError: ...


def fresh(exc: BaseException) -> BaseException:
    """A copy of an exception for one more caller (each failed request raises its own object)."""
    try:
        return copy.copy(exc)
    except Exception:
        return exc


def _unpickle(payload: bytes, what: str) -> Any:
    """A reply's value, read in the caller's thread: a reply this process cannot read is that caller's error."""
    try:
        return pickle.loads(payload)
    except Exception as exc:
        raise BackendError(f"the answer from {what} could not be read in the studio: {type(exc).__name__}: "
                           f"{exc}") from None


class _Spawner:
    """Starts every worker from one thread that lives while any of its workers does: Linux's parent-death signal
    fires when the *thread* that started a process ends, so no short-lived thread may start one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._thread: threading.Thread | None = None
        self._live = 0

    def spawn(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self._lock:
            if self._jobs is None:
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._run, args=(self._jobs,), daemon=True,
                                                name="engine-spawner")
                self._thread.start()
            self._live += 1
            self._jobs.put((argv, kwargs, answer))
        result = answer.get()
        if isinstance(result, BaseException):
            self.ended()
            raise result
        return result  # type: ignore[no-any-return]

    @staticmethod
    def _run(jobs: queue.SimpleQueue[Any]) -> None:
        while (job := jobs.get()) is not None:
            argv, kwargs, answer = job
            try:
                answer.put(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:
                answer.put(exc)

    def ended(self) -> None:
        """One started process was reaped: the thread ends with the last of them."""
        with self._lock:
            self._live -= 1
            if self._live > 0 or self._jobs is None:
                return
            self._jobs.put(None)
            thread, self._jobs, self._thread = self._thread, None, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()


_SPAWNER = _Spawner()
_LIVE: set[WorkerProcess] = set()
_LIVE_LOCK = threading.Lock()


def kill_all_workers() -> int:
    """SIGKILL every engine worker of this process (the forced exit, and the interpreter's end); how many."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for worker in live:
        worker.closing = True  # an end the studio chose: no crash to count or report
        worker.process.kill()
    return len(live)


atexit.register(kill_all_workers)


def send_timeout(seconds: float) -> bytes:
    """SO_SNDTIMEO's struct timeval for `seconds` (a worker that never reads is hung): microseconds kept, and never
    zero, which the kernel reads as "block forever" (a sub-second stall used to become exactly that)."""
    whole = int(seconds)
    micros = round((seconds - whole) * 1_000_000)
    if whole == 0 and micros == 0:
        micros = 1
    return struct.pack("ll", whole, micros)


class WorkerProcess:
    """One worker process: its socket (a reader thread that routes answers by request id and watches that the
    worker lives), its stderr (a thread that logs it and keeps its last lines), and the requests in flight."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.what = owner.what
        self.rules = owner.liveness
        ours, theirs = socket.socketpair()
        try:
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, send_timeout(self.rules.stall_s))
            self.process = _SPAWNER.spawn(
                [sys.executable, "-c", WORKER_CODE, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, close_fds=True,
                env={**os.environ, WORKER_PATH_ENV: json.dumps(sys.path)})
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.send_lock = threading.Lock()
        self.pending: dict[int, queue.SimpleQueue[tuple[Any, ...]]] = {}
        self.pending_lock = threading.Lock()
        self.cancels: dict[int, list[float | None]] = {}
        """Request id -> [when its cancel was raised, when the worker acknowledged it (None: not yet)]."""
        self.queued_frames: list[bytes] = []
        """Frames for the worker (cancels) that found the send lock busy: sent by the next send or reader tick."""
        self.alive = True
        self.closing = False
        self.ended: tuple[str, bool] | None = None
        """Why the studio ended this worker (a sentence, whether it counts as a crash), None if it did not."""
        self.ready_info: dict[str, Any] | None = None
        self.load_failure: bytes | None = None
        self.load_stop: EngineStoppedError | None = None
        self.stop_error: BaseException | None = None
        """What this worker's requests got when it ended."""
        self.settled = threading.Event()
        """Set once the load ended: ready, failed or stopped."""
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        now = time.monotonic()
        self.last_heard = self.progress_at = self._last_tick = now
        self.progress = -1
        with _LIVE_LOCK:
            _LIVE.add(self)
        self.stderr_reader = threading.Thread(target=self._read_stderr, args=(self.process.stderr,), daemon=True,
                                              name=f"engine-stderr {self.process.pid}")
        self.stderr_reader.start()
        try:
            self.send(wp.frame(wp.LOAD, 0, pickle.dumps(owner.load_order(), pickle.HIGHEST_PROTOCOL)))
        except OSError:
            pass  # it died at once: the reader says how
        self.reader = threading.Thread(target=self._read, daemon=True, name=f"engine-pipe {self.process.pid}")
        self.reader.start()

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def usable(self) -> bool:
        """Ready, alive, not ended by the studio and not closing."""
        return self.ready_info is not None and self.alive and self.ended is None and not self.closing

    @property
    def loading(self) -> bool:
        return not self.settled.is_set()

    def last_words(self) -> str:
        """The most telling line the worker wrote on stderr (an error, an assertion, an abort), else its last
        line that is not routine logging; '' when it wrote nothing."""
        lines = [line for line in self.stderr_tail if line.strip() and not _QUIET.match(line)]
        telling = [line for line in lines if _TELLING.search(line)]
        chosen = (telling or lines or [""])[-1].strip()
        return chosen if len(chosen) <= 300 else chosen[:297] + "..."

    def send(self, data: bytes) -> None:
        with self.send_lock:
            self.conn.send_bytes(data)
            self._send_queued_locked()

    def kill(self, why: str, counted: bool) -> None:
        """End the worker now (the reader then fails its requests, naming `why`)."""
        if self.ended is None and not self.closing:
            self.ended = (why, counted)
            log.error("%s %s; ending it", self.what, why)
        self.process.kill()

    # -- the stderr reader -----------------------------------------------------------------------------------------

    def _read_stderr(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        pid = self.process.pid
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip()
                self.stderr_tail.append(line)
                match = _LOG_LINE.match(line)
                if match:
                    level, name, text = match.groups()
                    logging.getLogger(name).log(logging.getLevelName(level), "engine worker %d: %s", pid, text)
                elif line.strip():
                    log.warning("engine worker %d: %s", pid, line)

    # -- the socket's reader and the watch -------------------------------------------------------------------------

    def _read(self) -> None:
        tick = self.rules.tick_s
        next_watch = time.monotonic() + tick
        while True:
            try:
                if not self.conn.poll(tick):
                    self._watch()
                    next_watch = time.monotonic() + tick
                    continue
                data = self.conn.recv_bytes()
            except (EOFError, OSError):
                break
            now = time.monotonic()
            self.last_heard = now
            self._route(data, now)
            if now >= next_watch:
                self._watch()
                next_watch = now + tick
        self._stopped()

    def _route(self, data: bytes, now: float) -> None:
        kind, rid, payload = wp.parse(data)
        if kind == wp.BEAT:
            if rid != self.progress:
                self.progress, self.progress_at = rid, now
            return
        if kind == wp.CANCELLED:
            with self.pending_lock:
                entry = self.cancels.get(rid)
                if entry is not None:
                    entry[1] = now
                box = self.pending.get(rid)
            if box is not None:
                box.put((kind, payload))
            return
        if kind == wp.READY:
            try:
                self.ready_info = pickle.loads(payload)
            except Exception as exc:
                self.kill(f"sent a ready message the studio cannot read ({exc})", counted=True)
                return
            self.settled.set()
            return
        if kind == wp.FAILED:
            self.load_failure = payload
            self.settled.set()
            return
        with self.pending_lock:
            if kind in (wp.DONE, wp.ERROR):
                self.cancels.pop(rid, None)
            box = self.pending.get(rid)
        if box is not None:
            box.put((kind, payload))

    def _watch(self) -> None:
        """End a worker that gave no sign of life for stall_s with work in flight, whose load made no progress for
        load_stall_s, or that did not acknowledge a cancel within cancel_grace_s (or stop after it in
        cancel_stop_s); the last two are not crashes of the model."""
        rules, now = self.rules, time.monotonic()
        if now - self._last_tick > max(rules.stall_s / 2, 4 * rules.tick_s):
            self.last_heard = now  # this process itself was not running (suspended, stopped): not the worker's fault
        self._last_tick = now
        if self.ended is not None or self.closing:
            return
        with self.pending_lock:
            busy = bool(self.pending or self.cancels) or self.loading
            cancels = list(self.cancels.values())
        if self.queued_frames:
            self._flush_queued()
        if now - self.last_heard > rules.stall_s and (busy or self.settled.is_set()):  # idle too: it beats all along
            state = "" if busy else " while idle"
            self.kill(f"stopped responding{state} (no sign of life for {now - self.last_heard:.0f} s)", counted=True)
        elif self.loading and now - self.progress_at > rules.load_stall_s:
            self.kill(f"stopped responding (its model load made no progress for {rules.load_stall_s:.0f} s)",
                      counted=True)
        elif any(acked is None and now - raised > rules.cancel_grace_s for raised, acked in cancels):  # type: ignore[operator]
            self.kill(f"did not acknowledge a cancel within {rules.cancel_grace_s:g} s", counted=False)
        elif any(acked is not None and now - acked > rules.cancel_stop_s for _, acked in cancels):
            self.kill(f"did not stop a cancelled request within {rules.cancel_stop_s:g} s", counted=False)

    def _stopped(self) -> None:
        """The worker's end: fail its requests in flight (each with its own error, no owner's lock taken), settle
        its load, let go of its process."""
        try:
            self.process.wait(STOPPED_WAIT_S)
        except subprocess.TimeoutExpired:  # its socket closed but it lingers: never wait on it unbounded
            self.process.kill()
            try:
                self.process.wait(STOPPED_WAIT_S)
            except subprocess.TimeoutExpired:
                log.error("%s did not exit after SIGKILL within %g s; leaving it", self.what, STOPPED_WAIT_S)
        self.stderr_reader.join(1.0)  # its last lines say why
        with self.pending_lock:
            self.alive = False
            boxes = list(self.pending.values())
            self.pending.clear()
            self.cancels.clear()
        if self.closing or self.load_failure is not None:  # an end it was asked for, or after its load failed
            error: BaseException = BackendError(UNLOADED)
        else:
            error = self.owner.worker_stopped(self, self.process.returncode)
            if not self.settled.is_set():
                self.load_stop = error  # type: ignore[assignment]
        self.stop_error = error
        for box in boxes:
            box.put((_STOPPED, fresh(error)))
        self.settled.set()
        with _LIVE_LOCK:
            _LIVE.discard(self)
        _SPAWNER.ended()
        self.conn.close()

    # -- the load ----------------------------------------------------------------------------------------------------

    def wait_ready(self, cancel: CancelToken | None = None) -> dict[str, Any]:
        """What the worker said when ready; raises why it did not get there (the model's own load error, the
        worker's stop, CancelledError when `cancel` fires first). Bounded by the watch's load rules."""
        while not self.settled.wait(0.05 if cancel is not None else self.rules.tick_s):
            if cancel is not None and cancel.cancelled:
                raise CancelledError(cancel.reason or "cancelled")
        if self.ready_info is not None:
            return self.ready_info
        if self.load_failure is not None:
            raise _unpickle(self.load_failure, self.what)
        if self.load_stop is not None:
            raise fresh(self.load_stop)
        raise BackendError(UNLOADED)

    def wait_settled_cancels(self, cancel: CancelToken | None) -> None:
        """Wait while a cancel sent more than reply_wait_s ago is unacknowledged: the worker is either about to
        acknowledge it or to be ended (within cancel_grace_s); new work should not go to it meanwhile."""
        while self.alive and self.ended is None:
            now = time.monotonic()
            with self.pending_lock:
                overdue = any(acked is None and now - raised > self.rules.reply_wait_s  # type: ignore[operator]
                              for raised, acked in self.cancels.values())
            if not overdue:
                return
            if cancel is not None and cancel.cancelled:
                raise CancelledError(cancel.reason or "cancelled")
            time.sleep(0.05)

    # -- requests ----------------------------------------------------------------------------------------------------

    def request(self, method: wp.Method, args: tuple[Any, ...], kwargs: dict[str, Any],
                cancel: CancelToken | None = None, on_token: TokenCallback | None = None,
                deadline_s: float | None = None) -> Any:
        """One request's answer. It returns at once when `cancel` fires (after at most reply_wait_s for the
        worker's own answer), when the worker ends, or with a BackendError after `deadline_s`."""
        stream = on_token is not None and method.streams
        payload = pickle.dumps((method.name, args, kwargs, stream), pickle.HIGHEST_PROTOCOL)
        rid = next(_ids)
        box: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        with self.pending_lock:
            if not self.alive:
                raise fresh(self.stop_error or BackendError(UNLOADED))
            self.pending[rid] = box
        unhook: Callable[[], None] | None = None
        answered: list[bool] = []
        try:
            self._send_or_end(wp.frame(wp.CALL, rid, payload))
            if cancel is not None:
                unhook = cancel.on_cancel(lambda: self._cancel(rid, box, cancel))
            return self._wait(rid, box, cancel, on_token, deadline_s, answered)
        finally:
            if unhook is not None:
                unhook()
            with self.pending_lock:
                self.pending.pop(rid, None)
                if answered:  # a cancel raised meanwhile needs no acknowledgement any more
                    self.cancels.pop(rid, None)

    def _send_or_end(self, data: bytes) -> None:
        try:
            self.send(data)
        except BlockingIOError:  # the send timed out: the worker has not read its socket for stall_s
            self.kill(f"stopped responding (it read nothing for {self.rules.stall_s:g} s)", counted=True)
        except (OSError, ValueError):
            pass  # it just died: its reader posts the error to the request's box

    def _cancel(self, rid: int, box: queue.SimpleQueue[tuple[Any, ...]], cancel: CancelToken) -> None:
        """On the cancelling thread: wake the caller, tell the worker, start the acknowledgement's clock."""
        with self.pending_lock:
            if rid not in self.pending:
                return  # answered already
            self.cancels[rid] = [time.monotonic(), None]
        box.put((_WOKEN, b""))
        frame = wp.frame(wp.CANCEL, rid, (cancel.reason or "cancelled").encode())
        with self.pending_lock:
            self.queued_frames.append(frame)
        # never wait behind a send to a stuck worker (the watch ends it): a busy lock leaves the frame queued for
        # whoever sends next, or for the reader's next tick (it used to be dropped, and the worker then killed
        # for not acknowledging a cancel it never got)
        self._flush_queued(wait_s=0.05)

    def _flush_queued(self, wait_s: float = 0.0) -> None:
        """Send the frames queued for the worker (cancels) if the send lock is free within `wait_s`."""
        if not self.send_lock.acquire(timeout=wait_s) if wait_s > 0 else not self.send_lock.acquire(blocking=False):
            return
        try:
            self._send_queued_locked()
        finally:
            self.send_lock.release()

    def _send_queued_locked(self) -> None:
        with self.pending_lock:
            frames, self.queued_frames = self.queued_frames, []
        for frame in frames:
            try:
                self.conn.send_bytes(frame)
            except (OSError, ValueError):
                return

    def _wait(self, rid: int, box: queue.SimpleQueue[tuple[Any, ...]], cancel: CancelToken | None,
              on_token: TokenCallback | None, deadline_s: float | None, answered: list[bool]) -> Any:
        callback_error: BaseException | None = None
        deadline = None if deadline_s is None else time.monotonic() + deadline_s
        cancelled_by: float | None = None
        woken_at = time.monotonic()
        while True:
            limits = [t for t in (deadline, cancelled_by) if t is not None]
            try:
                if limits:
                    kind, payload = box.get(timeout=max(0.0, min(limits) - time.monotonic()))
                else:
                    kind, payload = box.get()  # an answer, the cancel, or the worker's end (the watch bounds it)
            except queue.Empty:
                if callback_error is not None:
                    raise callback_error from None
                if cancelled_by is not None and cancel is not None:
                    raise CancelledError(cancel.reason or "cancelled") from None
                raise BackendError(f"{self.what} gave no answer within {deadline_s:g} s") from None
            if kind == _WOKEN:
                woken_at = time.monotonic()
                cancelled_by = woken_at + self.rules.reply_wait_s
            elif kind == wp.CANCELLED:  # alive and told: its own answer is worth a little longer (still within 1 s)
                cancelled_by = woken_at + ACKED_REPLY_WAIT * self.rules.reply_wait_s
            elif kind == wp.TOKEN:
                if on_token is not None and callback_error is None:
                    try:
                        on_token(*wp.token_payload(payload))
                    except BaseException as exc:  # stop the request, report the callback's error
                        callback_error = exc
                        self._cancel(rid, box, _failed_callback())
            elif callback_error is not None:
                raise callback_error
            elif kind == wp.DONE:
                answered.append(True)
                return _unpickle(payload, self.what)
            elif kind == wp.ERROR:
                answered.append(True)
                raise _unpickle(payload, self.what)
            else:  # _STOPPED
                raise payload

    # -- the end -------------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Ask the worker to end (its requests in flight fail with UNLOADED), kill it when it does not within
        CLOSE_WAIT_S or gives no sign of life, and wait for its threads."""
        self.closing = True
        quiet = self.loading or time.monotonic() - self.last_heard > 2 * self.rules.beat_s + 1  # it would not read
        try:
            if quiet:
                raise OSError("no sign of life")
            if self.send_lock.acquire(timeout=0.5):
                try:
                    self.conn.send_bytes(wp.frame(wp.CLOSE, 0))
                finally:
                    self.send_lock.release()
            self.process.wait(CLOSE_WAIT_S)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            if self.process.poll() is None:
                if not quiet:
                    log.warning("%s did not end in %.0f s; killing it", self.what, CLOSE_WAIT_S)
                self.process.kill()
        if self.reader is not threading.current_thread():
            self.reader.join(CLOSE_WAIT_S)


def _failed_callback() -> CancelToken:
    token = CancelToken()
    token.reason = "the token callback failed"
    return token
