"""Finds runs whose writing process died (kill -9, power loss) and marks them `interrupted`."""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from pathlib import Path

from sqlalchemy import Engine, func, select, update

from app.run.status import INTERRUPTED, RUNNING
from app.traces.tables import RUNS, LmCallRow, NodeRunRow, RunRow

log = logging.getLogger(__name__)

STALE_HEARTBEAT_S = 300.0
"""A run written from another machine counts as dead when its heartbeat is older than this."""


def host_name() -> str:
    return socket.gethostname()


def process_identity(pid: int) -> str | None:
    """Something that differs between two processes that had the same pid (their start time), or None
    where the platform does not tell."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        raw = stat.read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its closing one
    fields = raw[raw.rindex(")") + 2:].split()
    return f"start:{fields[19]}"


def process_alive(pid: int, identity: str | None) -> bool:
    """Whether the process that wrote with this pid (and identity, when recorded) still runs here."""
    if pid <= 0:
        return False
    if sys.platform.startswith("linux"):
        current = process_identity(pid)
        if current is None:
            return False
        return identity is None or current == identity
    if os.name == "nt":
        return _windows_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _windows_alive(pid: int) -> bool:
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return False
        return code.value == 259  # STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


def writer_is_gone(run: RunRow, now: float, this_host: str) -> bool:
    if run.writer_host and run.writer_host != this_host:
        last = run.heartbeat_at or run.started_at
        return now - last > STALE_HEARTBEAT_S
    if run.writer_pid is None:
        return True
    return not process_alive(run.writer_pid, run.writer_identity)


def mark_interrupted(engine: Engine, run_ids: list[str] | None = None, reason: str | None = None) -> list[str]:
    """Mark `running` runs interrupted: the given ones, or else those whose writer process is gone.
    Their unfinished node runs are marked too. Returns the ids marked."""
    now = time.time()
    this_host = host_name()
    marked: list[str] = []
    with engine.begin() as conn:
        query = select(RUNS).where(RUNS.c.status == RUNNING)
        if run_ids is not None:
            query = query.where(RUNS.c.id.in_(run_ids))
        for run in [RunRow.model_validate(dict(m)) for m in conn.execute(query).mappings()]:
            if run_ids is None and not writer_is_gone(run, now, this_host):
                continue
            last_call = conn.execute(select(func.max(LmCallRow.end)).where(LmCallRow.run_id == run.id)).scalar()
            last_node = conn.execute(select(func.max(NodeRunRow.ended_at)).where(
                NodeRunRow.run_id == run.id)).scalar()
            ended = max(x for x in (run.started_at, run.heartbeat_at, last_call, last_node) if x is not None)
            why = reason or (f"the process that ran it (pid {run.writer_pid} on {run.writer_host}) ended "
                             "before the run finished")
            conn.execute(update(RunRow).where(RunRow.id == run.id).values(
                status=INTERRUPTED, ended_at=ended, wall_s=ended - run.started_at, error=why))
            conn.execute(update(NodeRunRow).where(NodeRunRow.run_id == run.id, NodeRunRow.status == RUNNING)
                         .values(status=INTERRUPTED, error=why))
            marked.append(run.id)
    for run_id in marked:
        log.warning("trace run %s marked interrupted", run_id)
    return marked
