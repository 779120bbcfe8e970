"""A server's separate reasoning (reasoning_content, as vLLM, SGLang and llama-server send it) fills the thinking
port and the thinking token count, against a stdlib server replaying the documented chat completion shape."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from backends.base import ModelSpec, SamplingParams
from backends.remote.openai_backend import OpenAIBackend
from backends.remote.openai_caps import Capabilities
from nodes.registry import default_registry
from tests.remote.conftest import free_port

REPLY = {"id": "x", "object": "chat.completion", "model": "m",
         "choices": [{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": "Answer: 7",
                                  "reasoning_content": "3 + 4 is 7, let me check: yes."}}],
         "usage": {"prompt_tokens": 12, "completion_tokens": 14, "total_tokens": 26,
                   "completion_tokens_details": {"reasoning_tokens": 11}}}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            data = json.dumps(REPLY).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setattr(OpenAIBackend, "caps", property(lambda self: Capabilities(kind="vllm", chat=True)))
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_reasoning_content_is_the_completions_thinking(server: str) -> None:
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=server, model="m"))
    result = backend.generate([{"role": "user", "content": "3 + 4?"}], SamplingParams(max_tokens=64))
    (c,) = result.completions
    assert c.text == "Answer: 7" and c.thinking == "3 + 4 is 7, let me check: yes."
    assert c.thinking_tokens == 11 and result.usage.thinking_tokens == 11 and result.usage.completion_tokens == 14


@pytest.mark.parametrize("think", ["auto", "off"])
def test_a_generator_on_a_reasoning_server_fills_the_thinking_port(llama_provide: Any, server: str, think: str) -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "t", "models": {"remote": {"source": "openai", "base_url": server, "model": "m"}},
        "inputs": {"question": {"type": "text", "default": "3 + 4?"}},
        "nodes": [{"id": "g", "kind": "generator", "model": "remote",
                   "params": {"prompt": "{question}", "think": think}, "inputs": {"question": "inputs.question"}}],
        "outputs": {"text": "g.text", "thinking": "g.thinking"}})
    result = Scheduler(default_registry(), llama_provide).run(wf, seed=0)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs == {"text": "Answer: 7", "thinking": "3 + 4 is 7, let me check: yes."}
    assert result.stats.thinking_tokens == 11
    (cand,) = result.node_outputs["g"]["candidates"].candidates
    assert cand.meta["thinking_tokens"] == 11 and cand.text == "Answer: 7"
