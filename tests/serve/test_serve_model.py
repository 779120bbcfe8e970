"""A real `metagen serve` on the bundled model, called with the openai SDK: workflows by name (streaming, n,
seeds), plain completions with logprobs and a JSON schema, every error of the API, API keys, and a client that
disconnects cancelling its run (the trace says so)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from tests.serve.conftest import API_KEY, ServeProcess, metagen

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "What is 3 + 4?"}]
STORY = [{"role": "user", "content": "Write a short story about a cat who learns to sail."}]


@pytest.fixture(scope="module")
def real(serve_factory: Any) -> ServeProcess:
    return serve_factory(api_key=API_KEY)


def _model_file(server: ServeProcess) -> str:
    return next(m.id for m in server.client().models.list() if m.id.endswith(".gguf"))


def test_list_models(real: ServeProcess) -> None:
    ids = [m.id for m in real.client().models.list()]
    assert {"chain_of_thought", "self_consistency", "best_of_n", "story"} <= set(ids)
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in ids


def test_an_example_workflow_answers_and_is_traced(real: ServeProcess) -> None:
    raw = real.client().chat.completions.with_raw_response.create(model="chain_of_thought", messages=QUESTION, seed=1)
    reply = raw.parse()
    meta = reply.model_dump()["metagen"]
    run_id = raw.headers["x-metagen-run-id"]
    assert reply.choices[0].message.content.strip() and reply.choices[0].message.content == meta["outputs"][0][
        "answer"]
    assert meta["stats"][0]["lm_calls"] == 2
    assert reply.usage.total_tokens == meta["stats"][0]["prompt_tokens"] + meta["stats"][0]["completion_tokens"]
    listed = metagen("traces", "list", "--db", str(real.db), home=real.home)
    assert listed.returncode == 0 and run_id in listed.stdout and "chain-of-thought" in listed.stdout
    assert {r["id"]: r["status"] for r in real.traces()}[run_id] == "succeeded"


def test_streaming_sends_tokens_before_the_run_ends(real: ServeProcess) -> None:
    arrivals: list[tuple[float, str]] = []
    chunks = []
    with real.client().chat.completions.with_streaming_response.create(
            model="story", messages=STORY, stream=True, stream_options={"include_usage": True}) as response:
        run_id = response.headers["x-metagen-run-id"]
        for chunk in response.parse():
            chunks.append(chunk)
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append((time.time(), chunk.choices[0].delta.content))
    text = "".join(piece for _, piece in arrivals)
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason).model_dump()["metagen"]
    assert text == final["outputs"][0]["answer"] and len(arrivals) > 10
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == final["stats"][0]["completion_tokens"]
    run = {r["id"]: r for r in real.traces()}[run_id]
    assert run["status"] == "succeeded"
    assert arrivals[0][0] < run["ended_at"] - 0.1, "the first token arrived only when the run ended"


def test_n_independent_runs(real: ServeProcess) -> None:
    reply = real.client().chat.completions.create(model="story", messages=STORY, n=2, temperature=0.9, max_tokens=24,
                                                  seed=5)
    meta = reply.model_dump()["metagen"]
    texts = [c.message.content for c in reply.choices]
    assert len(texts) == 2 and all(texts) and texts[0] != texts[1]
    assert meta["status"] == ["succeeded", "succeeded"] and meta["overrides"] == {"temperature": ["write"],
                                                                                 "max_tokens": ["write"]}
    assert reply.usage.completion_tokens == sum(s["completion_tokens"] for s in meta["stats"])


def test_plain_completion_with_logprobs_and_a_json_schema(real: ServeProcess) -> None:
    model = _model_file(real)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    reply = real.client().completions.create(
        model=model, prompt="Here is a person as JSON: ", max_tokens=60, temperature=0, logprobs=2, seed=1,
        extra_body={"response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}})
    choice = reply.choices[0]
    person = json.loads(choice.text)
    assert isinstance(person["name"], str) and isinstance(person["age"], int)
    assert "".join(choice.logprobs.tokens) == choice.text
    assert all(lp <= 0 for lp in choice.logprobs.token_logprobs)
    assert all(len(top) <= 2 for top in choice.logprobs.top_logprobs)
    chat = real.client().chat.completions.create(model=model, messages=STORY, n=4, max_tokens=16, seed=2,
                                                 logprobs=True, top_logprobs=1, stop=["\n"])
    assert len(chat.choices) == 4 and len({c.message.content for c in chat.choices}) > 1
    assert chat.choices[0].logprobs.content[0].top_logprobs
    assert chat.usage.completion_tokens == sum(len(c.logprobs.content) for c in chat.choices)


def test_errors_of_the_api(real: ServeProcess) -> None:
    client = real.client()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=QUESTION)
    with pytest.raises(openai.BadRequestError) as invalid:
        client.chat.completions.create(model="invalid", messages=QUESTION)
    assert invalid.value.body["issues"]
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="story", messages=QUESTION, max_tokens=0)
    assert bad.value.param == "max_tokens"
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="fails", messages=QUESTION)
    assert failed.value.body["node"] == "broken" and failed.value.body["cause"] == "NodeError"
    with pytest.raises(openai.AuthenticationError):
        real.client(api_key="not-the-key").models.list()
    assert httpx.post(f"{real.base_url}/chat/completions", json={}).status_code == 401


def test_a_client_that_disconnects_cancels_its_run(real: ServeProcess) -> None:
    count = [{"role": "user", "content": "1, 2, 3, 4, 5, 6, 7, 8,"}]
    started = time.monotonic()
    with real.client().chat.completions.with_streaming_response.create(
            model="long_count", messages=count, stream=True) as response:
        run_id = response.headers["x-metagen-run-id"]
        for chunk in response.parse():
            if chunk.choices and chunk.choices[0].delta.content:
                break
    deadline = time.monotonic() + 30
    run: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = {r["id"]: r for r in real.traces()}.get(run_id, {})
        if run.get("status") not in (None, "running"):
            break
        time.sleep(0.3)
    assert run["status"] == "cancelled" and "client disconnected" in run["error"]
    assert run["completion_tokens"] < 2048 and time.monotonic() - started < 30
