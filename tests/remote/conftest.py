"""Fixtures: llama-cpp-python's own OpenAI server on the bundled model (a real process on a free localhost port, with
an API key), and helpers that build `source: openai` specs for it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from backends.base import ModelSpec
from tests.serve.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0
KEY_ENV = "METAGEN_TEST_REMOTE_KEY"
API_KEY = "remote-test-key-7f3a"
MODEL = "smol"


@dataclass
class LlamaServer:
    """A running `python -m llama_cpp.server`."""

    base_url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def spec(self, **fields: Any) -> ModelSpec:
        """A `source: openai` spec for this server (its key in $METAGEN_TEST_REMOTE_KEY)."""
        base = ModelSpec(source="openai", base_url=self.base_url, model=MODEL, api_key_env=KEY_ENV, timeout_s=120)
        return replace(base, **fields)

    def entry(self, **fields: Any) -> dict[str, Any]:
        """The same as a workflow's `models:` entry."""
        return {"source": "openai", "base_url": self.base_url, "model": MODEL, "api_key_env": KEY_ENV,
                "timeout_s": 120, **fields}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_llama_server(folder: Path, threads: int = 1, api_key: str | None = API_KEY, default_flags: bool = False,
                       port: int | None = None) -> LlamaServer:
    """Start llama_cpp.server on the bundled model and wait until /v1/models answers. `--interrupt_requests False`
    unless `default_flags` (as a user starts it: then it cuts a stream short whenever another request arrives)."""
    from backends.llama.models.bundled import bundled_model_path

    folder.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = folder / "llama_cpp_server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_model_path()), "--model_alias", MODEL,
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads), "--n_threads_batch",
               str(threads), "--n_ctx", "2048", "--n_gpu_layers", "0"]
    if not default_flags:
        command += ["--interrupt_requests", "False"]
    if api_key:
        command += ["--api_key", api_key]
    with log_path.open("ab") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", port, process, log_path)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}:\n{server.log()[-3000:]}")
        try:
            if httpx.get(f"{server.base_url}/models", headers=headers, timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"llama_cpp.server did not answer within {START_TIMEOUT_S:g}s:\n{server.log()[-3000:]}")


@pytest.fixture(autouse=True)
def _remote_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One llama_cpp.server for the test module (1 thread, context 2048, API key API_KEY)."""
    pytest.importorskip("sse_starlette", reason="llama-cpp-python[server] is not installed (pip install -e .[dev])")
    server = start_llama_server(tmp_path_factory.mktemp("llama-server"))
    yield server
    server.stop()


@pytest.fixture
def fresh_caps() -> Iterator[Callable[[], None]]:
    """Forget probed capabilities before and after a test (a server started for one test reuses ports)."""
    from backends.remote import openai_caps

    openai_caps.forget()
    yield openai_caps.forget
    openai_caps.forget()

