"""A run killed with SIGKILL leaves a database that opens, with that run `interrupted` and others intact."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.traces import TraceStore
from app.viz import export_html, timeline_figure

REPO = Path(__file__).resolve().parents[2]


def node_started(db: Path, run_id: str, node_id: str) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM node_runs WHERE run_id = ? AND node_id = ?",
                                (run_id, node_id)).fetchone()[0] > 0
    except sqlite3.OperationalError:
        return False


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="SIGKILL is POSIX only")
def test_sigkill_mid_run_marks_the_run_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("crash_worker.py")), str(db)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first_line = proc.stdout.readline()
        assert first_line.startswith("first "), proc.stderr.read() if proc.stderr else ""
        first_id = first_line.split()[1]
        deadline = time.monotonic() + 60
        # the first node of the slow run is done and committed, the second one is under way
        while not node_started(db, "doomed", "critique"):
            assert proc.poll() is None and time.monotonic() < deadline, "the slow run never got going"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    store = TraceStore(db)
    try:
        assert store.recovered == ["doomed"]
        doomed = store.get_run("doomed")
        assert doomed["run"]["status"] == "interrupted"
        assert f"pid {proc.pid}" in doomed["run"]["error"]
        assert doomed["run"]["ended_at"] >= doomed["run"]["started_at"]
        statuses = {n["node_id"]: n["status"] for n in doomed["nodes"]}
        assert statuses["draft"] == "succeeded"
        assert statuses["critique"] == "interrupted"
        assert [c["node_id"] for c in doomed["lm_calls"]] == ["draft"]

        assert doomed["run"]["model_ids"] == ["fake:fake"]
        # the cut-off run is still drawn: its critique bar runs to the end of what was recorded
        timeline = timeline_figure(doomed)
        interrupted = next(t for t in timeline.data if t.name == "node interrupted")
        assert list(interrupted.y) == ["critique"]
        assert "interrupted" in export_html(doomed)

        first = store.get_run(first_id)
        assert first["run"]["status"] == "succeeded"
        assert len(first["lm_calls"]) == first["run"]["lm_calls"] == 3
        assert [n["status"] for n in first["nodes"]] == ["succeeded"] * 3
        assert {r["id"]: r["status"] for r in store.list_runs()} == {first_id: "succeeded", "doomed": "interrupted"}
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # opening again finds nothing more to recover
    again = TraceStore(db)
    assert again.recovered == []
    again.close()
