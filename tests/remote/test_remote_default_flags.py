"""Remote servers as users start them (issue 24): llama_cpp.server with its default flags cuts a stream short when
another request arrives, which the probe finds and the backend works around (unstreamed requests, an interrupted
stream asked once more); a server restarted between two runs; a server answering 200 with a malformed body."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.run.providers import llama_provider
from app.run.scheduler import Scheduler
from app.run.status import FAILED, SUCCEEDED
from backends.base import CancelToken, SamplingParams
from backends.remote import openai_caps
from backends.remote.openai_backend import OpenAIBackend
from nodes.registry import default_registry
from tests.remote.conftest import LlamaServer, start_llama_server
from tests.remote.test_remote_workflows import remote_workflow

SAMPLER_N4 = """version: 1
name: remote-sampler
nodes:
- id: sample
  kind: sampler
  params: {prompt: 'Name a colour:', n: 4, temperature: 0.9, max_tokens: 12}
- id: pick
  kind: voter
  params: {method: majority, extract: full_text}
  inputs: {candidates: sample.candidates}
outputs: {answer: pick.best}
"""


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama_cpp.server started the way its README does (no --interrupt_requests False)."""
    pytest.importorskip("sse_starlette", reason="llama-cpp-python[server] is not installed (pip install -e .[dev])")
    server = start_llama_server(tmp_path_factory.mktemp("llama-default"), default_flags=True)
    yield server
    server.stop()


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    provider = llama_provider()
    yield Scheduler(default_registry(), provider)
    provider.close()


@pytest.mark.model
def test_the_probe_finds_which_server_interrupts_streams(default_server: LlamaServer, llama_server: LlamaServer,
                                                         fresh_caps: object) -> None:
    interrupting = OpenAIBackend(default_server.spec())
    patient = OpenAIBackend(llama_server.spec())
    try:
        assert interrupting.caps.interrupts_streams is True
        assert patient.caps.interrupts_streams is False
        assert any("unstreamed" in note for note in interrupting.caps.notes)
        assert dict(interrupting.caps.rows())["streaming"].endswith("answers are fetched unstreamed)")
    finally:
        interrupting.close()
        patient.close()


@pytest.mark.model
def test_a_sampler_n4_workflow_succeeds_on_a_default_flag_server(default_server: LlamaServer, scheduler: Scheduler,
                                                                 fresh_caps: object) -> None:
    result = scheduler.run(remote_workflow(SAMPLER_N4, default_server.entry()), seed=5)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["answer"]


@pytest.mark.model
def test_an_interrupted_stream_is_asked_once_more(default_server: LlamaServer, fresh_caps: object,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Where the probe did not see it (say another client cuts the stream), a cut stream is retried once,
    unstreamed, and the samples all come back whole."""
    backend = OpenAIBackend(default_server.spec())
    try:
        key = (backend.http.base_url, backend.model_name, backend.http.api_key_env)
        openai_caps._CACHE[key] = dataclasses.replace(backend.caps, interrupts_streams=False)
        params = SamplingParams(max_tokens=16, temperature=0.9, seed=2)
        with caplog.at_level(logging.INFO, logger="backends.remote.openai_backend"):
            result = backend.generate("Count to ten: 1, 2,", params, n=4, cancel=CancelToken())
        assert len(result.completions) == 4
        assert all(c.finish_reason in ("length", "stop") for c in result.completions)
        assert "asking once more, unstreamed" in caplog.text
    finally:
        backend.close()


@pytest.mark.model
def test_a_server_restarted_between_two_runs_serves_the_second(tmp_path: Path, scheduler: Scheduler,
                                                              fresh_caps: object) -> None:
    server = start_llama_server(tmp_path / "first", default_flags=True)
    workflow = remote_workflow(SAMPLER_N4, server.entry())
    try:
        first = scheduler.run(workflow, seed=1)
        server.stop()
        server = start_llama_server(tmp_path / "second", default_flags=True, port=server.port)
        second = scheduler.run(workflow, seed=2)
    finally:
        server.stop()
    assert first.status == SUCCEEDED, first.error
    assert second.status == SUCCEEDED, second.error


class _Malformed(BaseHTTPRequestHandler):
    """Lists one model, then answers every POST with status 200 and the body the server was given."""

    body = b""

    def do_GET(self) -> None:
        self._send(json.dumps({"data": [{"id": "m", "owned_by": "someone"}]}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send(self.server.body)  # type: ignore[attr-defined]

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("body", [b"<html>busy</html>", b'{"choices": "oops"}', b'{"choices": [5]}',
                                  b'{"choices": [{"text": {"a": 1}}]}', b"[]"])
def test_a_200_with_a_malformed_body_fails_the_node_naming_the_server(body: bytes, scheduler: Scheduler,
                                                                     fresh_caps: object) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Malformed)
    server.body = body  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        entry = {"source": "openai", "base_url": base_url, "model": "m", "timeout_s": 10}
        result = scheduler.run(remote_workflow(SAMPLER_N4, entry), seed=1)
    finally:
        server.shutdown()
        server.server_close()
    assert result.status == FAILED
    assert base_url in (result.error or ""), result.error
    assert "not JSON" in result.error or "not an OpenAI-shaped answer" in result.error, result.error
    assert "Traceback" not in (result.error or "") and "AttributeError" not in (result.error or ""), result.error
