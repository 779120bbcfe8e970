"""Grammar-constrained sampling's grammar work in a child process, so a deadline and cancel can stop it.

llama.cpp follows every parse of a grammar at once (one parse stack each); alternatives that can be empty and
begin alike, nested (`e ::= "a" e f g | ""` ...), multiply the stacks at every character, and one call that masks
the vocabulary can then run for minutes in C, where no flag is ever read. So the grammar never runs on the
engine thread: a child process holds the llama.cpp grammar samplers (the model's vocabulary only, no weights)
and answers "which tokens may come next" and "this token came". The engine does not wait for an answer: it
decodes other requests meanwhile and draws the sample once the answer has come (a speculative job, which draws
its draft rows in order, waits in place, watching cancel); a request's cancel (its run's time cap included)
and a per-token time limit kill the child (the CPU and memory go with it). Children are kept in a small pool
per model and reused.
"""

from __future__ import annotations

import ctypes
import json
import logging
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from backends.base import BackendError, CancelledError, CancelToken

log = logging.getLogger(__name__)

GRAMMAR_STEP_LIMIT_S = 2.0
"""Longest the grammar may work on one token (or on setting itself up) before the sample fails (the engine goes
on with other requests meanwhile, but the child holds a CPU core). Grammars take milliseconds per token (a JSON schema's
3 ms; one of 300 optional properties, about 900 parses at once after its `{`, 75 ms on a busy 2-core machine);
the checker refuses those whose parses multiply, so this limit catches what it cannot see coming."""
WORKER_START_LIMIT_S = 60.0
"""Longest a child may take to start (Python, llama.cpp and the vocabulary load)."""
WORKER_MEMORY_BYTES = 4 << 30
"""Address space a child may use: exploding parse stacks end in an allocation failure, not in swapping."""
IDLE_WORKERS = 2
"""Children kept per model for later requests."""
MAX_WORKERS = 4
"""Children per model at once (about 70 MB each): more grammar-constrained requests wait to be admitted."""
_POLL_S = 0.02
_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding backends/
_CHILD = f"import sys; sys.path.insert(0, {_ROOT!r}); from backends.llama.worker.grammar_worker import main; main()"
_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # struct llama_token_data

TOO_AMBIGUOUS = (
    "The grammar is too ambiguous for llama.cpp: its grammar engine worked on one token for more than "
    f"{GRAMMAR_STEP_LIMIT_S:g} s (it follows every way the text so far can be parsed, and rules whose alternatives "
    "can be empty and begin alike, nested, multiply those ways at every character), so the sample was stopped. "
    "Make the alternatives of a rule begin with different text, and avoid chains of rules that can all be empty."
)


class GrammarWorker:
    """One child process holding grammar samplers by key; every call waits with a deadline and a cancel check
    (`cancelled()` answers the reason, or None while the request goes on)."""

    def __init__(self, model_path: Path) -> None:
        self.model_path = Path(model_path)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(self.model_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
        )
        self._buffer = bytearray()
        self._chunks: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        """What the child wrote, as a thread read it (b"" at its end): pipes cannot be polled on every platform."""
        threading.Thread(target=self._read_pipe, name="grammar-pipe", daemon=True).start()
        self.keys: set[int] = set()
        self.started = False
        self.asked: dict[int, float] = {}
        """Keys whose mask was asked for and not yet read, with when it was asked."""
        self._masks: dict[int, bytes] = {}

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, cancelled: Callable[[], str | None]) -> None:
        if not self.started:
            line = self._read_line(time.monotonic() + WORKER_START_LIMIT_S, cancelled, "starting")
            if line != b"ready":
                self.kill()
                raise BackendError(f"The grammar process could not start ({line.decode(errors='replace')[:200]}).")
            self.started = True

    def new(self, key: int, grammar: str, cancelled: Callable[[], str | None]) -> None:
        """Set up `grammar` under `key` (llama.cpp builds its rules and first parse stacks)."""
        self._send({"op": "new", "key": key, "grammar": grammar})
        reply = self._read_line(time.monotonic() + GRAMMAR_STEP_LIMIT_S, cancelled, "setting up the grammar")
        if reply != b"ok":
            raise BackendError("The grammar does not parse (GBNF syntax error, or no 'root' rule). Check it "
                               "against llama.cpp's GBNF guide: rules look like  root ::= \"yes\" | \"no\".")
        self.keys.add(key)

    def allowed(self, key: int, n_vocab: int, cancelled: Callable[[], str | None]) -> np.ndarray:
        """A bool per token of the vocabulary: may it come next under grammar `key` (waits for the answer)."""
        self.ask_mask(key)
        deadline = time.monotonic() + GRAMMAR_STEP_LIMIT_S
        while key not in self._masks:
            self._fill(deadline, cancelled, "masking the vocabulary")
            self._parse_masks()
        return self._take(key, n_vocab)

    def allowed_prefix(self, key: int, tokens: list[int], cancelled: Callable[[], str | None]) -> int:
        """How many of `tokens`, in order, grammar `key` allows from its current state (a copy of the grammar walks
        them in the child; `key` itself does not move). Waits for the answer; no mask may be awaited meanwhile
        (the speculative job, the one caller, reads each mask in place)."""
        if self.asked:
            raise BackendError("The grammar process was asked for a draft check while a mask was awaited.")
        self._send({"op": "prefix", "key": key, "tokens": [int(t) for t in tokens]})
        reply = self._read_line(time.monotonic() + GRAMMAR_STEP_LIMIT_S, cancelled, "checking a draft")
        head, _, count = reply.partition(b" ")
        if head != b"prefix" or not count.isdigit():
            self.kill()
            raise BackendError(f"The grammar process answered {reply[:80]!r} instead of a draft check.")
        return int(count)

    def ask_mask(self, key: int) -> None:
        """Ask which tokens may come next under grammar `key`; poll() or allowed() reads the answer."""
        self._send({"op": "mask", "key": key})
        self.asked[key] = time.monotonic()

    def poll(self, key: int, n_vocab: int) -> np.ndarray | None:
        """The answer to ask_mask(key) if it has come, else None, without waiting; a BackendError (and the child
        killed) once it is GRAMMAR_STEP_LIMIT_S late."""
        while True:
            try:
                chunk = self._chunks.get_nowait()
            except queue.Empty:
                break
            self._take_chunk(chunk)
        self._parse_masks()
        if key in self._masks:
            return self._take(key, n_vocab)
        if time.monotonic() - self.asked[key] > GRAMMAR_STEP_LIMIT_S:
            self.kill()
            raise BackendError(TOO_AMBIGUOUS)
        return None

    def _parse_masks(self) -> None:
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                return
            header = bytes(self._buffer[:end]).split()
            if len(header) != 3 or header[0] != b"mask":
                self.kill()
                raise BackendError(f"The grammar process answered {bytes(self._buffer[:80])!r} instead of a mask.")
            size = int(header[2])
            if len(self._buffer) < end + 1 + size:
                return
            self._masks[int(header[1])] = bytes(self._buffer[end + 1:end + 1 + size])
            del self._buffer[:end + 1 + size]

    def _take(self, key: int, n_vocab: int) -> np.ndarray:
        self.asked.pop(key, None)
        bits = self._masks.pop(key)
        return np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=n_vocab).astype(bool)

    def accept(self, key: int, token: int) -> None:
        """Advance grammar `key` past `token` (llama.cpp moves every parse stack over its text). Not waited for:
        the next mask's answer comes after it, and its time limit covers both."""
        self._send({"op": "accept", "key": key, "token": int(token)})

    def free(self, key: int) -> None:
        if key in self.keys and self.alive:
            self.keys.discard(key)
            self._send({"op": "free", "key": key})

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    # -- pipes ---------------------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            self.kill()
            raise BackendError(self._died_message()) from exc

    def _fill(self, deadline: float, cancelled: Callable[[], str | None], doing: str) -> None:
        """Read what the child has written, waiting in short slices between which cancel and time are checked."""
        while True:
            reason = cancelled()
            if reason is not None:
                self.kill()
                raise CancelledError(reason)
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise BackendError(TOO_AMBIGUOUS if self.started else
                                   f"The grammar process took more than {WORKER_START_LIMIT_S:g} s {doing}.")
            try:
                chunk = self._chunks.get(timeout=min(_POLL_S, left))
            except queue.Empty:
                continue
            self._take_chunk(chunk)
            return

    def _take_chunk(self, chunk: bytes) -> None:
        if not chunk:
            self.kill()
            raise BackendError(self._died_message())
        self._buffer.extend(chunk)

    def _read_pipe(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        try:
            while chunk := stream.read1(1 << 20):
                self._chunks.put(chunk)
        except (OSError, ValueError):  # closed by kill()
            pass
        self._chunks.put(b"")

    def _read_line(self, deadline: float, cancelled: Callable[[], str | None], doing: str) -> bytes:
        while b"\n" not in self._buffer:
            self._fill(deadline, cancelled, doing)
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line.strip()

    def _died_message(self) -> str:
        return (f"The grammar process stopped (out of its {WORKER_MEMORY_BYTES >> 30} GB: a grammar too ambiguous "
                "for llama.cpp multiplies its parse stacks at every character). Make the alternatives of a rule "
                "begin with different text, and avoid chains of rules that can all be empty.")


class GrammarPool:
    """Grammar children for one model: leased to one request at a time, kept warm afterwards when healthy. At most
    MAX_WORKERS children live at once (leased, idle or starting): the engine admits a grammar job only while
    fewer are leased, a lease waits for a child being started ahead rather than start one more, and at most one
    is started ahead at a time (12 requests at once used to start 12)."""

    def __init__(self, model_path: Path) -> None:
        self.model_path = Path(model_path)
        self._idle: list[GrammarWorker] = []
        self._lock = threading.Condition()
        self._closed = False
        self.leased = 0
        self._starting = 0
        """Children being started ahead by prewarm()."""

    @property
    def processes(self) -> int:
        """Children alive or starting (leased, idle, started ahead): never more than MAX_WORKERS."""
        with self._lock:
            return self.leased + len(self._idle) + self._starting

    def available(self) -> bool:
        """Whether lease() may be called now (fewer than MAX_WORKERS are leased)."""
        with self._lock:
            return self.leased < MAX_WORKERS

    def lease(self, cancelled: Callable[[], str | None]) -> GrammarWorker:
        with self._lock:
            self.leased += 1
            try:
                while True:
                    while self._idle:
                        worker = self._idle.pop()
                        if worker.alive:
                            return worker
                        worker.kill()
                    if self.leased + self._starting <= MAX_WORKERS:
                        break
                    reason = cancelled()  # a child started ahead would make one too many: wait for it
                    if reason:
                        raise CancelledError(reason)
                    self._lock.wait(_POLL_S * 5)
            except BaseException:
                self.leased -= 1
                raise
        try:
            worker = GrammarWorker(self.model_path)
            worker.wait_ready(cancelled)
        except BaseException:
            with self._lock:
                self.leased -= 1
            raise
        return worker

    def prewarm(self, cancel: CancelToken | None = None) -> None:
        """Start a child on the caller's thread for a request about to be submitted, unless one is idle or being
        started, or MAX_WORKERS are alive, so the engine thread finds it ready instead of waiting for a start
        (best effort: lease() starts one otherwise)."""
        with self._lock:
            if self._closed or self._idle or self._starting or self.leased >= MAX_WORKERS:
                return
            self._starting += 1
        worker: GrammarWorker | None = None
        try:
            worker = GrammarWorker(self.model_path)
            worker.wait_ready(lambda: (cancel.reason or "cancelled") if cancel is not None and cancel.cancelled
                              else None)
        except (BackendError, CancelledError, OSError) as exc:
            log.debug("no grammar process started ahead: %s", exc)
            worker = None
        finally:
            with self._lock:
                self._starting -= 1
                kept = worker is not None and not self._closed and len(self._idle) < IDLE_WORKERS
                if kept:
                    self._idle.append(worker)  # type: ignore[arg-type]
                self._lock.notify_all()
        if worker is not None and not kept:
            worker.kill()

    def give_back(self, worker: GrammarWorker) -> None:
        for key in list(worker.keys):
            worker.free(key)
        with self._lock:
            self.leased -= 1
            healthy = worker.alive and worker.started and not worker.asked  # asked: its answer would be stale
            self._lock.notify_all()
            if healthy and not self._closed and len(self._idle) < IDLE_WORKERS:
                self._idle.append(worker)
                return
        worker.kill()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


# ---------------------------------------------------------------------------------------------- the child


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    except (ImportError, ValueError, OSError):  # not on this platform: the time limit still holds
        pass


class _Grammars:
    """The child's side: llama.cpp grammar samplers over a vocabulary-only model."""

    def __init__(self, model_path: str) -> None:
        import llama_cpp.llama_cpp as lib

        self.lib = lib
        lib.llama_backend_init()
        self._quiet = lib.llama_log_callback(lambda level, text, user_data: None)  # kept alive with self
        lib.llama_log_set(self._quiet, None)
        params = lib.llama_model_default_params()
        params.vocab_only = True
        self.model = lib.llama_model_load_from_file(model_path.encode(), params)
        if not self.model:
            raise SystemExit(f"cannot load the vocabulary of {model_path}")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        self.data = np.empty(self.n_vocab, dtype=_TOKEN_DATA)
        self.samplers: dict[int, Any] = {}

    def new(self, key: int, grammar: str) -> bytes:
        self.free(key)
        sampler = self.lib.llama_sampler_init_grammar(self.vocab, grammar.encode("utf-8"), b"root")
        if not sampler:
            return b"refused\n"
        self.samplers[key] = sampler
        return b"ok\n"

    def mask(self, key: int) -> bytes:
        data, lib = self.data, self.lib
        data["id"] = np.arange(self.n_vocab, dtype=np.int32)
        data["logit"] = 0.0
        data["p"] = 0.0
        candidates = lib.llama_token_data_array(
            data=data.ctypes.data_as(lib.llama_token_data_p), size=self.n_vocab, selected=-1, sorted=False
        )
        lib.llama_sampler_apply(self.samplers[key], ctypes.byref(candidates))
        allowed = np.zeros(self.n_vocab, dtype=bool)
        allowed[data["id"]] = np.isfinite(data["logit"])
        bits = np.packbits(allowed).tobytes()
        return b"mask %d %d\n" % (key, len(bits)) + bits

    def prefix(self, key: int, tokens: list[int]) -> bytes:
        """How many of `tokens` the grammar allows in order, walked by a copy (the sampler itself stays put)."""
        lib = self.lib
        walker = lib.llama_sampler_clone(self.samplers[key])
        one = np.zeros(1, dtype=_TOKEN_DATA)
        allowed = 0
        try:
            for token in tokens:
                one["id"], one["logit"] = token, 0.0
                candidates = lib.llama_token_data_array(data=one.ctypes.data_as(lib.llama_token_data_p), size=1,
                                                        selected=-1, sorted=False)
                lib.llama_sampler_apply(walker, ctypes.byref(candidates))
                if not np.isfinite(one["logit"][0]):
                    break
                lib.llama_sampler_accept(walker, token)
                allowed += 1
        finally:
            lib.llama_sampler_free(walker)
        return b"prefix %d\n" % allowed

    def accept(self, key: int, token: int) -> None:
        self.lib.llama_sampler_accept(self.samplers[key], token)

    def free(self, key: int) -> None:
        sampler = self.samplers.pop(key, None)
        if sampler:
            self.lib.llama_sampler_free(sampler)


def main() -> None:
    """The child: `python -c ... <model path>`; JSON requests on stdin, answers on stdout."""
    _limit_memory()
    grammars = _Grammars(sys.argv[1])
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        op, key = request["op"], int(request["key"])
        if op == "new":
            reply = grammars.new(key, request["grammar"])
        elif op == "mask":
            reply = grammars.mask(key)
        elif op == "prefix":
            reply = grammars.prefix(key, [int(t) for t in request["tokens"]])
        elif op == "accept":
            grammars.accept(key, int(request["token"]))
            continue
        else:
            grammars.free(key)
            continue
        out.write(reply)
        out.flush()
