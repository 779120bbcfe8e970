"""Several processes opening one new trace database at the same moment: all succeed, the schema is made once."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

PROCESSES = 8


def _open(path: str, start: multiprocessing.synchronize.Event, results: multiprocessing.Queue) -> None:
    from app.traces.store import TraceStore

    start.wait(10)
    try:
        store = TraceStore(Path(path))
        store.close()
        results.put("ok")
    except Exception as exc:  # the test reports what went wrong
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_creating_one_database_at_once(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_open, args=(str(db), start, results)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
    assert outcomes == ["ok"] * PROCESSES
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        versions = conn.execute("SELECT count(*) FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert versions == 1
