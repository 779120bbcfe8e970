"""The engine worker's protocol written down once (backends/llama/worker_protocol.py): the table matches what each
hosted backend offers and what the studio's typed backends call; frames round-trip; a stop says what stopped, why
and the worker's last words, counts towards 'broken' once per stop, and survives pickling with its attributes."""

from __future__ import annotations

import collections
import inspect
import pickle

import pytest

from backends.base import EngineStoppedError, ModelBrokenError
from backends.llama import worker_protocol as wp
from backends.llama.engine_stops import EngineStop, StopCounter
from backends.llama.worker_backend import RankWorkerBackend, WorkerBackend
from backends.llama.worker_process import WorkerProcess


def _hosted(kind: str) -> type:
    from backends.llama.worker.llama_backend import LlamaBackend
    from backends.llama.worker.rank_backend import RankBackend

    return {"llama": LlamaBackend, "rank": RankBackend}[kind]


@pytest.mark.parametrize("kind", sorted(wp.METHODS))
def test_every_method_of_the_table_is_on_the_hosted_backend_with_the_arguments_the_table_promises(kind: str) -> None:
    hosted = _hosted(kind)
    for name, method in wp.METHODS[kind].items():
        parameters = inspect.signature(getattr(hosted, name)).parameters
        assert ("cancel" in parameters) == method.cancellable, (kind, name)
        assert ("on_token" in parameters) == method.streams, (kind, name)


@pytest.mark.parametrize(("kind", "studio_side"), [("llama", WorkerBackend), ("rank", RankWorkerBackend)])
def test_the_studios_typed_backend_offers_exactly_the_tables_methods(kind: str, studio_side: type) -> None:
    offered = {name for name in wp.METHODS[kind] if callable(getattr(studio_side, name, None))}
    assert offered == set(wp.METHODS[kind])
    optional = {"beam_search", "step_logprobs", "single_token", "rank", "pair_tokens", "engine_stats"}
    for name in optional - set(wp.METHODS[kind]):
        assert not hasattr(studio_side, name), f"{kind} workers do not serve {name}: capability checks rely on it"


def test_a_method_outside_the_table_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"does not serve 'beam_search'.*rank"):
        wp.method("rank", "beam_search")


def test_frames_round_trip() -> None:
    assert wp.parse(wp.frame(wp.DONE, 2**40, b"abc")) == (wp.DONE, 2**40, b"abc")
    kind, rid, payload = wp.parse(wp.token_frame(7, 3, "é\ud800x"))
    assert (kind, rid) == (wp.TOKEN, 7) and wp.token_payload(payload) == (3, "é\ud800x")


def test_the_stall_rule_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(wp.STALL_ENV, "8")
    assert wp.liveness_from_env().stall_s == 8 and wp.liveness_from_env().beat_s == 1.0
    monkeypatch.setenv(wp.STALL_ENV, "soon")
    with pytest.raises(ValueError, match="positive number of seconds"):
        wp.liveness_from_env()


def test_an_engine_stopped_error_keeps_its_model_and_cause_across_pickling() -> None:
    for cls in (EngineStoppedError, ModelBrokenError):
        error = cls("the llama.cpp engine for m.gguf stopped (SIGSEGV)", model="m.gguf", cause="SIGSEGV")
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is cls and str(back) == str(error) and (back.model, back.cause) == ("m.gguf", "SIGSEGV")


def test_stops_in_a_row_mark_the_model_broken_and_a_success_resets_them() -> None:
    counter = StopCounter(limit=3)
    crash = EngineStop("the llama.cpp engine for m.gguf", "m.gguf", "SIGABRT",
                       last_words="ggml.c:12: GGML_ASSERT(x) failed")
    first = counter.record(crash)
    assert str(first) == ("the llama.cpp engine for m.gguf stopped (SIGABRT); it restarts on the next request "
                          "(its last words on stderr: ggml.c:12: GGML_ASSERT(x) failed)")
    assert (first.model, first.cause) == ("m.gguf", "SIGABRT")
    ended = EngineStop("the llama.cpp engine for m.gguf", "m.gguf", "did not acknowledge a cancel within 2 s",
                       counted=False, ended_by_studio=True)
    assert "it was ended and restarts" in str(counter.record(ended)) and counter.in_a_row == 1
    counter.succeeded()
    errors = [counter.record(crash) for _ in range(3)]
    assert not isinstance(errors[1], ModelBrokenError) and isinstance(errors[2], ModelBrokenError)
    assert counter.broken is not None and counter.broken.startswith(
        "the llama.cpp engine for m.gguf stopped (SIGABRT), 3 times in a row (its last words on stderr: ggml.c")
    assert str(errors[2]).startswith("m.gguf is marked broken: ")


def test_a_workers_last_words_are_its_most_telling_line() -> None:
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.stderr_tail = collections.deque([
        "INFO backends.llama.worker.engine: warming up",
        "WARNING llama_cpp.native: using full-size SWA cache",
        "/src/ggml-cpu.c:42: GGML_ASSERT(n > 0) failed",
        "Aborted (core dumped) in thread 3",
        "INFO backends.llama.worker.engine: bye",
    ])
    assert worker.last_words() == "Aborted (core dumped) in thread 3"
    worker.stderr_tail.extend(["   ", "some plain line"])
    assert worker.last_words() == "Aborted (core dumped) in thread 3", "a telling line wins over a later plain one"
    worker.stderr_tail.clear()
    worker.stderr_tail.append("WARNING llama_cpp.native: routine")
    assert worker.last_words() == "", "routine logging is no reason"


def test_a_sub_second_send_timeout_is_not_block_forever() -> None:
    """SO_SNDTIMEO's timeval: 0.5 s used to be packed as (0, 0), which the kernel reads as no timeout at all."""
    import struct

    from backends.llama.worker_process import send_timeout

    assert struct.unpack("ll", send_timeout(0.5)) == (0, 500_000)
    assert struct.unpack("ll", send_timeout(20.0)) == (20, 0)
    assert struct.unpack("ll", send_timeout(2.25)) == (2, 250_000)
    assert struct.unpack("ll", send_timeout(0.0)) == (0, 1)


def test_a_cancel_that_meets_a_busy_send_lock_is_queued_not_dropped() -> None:
    """Round 7 §3.5: the CANCEL frame used to be dropped when the send lock stayed busy for 50 ms (the worker was
    then killed for not acknowledging a cancel it never got): it waits for the next send (or the reader's tick)."""
    import queue
    import threading

    from backends.base import CancelToken
    from backends.llama import worker_protocol as wp
    from backends.llama.worker_process import WorkerProcess

    class Conn:
        def __init__(self) -> None:
            self.sent: list[bytes] = []

        def send_bytes(self, data: bytes) -> None:
            self.sent.append(data)

    worker = object.__new__(WorkerProcess)
    worker.conn, worker.send_lock, worker.pending_lock = Conn(), threading.Lock(), threading.Lock()
    worker.pending, worker.cancels, worker.queued_frames = {7: queue.SimpleQueue()}, {}, []
    token = CancelToken()
    token.cancel("stop it")
    with worker.send_lock:  # another thread is sending (to a slow worker)
        worker._cancel(7, worker.pending[7], token)
    assert worker.conn.sent == [] and len(worker.queued_frames) == 1
    worker.send(b"next request")
    assert worker.conn.sent[0] == b"next request"
    assert wp.parse(worker.conn.sent[1])[:2] == (wp.CANCEL, 7)
    assert worker.queued_frames == []
