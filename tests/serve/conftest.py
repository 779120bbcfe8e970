"""Fixtures: a real `metagen serve` in a subprocess on a free localhost port (temp data folder, a workflows folder
with the examples and this folder's test workflows, its own trace database), and OpenAI SDK clients for it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_WORKFLOWS = Path(__file__).resolve().parent / "workflows"
START_TIMEOUT_S = 120.0
API_KEY = "test-key-123"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServeProcess:
    """A running `metagen serve`."""

    base_url: str
    """http://127.0.0.1:PORT/v1"""
    home: Path
    db: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    api_key: str | None = None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def client(self, api_key: str | None = None, **kwargs: Any) -> Any:
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key=api_key or self.api_key or "unused", max_retries=0,
                             timeout=kwargs.pop("timeout", 300), **kwargs)

    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=300)

    def traces(self) -> list[dict[str, Any]]:
        """`metagen traces list --json` on this server's database."""
        out = metagen("traces", "list", "--json", "--db", str(self.db), home=self.home)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)


def metagen(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "METAGEN_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("METAGEN_SHARE_MODE", None)
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=timeout)


def workflows_folder(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for source in (ROOT / "workflows", TEST_WORKFLOWS):
        for path in source.glob("*.yaml"):
            shutil.copyfile(path, target / path.name)
    return target


def start_serve(home: Path, args: list[str], api_key: str | None = None) -> ServeProcess:
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    db = home / "traces.db"
    env = {**os.environ, "METAGEN_HOME": str(home), "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    for key in ("METAGEN_WORKFLOWS", "METAGEN_TRACE_DB", "METAGEN_MODELS", "METAGEN_SHARE_MODE", "METAGEN_API_KEY"):
        env.pop(key, None)
    log_path = home / "serve.log"
    log_file = log_path.open("wb")
    command = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--db", str(db),
               "--workflows", str(workflows_folder(home / "wf")), *args]
    if api_key:
        command += ["--api-key", api_key]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    server = ServeProcess(f"http://127.0.0.1:{port}/v1", home, db, process, log_path, api_key)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log_file.close()
            raise RuntimeError(f"metagen serve exited with {process.returncode}:\n{server.log()}")
        try:
            httpx.get(f"{server.base_url}/models", timeout=10)  # 40 workflows parsed: seconds on a loaded machine
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        process.kill()
        raise RuntimeError(f"metagen serve did not answer within {START_TIMEOUT_S:g}s:\n{server.log()}")
    return server


def stop_serve(server: ServeProcess) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=5)
    assert "Traceback" not in server.log(), server.log()


@pytest.fixture(scope="module")
def serve_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ServeProcess]]:
    """Start servers for one test module (all stopped at its end)."""
    started: list[ServeProcess] = []

    def make(*args: str, api_key: str | None = None) -> ServeProcess:
        server = start_serve(tmp_path_factory.mktemp("serve"), list(args), api_key)
        started.append(server)
        return server

    yield make
    for server in started:
        stop_serve(server)
