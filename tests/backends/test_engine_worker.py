"""The engine in a worker process, on the real bundled model: a worker killed mid-run (SIGSEGV, SIGKILL) fails only
its run with a clear message while another model's run goes on, the next run restarts it, three stops in a row mark
the model broken, and unloading ends the worker process."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

import metagen
from backends.base import EngineStoppedError, ModelBrokenError, ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker_backend import WorkerBackend
from backends.pool import ModelPool

pytestmark = pytest.mark.model

DEADLINE_S = 60.0
"""A generous bound for what must happen at once (the machine may be loaded); nothing is timed against it."""


def _workflow(n_ctx: int, max_tokens: int) -> metagen.Workflow:
    return metagen.load(f"""
version: 1
name: worker-{n_ctx}
models:
  main: {{source: bundled, device: cpu, n_ctx: {n_ctx}}}
inputs:
  question: {{type: text, default: Count from one to one hundred.}}
nodes:
- id: say
  kind: generator
  model: main
  params: {{prompt: "{{question}}", max_tokens: {max_tokens}, temperature: 0.8}}
  inputs: {{question: inputs.question}}
outputs: {{text: say.text}}
""")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _worker_pid(pool: ModelPool, n_ctx: int) -> int:
    pids = [e["pid"] for e in pool.loaded() if e["device"]["n_ctx"] == n_ctx]
    assert len(pids) == 1 and pids[0], pool.loaded()
    return int(pids[0])


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL], ids=["SIGSEGV", "SIGKILL"])
def test_a_worker_killed_mid_run_fails_only_that_run(tmp_path: Path, sig: signal.Signals) -> None:
    before = set(threading.enumerate())
    studio = metagen.Studio(trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf", models_dir=tmp_path / "m")
    doomed, other = _workflow(512, 400), _workflow(256, 40)
    pids: list[int] = []
    with studio:
        pool = studio.service.loaded_pool
        warm = other.run(seed=1, studio=studio, progress=False)  # loads the other model in a worker of its own
        assert warm.status == "succeeded", warm.error
        killed = threading.Event()
        other_started = threading.Event()

        def kill_on_first_token(event: metagen.Event) -> None:
            if event.type == "token" and not killed.is_set():
                killed.set()
                other_started.wait(DEADLINE_S)  # the other model's run is in flight when this one's worker dies
                pids.append(_worker_pid(pool, 512))
                os.kill(pids[-1], sig)

        results: dict[str, metagen.RunResult] = {}

        def run_other() -> None:
            def started(event: metagen.Event) -> None:
                if event.type == "token":
                    other_started.set()

            results["other"] = other.run(seed=2, studio=studio, progress=False, on_event=started)

        thread = threading.Thread(target=run_other)
        thread.start()
        failed = doomed.run(seed=3, studio=studio, progress=False, on_event=kill_on_first_token)
        thread.join(DEADLINE_S)
        assert not thread.is_alive()

        assert failed.status == "failed"
        name = bundled_model_path().name
        assert f"the llama.cpp engine for {name} stopped ({sig.name}); it restarts on the next request" \
            in str(failed.error), failed.error
        assert results["other"].status == "succeeded", results["other"].error
        assert results["other"].outputs["text"]

        again = _workflow(512, 8).run(seed=4, studio=studio, progress=False)  # a new worker for the same model
        assert again.status == "succeeded", again.error
        pids.append(_worker_pid(pool, 512))
        pids.append(_worker_pid(pool, 256))
        assert pids[0] != pids[1]
    assert pool.loaded() == []
    assert all(_gone(pid) for pid in pids), "closing the studio ended every engine worker"
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], "no pipe reader or request thread outlives the studio"


def test_three_stops_in_a_row_mark_the_model_broken_and_unload_ends_the_worker() -> None:
    spec = ModelSpec(device="cpu", n_ctx=256)
    params = SamplingParams(max_tokens=64, temperature=0.8)
    with ModelPool() as pool:
        backend = pool.get(spec)
        assert isinstance(backend, WorkerBackend)
        seen: list[int] = []
        for attempt in range(3):
            pid = backend.pid
            assert pid is not None and pid not in seen, "each request after a stop runs on a new worker"
            seen.append(pid)

            def crash(_index: int, _text: str, pid: int = pid) -> None:
                os.kill(pid, signal.SIGKILL)

            with pytest.raises(EngineStoppedError) as stopped:
                backend.generate("Once upon a time", params, on_token=crash)
            if attempt < 2:
                assert "stopped (SIGKILL); it restarts on the next request" in str(stopped.value)
                assert not isinstance(stopped.value, ModelBrokenError)
                assert backend.tokenize("hello")  # restarts the worker (and is not a success of a generation)
        assert isinstance(stopped.value, ModelBrokenError)
        name = bundled_model_path().name
        reason = pool.broken()[name]
        assert "stopped (SIGKILL), 3 times in a row" in reason and "unload" in reason
        with pytest.raises(ModelBrokenError, match="marked broken"):
            pool.get(spec)
        assert pool.broken() == {name: reason}
        assert all(_gone(pid) for pid in seen)

        pool.unload(name)  # forgets the broken mark: the model may load again
        assert pool.broken() == {}
        fresh = pool.get(spec)
        assert fresh.generate("Hello", SamplingParams(max_tokens=4)).completions[0].text is not None
        pid = fresh.pid
        assert pid is not None
        assert pool.unload(name) == 1
        assert _gone(pid), "unloading a model ends its worker process"


def test_a_request_cancelled_in_the_studio_stops_in_the_worker() -> None:
    from backends.base import CancelledError, CancelToken

    backend = WorkerBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=512))
    try:
        token = CancelToken()
        pieces: list[str] = []

        def cancel_after_three(_index: int, text: str) -> None:
            pieces.append(text)
            if len(pieces) == 3:
                token.cancel("stop here")

        with pytest.raises(CancelledError, match="stop here"):
            backend.generate("Count to a hundred:", SamplingParams(max_tokens=400), on_token=cancel_after_three,
                             cancel=token)
        assert len(pieces) < 100, "the worker stopped decoding soon after the cancel"
        deadline = time.monotonic() + DEADLINE_S  # the caller returns at once; the engine stops at its next step
        while backend.engine_stats().get("cancelled", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.engine_stats()["cancelled"] >= 1
        assert not backend.busy
        result = backend.generate("Hi", SamplingParams(max_tokens=3))
        assert result.completions[0].finish_reason in ("length", "stop")
    finally:
        backend.close()
