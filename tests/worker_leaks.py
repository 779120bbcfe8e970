"""The suite's check on engine workers: a worker process of this test session still alive once the test module
that started it has ended (its module-scoped fixtures torn down too) is a leak; the module's last test errors.

A worker is recognised by its command line (`python -c WORKER_CODE FD`, which imports `worker_main`) and counted
as this pytest process's by its environment ($METAGEN_TEST_PROCESS, this process's id, which every process it
starts inherits), so a worker of another session (or of another pytest-xdist worker) is never counted, and a
worker started by a server the tests started (a grandchild) is.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

WORKER_MARK = b"backends.llama.worker.worker_main"
"""What an engine worker's command line holds (worker_main.WORKER_CODE imports it)."""
EXIT_GRACE_S = 10.0
"""How long a worker closed at the module's end may take to exit (WorkerBackend waits up to CLOSE_WAIT_S)."""

SESSION_WORKERS: set[int] = set()
"""Workers a session-scoped fixture shares across modules (`share_for_session`): never counted as leaks."""


def share_for_session(pid: int | None) -> None:
    """Declare a worker that a session-scoped fixture keeps for the whole session (it closes it at the end)."""
    if pid is not None:
        SESSION_WORKERS.add(pid)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


PROCESS_ENV = "METAGEN_TEST_PROCESS"
"""The pytest process whose tests started a process (set by tests/conftest.py, inherited by what it starts)."""


def mark_this_process() -> None:
    os.environ[PROCESS_ENV] = str(os.getpid())


def session_workers() -> dict[int, str]:
    """The live engine workers started by this pytest process's tests: pid -> its parent (pid and command)."""
    mark = f"{PROCESS_ENV}={os.getpid()}".encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        cmdline = _read(entry / "cmdline")
        if WORKER_MARK not in cmdline or mark not in _read(entry / "environ").split(b"\0"):
            continue
        if _zombie(entry):
            continue
        found[int(entry.name)] = _parent_of(entry)
    return found


def _zombie(entry: Path) -> bool:
    stat = _read(entry / "stat")
    return b") Z " in stat or b") X " in stat


def _parent_of(entry: Path) -> str:
    """The worker's parent process, as `pid command` (pytest itself, or a server a test started)."""
    stat = _read(entry / "stat").decode(errors="replace")
    try:
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return "?"
    command = _read(Path(f"/proc/{ppid}/cmdline")).replace(b"\0", b" ").decode(errors="replace").strip()
    return f"{ppid} {command[:120]}"


def leaked_since(before: set[int], grace_s: float = EXIT_GRACE_S) -> dict[int, str]:
    """Workers alive now that were not alive at `before` (nor shared for the session), after waiting up to
    `grace_s` for those being closed to exit."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = {pid: who for pid, who in session_workers().items()
                 if pid not in before and pid not in SESSION_WORKERS}
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def end_leaked(pids: set[int] | dict[int, str]) -> None:
    """Kill leaked workers (so one leak does not pile memory onto the rest of the run)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
