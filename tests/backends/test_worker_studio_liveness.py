"""Boundaries that hold in the studio (issue 44, findings 1, 2 and 5), on the real bundled model: a run whose
worker stops answering ends at its cancel and the model serves the next run; `metagen run --max-seconds` exits with a
stopped worker; no worker outlives a studio killed with SIGKILL or its forced exit; a worker that aborts with a line
on stderr has that line in the run's error and in `doctor`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import metagen
from backends.base import CancelToken
from backends.llama.models.bundled import bundled_model_path
from tests.backends import worker_faults
from tests.backends.liveness_helpers import AT_ONCE_S, LOAD_S, STALL_S, alive, engine_workers, stop, wait_for
from tests.backends.test_worker_replies import plant_faults

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
GRACE_S = 2.0
"""The worker_protocol.Liveness default cancel_grace_s: how long a stopped worker may outlive a cancel."""


LONG_GRAMMAR = 'root ::= ("one two three four "){400}'
"""Forces about 2,000 tokens: a run that cannot end early (by an end of text) on a fast, quiet machine."""


def _workflow(n_ctx: int, max_tokens: int, grammar: str = "") -> str:
    extra = f", grammar: '{grammar}'" if grammar else ""
    return f"""
version: 1
name: live-{n_ctx}
models:
  main: {{source: bundled, device: cpu, n_ctx: {n_ctx}}}
inputs:
  question: {{type: text, default: Count from one to one hundred.}}
nodes:
- id: say
  kind: generator
  model: main
  params: {{prompt: "{{question}}", max_tokens: {max_tokens}, temperature: 0.8{extra}}}
  inputs: {{question: inputs.question}}
outputs: {{text: say.text}}
"""


def _studio(tmp_path: Path) -> metagen.Studio:
    return metagen.Studio(trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf", models_dir=tmp_path / "m")


def _worker_pid(studio: metagen.Studio, n_ctx: int) -> int:
    pids = [e["pid"] for e in studio.service.loaded_pool.loaded() if e["device"]["n_ctx"] == n_ctx]
    assert len(pids) == 1 and pids[0], studio.service.loaded_pool.loaded()
    return int(pids[0])


def test_a_run_on_a_stopped_worker_ends_at_its_cancel_and_the_models_serve_on(
        tmp_path: Path, quick_watch: None, stopped: list[int]) -> None:
    with _studio(tmp_path) as studio:
        token = CancelToken()
        hit = threading.Event()

        def stop_on_first_token(event: metagen.Event) -> None:
            if event.type == "token" and not hit.is_set():
                stop(_worker_pid(studio, 512), stopped)
                hit.set()

        result: dict[str, metagen.RunResult] = {}
        runner = threading.Thread(target=lambda: result.setdefault("run", metagen.load(_workflow(512, 400)).run(
            seed=1, studio=studio, progress=False, on_event=stop_on_first_token, cancel=token)))
        runner.start()
        assert hit.wait(LOAD_S)
        time.sleep(0.3)
        token.cancel("the user stopped the run")
        runner.join(AT_ONCE_S + GRACE_S)
        assert not runner.is_alive(), "the run ended within the grace period of its cancel"
        assert result["run"].status == "cancelled", result["run"].error

        again = metagen.load(_workflow(512, 8)).run(seed=2, studio=studio, progress=False)
        assert again.status == "succeeded", again.error
        other = metagen.load(_workflow(256, 8)).run(seed=3, studio=studio, progress=False)
        assert other.status == "succeeded", other.error
        wait_for(lambda: not alive(stopped[0]), STALL_S, "the stopped worker ended")


def test_metagen_run_with_max_seconds_exits_with_a_stopped_worker(tmp_path: Path, quick_watch: None,
                                                                 stopped: list[int]) -> None:
    flow = tmp_path / "long.yaml"
    flow.write_text(_workflow(2560, 2400, LONG_GRAMMAR))  # was 512 tokens of counting: over in 4 s on a quiet machine
    cap = 12.0
    started = time.monotonic()
    cli = subprocess.Popen([sys.executable, "-m", "app.cli.main", "run", str(flow), "--max-seconds", str(cap),
                            "--no-trace"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        worker = wait_for(lambda: engine_workers(cli.pid), LOAD_S, "the run's engine worker started").pop()
        time.sleep(min(cap / 2, 4.0))  # loaded and decoding, or still loading: either way the run must end
        stop(worker, stopped)
        _, err = cli.communicate(timeout=cap + STALL_S + GRACE_S + 20)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert time.monotonic() - started < cap + STALL_S + GRACE_S + 20
    assert cli.returncode != 0 and (b"budget_exceeded" in err or b"stopped responding" in err), err[-2000:]
    wait_for(lambda: not alive(worker), 5.0, "the stopped worker ended with the studio")


def _studio_script(then: str) -> str:
    return textwrap.dedent(f"""
        import os, signal, sys, time
        from backends.base import ModelSpec
        from backends.llama.models.bundled import bundled_model_path
        from backends.llama.worker_backend import WorkerBackend
        backend = WorkerBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=256))
        os.kill(backend.pid, signal.SIGSTOP)
        print(backend.pid, flush=True)
        {then}
        """)


@pytest.mark.parametrize("end", ["SIGKILL", "forced exit"])
def test_no_worker_outlives_its_studio(end: str, stopped: list[int]) -> None:
    then = "time.sleep(600)" if end == "SIGKILL" else \
        "from app.platform.shutdown import force_exit; force_exit(signal.SIGTERM, 'test')"
    studio = subprocess.Popen([sys.executable, "-c", _studio_script(then)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert studio.stdout is not None
        worker = int(studio.stdout.readline())
        stopped.append(worker)
        if end == "SIGKILL":
            studio.kill()
        studio.wait(LOAD_S)
    finally:
        if studio.poll() is None:
            studio.kill()
            studio.wait()
    wait_for(lambda: not alive(worker), 5.0, f"the stopped worker ended after its studio's {end}")


def test_a_worker_that_aborts_leaves_its_last_words_in_the_runs_error_and_in_doctor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plant_faults(monkeypatch)
    with _studio(tmp_path) as studio:
        hit = threading.Event()

        def abort_on_first_token(event: metagen.Event) -> None:
            if event.type == "token" and not hit.is_set():
                hit.set()
                os.kill(_worker_pid(studio, 512), signal.SIGUSR1)

        failed = metagen.load(_workflow(512, 400)).run(seed=1, studio=studio, progress=False,
                                                       on_event=abort_on_first_token)
        assert failed.status == "failed"
        name = bundled_model_path().name
        assert f"the llama.cpp engine for {name} stopped (SIGABRT)" in str(failed.error), failed.error
        assert worker_faults.ABORT_LINE in str(failed.error), failed.error
        report = studio.service.check_install(canary=False)
        stops = [c for c in report.checks if c["name"] == "engine stops"]
        assert stops and worker_faults.ABORT_LINE in stops[0]["detail"], report.checks
