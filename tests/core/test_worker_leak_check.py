"""The suite's engine-worker leak check (tests/worker_leaks.py, run by tests/conftest.py after each test module)
finds this session's workers, and only them (issue 43, 1.6)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests import worker_leaks

LOOKALIKE = "import time  # backends.llama.worker.worker_main\ntime.sleep(60)\n"
"""A process whose command line reads like an engine worker's, without loading a model."""


def _start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", LOOKALIKE], env=env, stdin=subprocess.DEVNULL)


def test_a_worker_left_running_is_found_and_ended() -> None:
    before = set(worker_leaks.session_workers())
    ours = _start(dict(os.environ))
    other = _start({**os.environ, worker_leaks.PROCESS_ENV: "1"})  # another pytest process's (or session's)
    try:
        leaked = worker_leaks.leaked_since(before, grace_s=0.2)
        assert ours.pid in leaked and other.pid not in leaked
        assert leaked[ours.pid].startswith(f"{os.getpid()} ")  # its parent: this pytest process
        worker_leaks.end_leaked(leaked)
        assert ours.wait(timeout=10) == -9
        assert ours.pid not in worker_leaks.session_workers()
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()


def test_a_worker_shared_for_the_session_is_no_leak() -> None:
    before = set(worker_leaks.session_workers())
    shared = _start(dict(os.environ))
    try:
        worker_leaks.share_for_session(shared.pid)
        assert shared.pid not in worker_leaks.leaked_since(before, grace_s=0.2)
    finally:
        worker_leaks.SESSION_WORKERS.discard(shared.pid)
        shared.kill()
        shared.wait()
