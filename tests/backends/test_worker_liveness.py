"""An engine worker that stops answering never holds its callers (issue 44, findings 1 and 4), on the real bundled
model: a cancel returns at once from a stopped worker, which is then ended (not counted as a crash) while the model
serves again; a silent worker with requests in flight is ended as "stopped responding"; a load that hangs neither
holds its callers (each has its cancel) nor the pool; a dead worker's requests fail while a caller holds the
backend's lock; status calls never restart a worker."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from backends.base import CancelledError, CancelToken, EngineStoppedError, ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker_backend import WorkerBackend
from backends.pool import ModelPool
from tests.backends.liveness_helpers import AT_ONCE_S, LOAD_S, STALL_S, Outcome, alive, children, stop, wait_for

pytestmark = pytest.mark.model

SPEC = ModelSpec(device="cpu", n_ctx=512)
LONG = SamplingParams(max_tokens=400, temperature=0.8)
SHORT = SamplingParams(max_tokens=4)
PROMPT = "Count from one to one hundred:"


def _stop_on_first_token(backend: WorkerBackend, stopped: list[int]) -> tuple[threading.Event, object]:
    first = threading.Event()

    def on_token(_index: int, _text: str) -> None:
        if not first.is_set():
            pid = backend.pid
            assert pid is not None
            stop(pid, stopped)
            first.set()

    return first, on_token


def test_a_cancel_returns_at_once_from_a_stopped_worker_and_the_model_serves_again(
        quick_watch: None, stopped: list[int]) -> None:
    backend = WorkerBackend(bundled_model_path(), SPEC)
    try:
        token = CancelToken()
        first, on_token = _stop_on_first_token(backend, stopped)
        call = Outcome(lambda: backend.generate(PROMPT, LONG, on_token=on_token, cancel=token))  # type: ignore[arg-type]
        assert first.wait(LOAD_S)
        time.sleep(0.3)
        cancelled_at = time.monotonic()
        token.cancel("the user stopped it")
        call.within(AT_ONCE_S, "a cancelled request on a stopped worker")
        assert isinstance(call.error, CancelledError), call.error
        assert call.ended_at is not None and call.ended_at - cancelled_at < AT_ONCE_S

        again = backend.generate("Hi", SHORT)  # a new worker: the stopped one is ended after the grace period
        assert again.completions[0].finish_reason in ("length", "stop")
        assert backend.pid != stopped[0]
        wait_for(lambda: not alive(stopped[0]), STALL_S, "the stopped worker ended")
        assert backend.info()["process"]["crashes_in_a_row"] == 0, "a worker ended after a cancel is no crash"
    finally:
        backend.close()


def test_a_silent_worker_with_a_request_in_flight_is_ended_as_stopped_responding(
        quick_watch: None, stopped: list[int]) -> None:
    backend = WorkerBackend(bundled_model_path(), SPEC)
    try:
        first, on_token = _stop_on_first_token(backend, stopped)
        call = Outcome(lambda: backend.generate(PROMPT, LONG, on_token=on_token))  # type: ignore[arg-type]
        assert first.wait(LOAD_S)
        call.within(STALL_S + 3, "a request on a worker that stopped answering")
        error = call.error
        assert isinstance(error, EngineStoppedError), error
        name = bundled_model_path().name
        assert f"the llama.cpp engine for {name} stopped responding" in str(error)
        assert error.model == name and error.cause.startswith("stopped responding")
        assert not alive(stopped[0])
        assert backend.info()["process"]["crashes_in_a_row"] == 1, "a hang counts towards marking the model broken"
        assert backend.generate("Hi", SHORT).completions[0].text is not None
    finally:
        backend.close()


def test_a_load_that_hangs_holds_no_caller_beyond_its_cancel_and_is_ended(
        quick_watch: None, stopped: list[int]) -> None:
    backend = WorkerBackend(bundled_model_path(), SPEC)
    try:
        first = backend.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: backend.pid is None, LOAD_S, "the studio saw the worker die")
        token = CancelToken()
        call = Outcome(lambda: backend.generate("Hi", SHORT, cancel=token))  # restarts the worker
        loading = wait_for(lambda: backend.pid, LOAD_S, "a new worker started")
        stop(loading, stopped)  # stopped while it loads the model
        time.sleep(0.3)
        cancelled_at = time.monotonic()
        token.cancel("the run was stopped")
        call.within(AT_ONCE_S, "a request waiting for a model load, cancelled")
        assert isinstance(call.error, CancelledError), call.error

        stalled = Outcome(lambda: backend.generate("Hi", SHORT)).within(STALL_S + 3, "a request on a hung load")
        assert isinstance(stalled.error, EngineStoppedError), stalled.error
        assert "stopped responding" in str(stalled.error) and "while loading" in str(stalled.error)
        assert stalled.ended_at is not None and stalled.ended_at - cancelled_at < STALL_S + 3
        assert not alive(loading)
        assert backend.generate("Hi", SHORT).completions[0].text is not None
    finally:
        backend.close()


def test_the_pool_serves_other_models_and_cancels_while_a_load_hangs(quick_watch: None, stopped: list[int]) -> None:
    hanging, other = ModelSpec(device="cpu", n_ctx=256), ModelSpec(device="cpu", n_ctx=512)
    with ModelPool() as pool:
        before = children(os.getpid())
        Outcome(lambda: pool.get(hanging))
        worker = wait_for(lambda: children(os.getpid()) - before, LOAD_S, "the first model's worker started")
        stop(worker.pop(), stopped)
        listed = Outcome(pool.loaded).within(AT_ONCE_S, "listing the pool while a load hangs")
        assert listed.value == []
        token = CancelToken()
        first = Outcome(lambda: pool.get(hanging, cancel=token))  # waits on the same load, with its own cancel
        time.sleep(0.2)
        token.cancel("stop waiting")
        first.within(AT_ONCE_S, "a caller waiting for a hung load, cancelled")
        assert isinstance(first.error, CancelledError), first.error
        served = Outcome(lambda: pool.get(other).generate("Hi", SHORT)).within(LOAD_S, "another model's run")
        assert served.error is None, served.error
        unloaded = Outcome(pool.unload).within(AT_ONCE_S + 5, "unloading while a load hangs")
        assert unloaded.value == 1
        wait_for(lambda: not alive(stopped[0]), STALL_S + 3, "the hung worker ended")


def test_a_dead_workers_requests_fail_while_a_caller_holds_the_backends_lock() -> None:
    backend = WorkerBackend(bundled_model_path(), SPEC)
    try:
        started = threading.Event()
        call = Outcome(lambda: backend.generate(PROMPT, LONG, on_token=lambda _i, _t: started.set()))
        assert started.wait(LOAD_S)
        pid = backend.pid
        assert pid is not None
        with backend._lock:  # as a caller restarting the model holds it
            os.kill(pid, signal.SIGKILL)
            call.within(AT_ONCE_S + 1, "a request on a dead worker while the backend's lock is held")
        assert isinstance(call.error, EngineStoppedError), call.error
    finally:
        backend.close()


def test_a_cancel_that_fires_while_the_worker_restarts_ends_the_request_there() -> None:
    backend = WorkerBackend(bundled_model_path(), SPEC)
    try:
        first = backend.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: backend.pid is None, LOAD_S, "the studio saw the worker die")
        token = CancelToken()
        sent: list[str] = []
        call = Outcome(lambda: backend.generate(PROMPT, LONG, cancel=token,
                                                on_token=lambda _i, text: sent.append(text)))
        wait_for(lambda: backend.pid, LOAD_S, "the worker restarting")
        token.cancel("cancelled during the restart")
        call.within(LOAD_S, "the request")
        assert isinstance(call.error, CancelledError), call.error
        assert sent == [], "a request cancelled while its worker restarted never ran"
        wait_for(lambda: backend.engine_stats(), LOAD_S, "the restarted worker answering")
        assert backend.engine_stats()["requests"] == 0, "nor was it sent to the restarted worker"
    finally:
        backend.close()


def test_status_calls_never_restart_a_worker() -> None:
    backend = WorkerBackend(bundled_model_path(), SPEC)
    try:
        pid = backend.pid
        assert pid is not None
        before = children(os.getpid())
        os.kill(pid, signal.SIGKILL)
        for _ in range(20):  # before and after the studio notices the death
            stats = backend.engine_stats()  # the engine's figures while it lives, nothing once the death is seen
            assert stats == {} or {"requests"} <= set(stats), stats
            assert backend.info()["model_id"] == backend.model_id
            time.sleep(0.02)
        wait_for(lambda: backend.pid is None, LOAD_S, "the studio saw the worker die")
        assert backend.engine_stats() == {}
        assert backend.info()["process"]["pid"] is None
        assert children(os.getpid()) <= before, "no worker was started by a status call"
        assert backend.restarts == 0
    finally:
        backend.close()


def test_a_prefetched_model_is_the_one_the_run_gets() -> None:
    from app.run.providers import llama_provider

    with ModelPool() as pool:
        provide = llama_provider(pool)
        before = children(os.getpid())
        provide.prefetch(SPEC)  # returns at once: the worker starts while the caller does its own start-up
        started = wait_for(lambda: children(os.getpid()) - before, LOAD_S, "the prefetched worker started")
        backend = provide(SPEC)
        assert backend.pid in started and children(os.getpid()) - before == started, "no second worker"
        assert backend.generate("Hi", SHORT).completions[0].text is not None


def test_an_idle_worker_that_hangs_is_found_by_its_beat_and_a_request_runs_on_a_fresh_one(
        quick_watch: None, stopped: list[int]) -> None:
    """Round 7 §2.2: SIGSTOP an idle worker: its silent beat ends it within the stall time, before any request
    (it used to be found only by the next request, 17 s later, as a 500); a request that got nothing yet from a
    worker that stops is tried once more on a fresh worker."""
    backend = WorkerBackend(bundled_model_path(), SPEC)
    try:
        idle = backend.pid
        assert idle is not None
        stop(idle, stopped)
        wait_for(lambda: not alive(idle), STALL_S + 3, "the hung idle worker was ended by the watch")
        answer = backend.generate("Hi", SHORT)  # a fresh worker, no error
        assert answer.completions[0].text is not None and backend.pid not in (None, idle)

        busy = backend.pid
        assert busy is not None
        retried = Outcome(lambda: backend.generate(PROMPT, SamplingParams(max_tokens=200)))  # nothing streamed
        time.sleep(0.5)
        stop(busy, stopped)  # hangs mid-request: ended after the stall, and the request runs again
        retried.within(STALL_S + LOAD_S, "a request whose worker hung, retried")
        assert retried.error is None, retried.error
        assert backend.pid not in (None, busy)
    finally:
        backend.close()
