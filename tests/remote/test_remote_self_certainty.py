"""Self-certainty on a remote server: a sampler with logprobs asks for the top 20 and gets token statistics
approximated from them (marked so), the verifier scores with a warning; without logprobs nothing is asked for and
the verifier says what to turn on. Against a stdlib server replaying OpenAI's chat completion shape."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.scheduler import FAILED, SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from backends.base import BackendError, ModelSpec, SamplingParams
from backends.remote.openai_backend import OpenAIBackend
from backends.remote.openai_caps import Capabilities
from backends.token_stats import REMOTE_VOCAB, approx_self_certainty
from nodes.registry import default_registry
from tests.remote.conftest import free_port

TOPS = [[("7", math.log(0.9)), ("8", math.log(0.05))], [(".", math.log(0.5)), ("!", math.log(0.25))]]
"""Two tokens, each with two alternatives: a confident one and an unsure one."""


def _reply(with_logprobs: bool) -> dict[str, Any]:
    content = [{"token": tops[0][0], "logprob": tops[0][1],
                "top_logprobs": [{"token": t, "logprob": v} for t, v in tops]} for tops in TOPS]
    return {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "7."},
                         **({"logprobs": {"content": content}} if with_logprobs else {})}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            bodies.append(body)
            data = json.dumps(_reply(bool(body.get("logprobs")))).encode()
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
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", bodies
    httpd.shutdown()
    httpd.server_close()


PROMPT = [{"role": "user", "content": "3 + 4?"}]


def test_token_statistics_ride_on_the_top_logprobs(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, bodies = server
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=url, model="m"))
    (c,) = backend.generate(PROMPT, SamplingParams(max_tokens=8, logprobs=0, token_stats=True)).completions
    assert bodies[-1]["logprobs"] is True and bodies[-1]["top_logprobs"] == 20
    stats = c.token_stats
    assert stats is not None and stats.approximate and len(stats) == 2
    expected = [approx_self_certainty([v for _, v in tops], REMOTE_VOCAB) for tops in TOPS]
    assert stats.self_certainty == pytest.approx(expected)
    assert stats.self_certainty[0] > stats.self_certainty[1]  # 0.9 + 0.05 leaves less to spread than 0.75
    assert [lp.top for lp in c.logprobs or []] == [[], []]  # the caller asked for no alternatives: none kept
    (plain,) = backend.generate(PROMPT, SamplingParams(max_tokens=8, token_stats=True)).completions
    assert "logprobs" not in bodies[-1] and plain.token_stats is None  # no logprobs asked for: nothing added


def test_the_confidence_stop_is_refused_rather_than_ignored(server: tuple[str, list[dict[str, Any]]]) -> None:
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=server[0], model="m"))
    with pytest.raises(BackendError, match="needs the local engine"):
        backend.generate(PROMPT, SamplingParams(max_tokens=8, logprobs=0, confidence_stop=(4, 1.0)))


def _workflow(url: str, logprobs: bool) -> Any:
    return workflow_from_dict({
        "version": 1, "name": "t", "models": {"remote": {"source": "openai", "base_url": url, "model": "m"}},
        "nodes": [{"id": "s", "kind": "sampler", "model": "remote",
                   "params": {"prompt": "3 + 4?", "n": 2, "temperature": 0.8, "logprobs": logprobs}},
                  {"id": "c", "kind": "verifier", "model": "remote", "params": {"method": "self_certainty"},
                   "inputs": {"candidates": "s.candidates"}},
                  {"id": "v", "kind": "voter", "params": {"method": "best_of_n"},
                   "inputs": {"candidates": "c.candidates"}}],
        "outputs": {"answer": "v.best", "scores": "c.scores"}})


def test_the_verifier_scores_approximately_and_warns(llama_provide: Any,
                                                     server: tuple[str, list[dict[str, Any]]]) -> None:
    rec = EventRecorder(skip=("token",))
    result = Scheduler(default_registry(), llama_provide).run(_workflow(server[0], True), seed=0,
                                                                 observers=[rec])
    assert result.status == SUCCEEDED, result.error
    mean = sum(approx_self_certainty([v for _, v in tops], REMOTE_VOCAB) for tops in TOPS) / 2
    assert result.outputs["scores"] == pytest.approx([mean, mean], abs=1e-3)  # statistics kept to 4 decimals
    notes = [e.data for e in rec.of_type("node_event") if e.node_id == "c" and e.data["kind"] == "note"]
    assert notes and "approximated from the top logprobs" in notes[0]["message"]


def test_without_logprobs_the_verifier_says_what_to_turn_on(llama_provide: Any,
                                                            server: tuple[str, list[dict[str, Any]]]) -> None:
    result = Scheduler(default_registry(), llama_provide).run(_workflow(server[0], False), seed=0)
    assert result.status == FAILED and "turn on the sampler's `logprobs`" in (result.error or "")
