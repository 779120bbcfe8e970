"""Which `running` runs count as interrupted: a dead writer's yes, a live one's never."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from app.run import events as ev
from app.run.events import Event
from app.traces import TraceStore
from app.traces.recovery import process_alive, process_identity


def start_run(store: TraceStore, run_id: str) -> None:
    store.on_event(Event(ev.RUN_START, run_id, None, {"workflow": "w", "workflow_yaml": "", "inputs": {}}))
    store.on_event(Event(ev.NODE_START, run_id, "a", {"kind": "generator", "params": {}, "inputs": {}}))
    store.flush()


def set_writer(db: Path, run_id: str, pid: int, identity: str | None) -> None:
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET writer_pid = ?, writer_identity = ? WHERE id = ?", (pid, identity, run_id))


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_runs_of_live_processes_are_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    writer = TraceStore(db)
    start_run(writer, "live")
    other = TraceStore(db)  # another window of the same app opens the database meanwhile
    assert other.recovered == []
    assert other.get_run("live")["run"]["status"] == "running"
    other.close()
    writer.close()
    # closing the store that was writing it ends the run as interrupted
    closed = TraceStore(db)
    run = closed.get_run("live")
    closed.close()
    assert run["run"]["status"] == "interrupted" and "closed" in run["run"]["error"]
    assert [n["status"] for n in run["nodes"]] == ["interrupted"]


def test_runs_of_dead_or_reused_pids_are_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    writer = TraceStore(db)
    for run_id in ("dead", "reused", "alive"):
        start_run(writer, run_id)
    set_writer(db, "dead", dead_pid(), None)
    identity = process_identity(os.getpid())
    # same pid as a live process, but a different start time: the pid was reused
    set_writer(db, "reused", os.getpid(), "start:1" if identity else None)
    set_writer(db, "alive", os.getpid(), identity)
    writer._active.clear()  # this test plays the dead writers; do not let close() end the runs
    writer.close()
    store = TraceStore(db)
    expected = {"dead"} | ({"reused"} if identity else set())
    assert set(store.recovered) == expected
    statuses = {r["id"]: r["status"] for r in store.list_runs()}
    assert statuses["alive"] == "running"
    assert {k for k, v in statuses.items() if v == "interrupted"} == expected
    store.close()


def test_process_alive() -> None:
    assert process_alive(os.getpid(), process_identity(os.getpid()))
    assert not process_alive(dead_pid(), None)
    assert not process_alive(0, None)


def test_heartbeat_is_recorded_while_a_run_goes(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.db", heartbeat_s=0.05)
    start_run(store, "beating")
    first = store.get_run("beating")["provenance"]["heartbeat_at"]
    deadline = time.monotonic() + 30
    while store.get_run("beating")["provenance"]["heartbeat_at"] == first:
        assert time.monotonic() < deadline, "no heartbeat was written"
        time.sleep(0.05)
    store.close()
