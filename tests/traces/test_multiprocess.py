"""Several processes write runs into one database at the same time while this one reads it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from app.traces import TraceStore

REPO = Path(__file__).resolve().parents[2]
WRITERS = 3
RUNS_EACH = 3


def test_processes_write_one_database_concurrently(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    TraceStore(db).close()  # created up front, as the app does on first start
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, str(Path(__file__).with_name("multi_writer.py")), str(db), f"w{i}",
                               str(RUNS_EACH)], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
             for i in range(WRITERS)]
    reader = TraceStore(db)
    try:
        while any(p.poll() is None for p in procs):
            for run in reader.list_runs():  # reading while they write never fails
                assert run["status"] in ("running", "succeeded")
            time.sleep(0.05)
    finally:
        for p in procs:
            p.wait(timeout=120)
    for p in procs:
        assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    runs = reader.list_runs()
    assert sorted(r["id"] for r in runs) == sorted(f"w{i}-{k}" for i in range(WRITERS) for k in range(RUNS_EACH))
    for run in runs:
        record = reader.get_run(run["id"])
        assert record["run"]["status"] == "succeeded"
        assert len(record["lm_calls"]) == 8 == record["run"]["lm_calls"]
    reader.delete_run("w0-0")
    assert "w0-0" not in {r["id"] for r in reader.list_runs()}
    assert reader.candidates("w0-0") == []
    reader.close()
