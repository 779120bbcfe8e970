"""Load: 20 concurrent runs through the UI server's real HTTP API (the editor's server functions), and 8
concurrent `metagen run` processes writing one trace database. Every run ends, every run is in the trace
database, `PRAGMA integrity_check` is ok, and the server's memory comes back near its baseline."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.conftest import REPO, StudioServer, start_server, stop_server

pytestmark = pytest.mark.model

RUNS = 20
PROCESSES = 8
REQUEST_TIMEOUT_S = 30.0
RUN_DEADLINE_S = 420.0
MEMORY_SLACK_BYTES = 150 * 1024 * 1024
"""What the server may keep after the load beyond its warm baseline (allocator arenas, caches), not a leak."""

WORKFLOW: dict[str, Any] = {
    "version": 1, "name": "load",
    "inputs": {"question": {"type": "text", "default": "What is 2 + 3?"}},
    "nodes": [
        {"id": "think", "kind": "sampler",
         "params": {"n": 2, "prompt": "{question} Answer with a number.", "max_tokens": 6, "temperature": 0.8},
         "inputs": {"question": "inputs.question"}},
        {"id": "vote", "kind": "voter", "params": {"method": "majority"},
         "inputs": {"candidates": "think.candidates"}},
    ],
    "outputs": {"answer": "vote.answer"},
}
DONE = {"succeeded", "failed", "cancelled", "budget_exceeded", "invalid", "interrupted"}


class EditorApi:
    """The HTTP calls the editor page makes: POST /gradio_api/component_server with a session hash."""

    def __init__(self, server: StudioServer) -> None:
        self.base = server.url.rstrip("/")
        self.client = httpx.Client(timeout=REQUEST_TIMEOUT_S)
        config = self.client.get(f"{self.base}/config").json()
        self.component_id = next(c["id"] for c in config["components"]
                                 if c.get("props", {}).get("elem_id") == "mg-editor-page")

    def call(self, session: str, fn_name: str, data: dict[str, Any]) -> Any:
        response = self.client.post(f"{self.base}/gradio_api/component_server", json={
            "session_hash": session, "component_id": self.component_id, "fn_name": fn_name, "data": data})
        response.raise_for_status()
        return response.json()

    def run_to_end(self, session: str, seed: int) -> dict[str, Any]:
        started = self.call(session, "mg_run", {"workflow": WORKFLOW, "seed": seed})
        assert "run_id" in started, started
        deadline = time.monotonic() + RUN_DEADLINE_S
        while time.monotonic() < deadline:
            status = self.call(session, "mg_status", {"run_id": started["run_id"]})
            if status.get("status") in DONE:
                return status
            time.sleep(0.5)
        raise AssertionError(f"run {started['run_id']} did not end within {RUN_DEADLINE_S:g}s")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def run_ids_in(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM runs")}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    studio = start_server(tmp_path_factory.mktemp("load-home"), [])
    yield studio
    stop_server(studio)


def test_twenty_concurrent_runs_through_the_ui_server(server: StudioServer) -> None:
    api = EditorApi(server)
    warm = api.run_to_end("warm-up", seed=0)  # loads the model: the baseline is a warm server
    assert warm["status"] == "succeeded", warm
    time.sleep(1)
    baseline = rss_bytes(server.process.pid)
    sessions = [f"visitor-{uuid.uuid4().hex[:8]}" for _ in range(RUNS)]
    with ThreadPoolExecutor(max_workers=RUNS) as pool:
        finals = list(pool.map(lambda i: api.run_to_end(sessions[i], seed=i + 1), range(RUNS)))
    assert [f["status"] for f in finals] == ["succeeded"] * RUNS, [f.get("error") for f in finals]
    assert server.process.poll() is None
    db = server.home / "traces.db"
    recorded = run_ids_in(db)
    assert {f["run_id"] for f in finals} <= recorded
    assert integrity(db) == "ok"
    time.sleep(2)
    after = rss_bytes(server.process.pid)
    print(f"\nUI server RSS: warm baseline {baseline / 1e6:.0f} MB, after {RUNS} concurrent runs "
          f"{after / 1e6:.0f} MB ({(after - baseline) / 1e6:+.0f} MB)")
    assert after - baseline < MEMORY_SLACK_BYTES, (baseline, after)


def test_eight_cli_processes_share_one_trace_database(tmp_path: Path) -> None:
    workflow = tmp_path / "load.yaml"
    workflow.write_text(yaml.safe_dump(WORKFLOW, sort_keys=False), encoding="utf-8")
    db = tmp_path / "shared.db"
    env = {**os.environ, "METAGEN_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    commands = [[sys.executable, "-m", "app.cli", "run", str(workflow), "--db", str(db), "--seed", str(i),
                 "--json"] for i in range(PROCESSES)]
    processes = [subprocess.Popen(c, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in commands]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=RUN_DEADLINE_S)
        results.append((process.returncode, out, err))
    assert [rc for rc, _, _ in results] == [0] * PROCESSES, [err[-2000:] for _, _, err in results]
    run_ids = {json.loads(out)["run_id"] for _, out, _ in results}
    assert len(run_ids) == PROCESSES
    assert run_ids <= run_ids_in(db)
    assert integrity(db) == "ok"
