"""A `source: openai` reward model with `api: pooling`, against a stdlib server replaying the response vLLM documents
for POST /pooling (reward models such as Skywork-Reward): one batched request, rewards back in input order, the
verifier's reward_model scores; and the errors of a server without the asked API."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from backends.base import BackendError, ModelSpec
from backends.remote.openai_backend import OpenAIBackend
from nodes.registry import default_registry
from tests.serve.conftest import free_port

MODEL = "Skywork/Skywork-Reward-V2-Qwen3-0.6B"


def reward_of(text: str) -> float:
    return round(len(text) / 10.0 - 2.0, 3)


class _VllmPooling(BaseHTTPRequestHandler):
    """POST /pooling as vLLM answers it (docs: "Pooling API"): one `data` entry per input, reversed here to check
    that the client follows `index`, not the order."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append({"path": self.path, **body})
        if self.path != "/pooling":
            self._send(404, {"object": "error", "message": f"Not Found: {self.path}", "type": "NotFoundError",
                             "code": 404})
            return
        inputs = body["input"]
        data = [{"index": i, "object": "pooling", "data": [reward_of(t)]} for i, t in enumerate(inputs)][::-1]
        tokens = sum(len(t.split()) for t in inputs)
        self._send(200, {"id": "pool-8b3a", "object": "list", "created": 1730000000, "model": body["model"],
                         "data": data, "usage": {"prompt_tokens": tokens, "total_tokens": tokens,
                                                 "completion_tokens": 0, "prompt_tokens_details": None}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture(scope="module")
def vllm() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), _VllmPooling)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_pooling_scores_every_document_in_one_request(vllm: str) -> None:
    _VllmPooling.bodies.clear()
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=vllm, model=MODEL, api="pooling"))
    docs = ["7", "the answer is 7", "it is eight"]
    result = backend.rank("What is 3 + 4?", docs)
    assert result.scores == [reward_of(f"What is 3 + 4?\n\n{d}") for d in docs]
    assert result.usage.prompt_tokens > 0
    assert len(_VllmPooling.bodies) == 1 and _VllmPooling.bodies[0]["path"] == "/pooling"  # the root, not /v1
    assert _VllmPooling.bodies[0]["input"] == [f"What is 3 + 4?\n\n{d}" for d in docs]


def test_a_server_without_the_asked_api_and_an_entry_without_api(vllm: str) -> None:
    rerank = OpenAIBackend(ModelSpec(source="openai", base_url=vllm, model=MODEL, api="rerank"))
    with pytest.raises(BackendError, match="has no /rerank"):
        rerank.rank("q", ["a"])
    chat_only = OpenAIBackend(ModelSpec(source="openai", base_url=vllm, model=MODEL))
    with pytest.raises(BackendError, match="no_scoring_api"):
        chat_only.rank("q", ["a"])


def test_the_verifier_reads_the_remote_rewards(llama_provide: Any, vllm: str) -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "t",
        "models": {"gen": {"source": "fake"}, "rm": {"source": "openai", "base_url": vllm, "model": MODEL,
                                                     "api": "pooling"}},
        "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [
            {"id": "s", "kind": "sampler", "model": "gen", "params": {"n": 2, "prompt": "{question}"},
             "inputs": {"question": "inputs.question"}},
            {"id": "v", "kind": "verifier", "params": {"method": "reward_model", "model": "rm"},
             "inputs": {"candidates": "s.candidates", "question": "inputs.question"}},
        ],
        "outputs": {"scores": "v.scores", "cands": "s.candidates"},
    })
    result = Scheduler(default_registry(), llama_provide).run(wf, seed=0)
    assert result.status == SUCCEEDED, result.error
    texts = [c.text for c in result.outputs["cands"].candidates]
    expected = [1 / (1 + math.exp(-reward_of(f"What is 3 + 4?\n\n{t}"))) for t in texts]
    assert result.outputs["scores"] == pytest.approx(expected)
