"""`metagen serve --dry-run` through the openai SDK: the routes, streaming, n, seeds, inputs, every error in the
OpenAI shape with its status, API keys and the share-mode rules (the fake model: fast and scripted)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from tests.serve.conftest import API_KEY, ServeProcess

COT = "chain_of_thought"
QUESTION = [{"role": "user", "content": "What is 6 times 7?"}]


@pytest.fixture(scope="module")
def dry(serve_factory: Any) -> ServeProcess:
    return serve_factory("--dry-run")


def _shape(error: dict[str, Any]) -> None:
    assert set(error) >= {"message", "type", "param", "code"} and error["message"]


def test_models_lists_workflows_and_model_files(dry: ServeProcess) -> None:
    models = {m.id: m for m in dry.client().models.list()}
    assert {COT, "best_of_n", "story", "fails"} <= set(models)
    assert all(m.owned_by == "metagen" for m in models.values())
    cot = models[COT].model_dump()
    assert cot["description"].startswith("Chained generation") and cot["metagen"]["inputs"] == {
        "question": {"type": "text", "description": "A short arithmetic question"}}
    files = [i for i in models if i.endswith(".gguf")]
    assert files and models[files[0]].model_dump()["metagen"] == {"kind": "model"}
    assert dry.client().models.retrieve(COT).id == COT


def test_chat_completion_of_a_workflow_carries_its_run(dry: ServeProcess) -> None:
    raw = dry.client().chat.completions.with_raw_response.create(model=COT, messages=QUESTION, seed=3)
    reply = raw.parse()
    run_id = raw.headers["x-metagen-run-id"]
    meta = reply.model_dump()["metagen"]
    assert meta["run_id"] == run_id and meta["seeds"] == [3] and meta["status"] == ["succeeded"]
    assert reply.id == f"chatcmpl-{run_id}" and reply.object == "chat.completion" and reply.model == COT
    assert reply.choices[0].message.content == meta["outputs"][0]["answer"]
    assert reply.usage.completion_tokens == meta["stats"][0]["completion_tokens"] > 0
    again = dry.client().chat.completions.create(model=COT, messages=QUESTION, seed=3)
    assert again.choices[0].message.content == reply.choices[0].message.content
    assert run_id in {r["id"] for r in dry.traces()}


def test_stream_chunks_add_up_to_the_answer_with_usage_last(dry: ServeProcess) -> None:
    stream = dry.client().chat.completions.create(model=COT, messages=QUESTION, stream=True, seed=4,
                                                  stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop").model_dump()["metagen"]
    assert text == final["outputs"][0]["answer"] and len([c for c in chunks if c.choices]) > 3
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == final["stats"][0]["completion_tokens"]
    assert all(c.usage is None for c in chunks[:-1])


def test_n_runs_with_derived_seeds_and_summed_usage(dry: ServeProcess) -> None:
    reply = dry.client().chat.completions.create(model=COT, messages=QUESTION, n=2, seed=11)
    meta = reply.model_dump()["metagen"]
    assert [c.index for c in reply.choices] == [0, 1] and len(set(meta["run_ids"])) == 2
    assert meta["seeds"][0] == 11 and meta["seeds"][1] != 11
    assert reply.usage.prompt_tokens == sum(s["prompt_tokens"] for s in meta["stats"])
    assert reply.usage.completion_tokens == sum(s["completion_tokens"] for s in meta["stats"])


def test_several_inputs_come_from_extra_body(dry: ServeProcess) -> None:
    reply = dry.client().chat.completions.create(model="two_inputs", messages=[],
                                                 extra_body={"inputs": {"question": "why", "style": "haiku"}})
    assert "haiku" in reply.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as info:
        dry.client().chat.completions.create(model="two_inputs", messages=QUESTION)
    assert info.value.code == "missing_inputs" and info.value.body["missing"] == ["question", "style"]


def test_overrides_are_reported(dry: ServeProcess) -> None:
    reply = dry.client().chat.completions.create(model="best_of_n", messages=QUESTION, temperature=0.3, max_tokens=8)
    assert reply.model_dump()["metagen"]["overrides"] == {"temperature": ["sample"], "max_tokens": ["sample"]}


def test_plain_model_on_the_fake_engine(dry: ServeProcess) -> None:
    model = next(m.id for m in dry.client().models.list() if m.id.endswith(".gguf"))
    reply = dry.client().completions.create(model=model, prompt="Say hello", n=3, max_tokens=5, logprobs=1)
    assert len(reply.choices) == 3 and reply.choices[0].logprobs.tokens
    chat = dry.client().chat.completions.create(model="bundled", messages=QUESTION, stop=["x"])
    assert chat.model == model and chat.choices[0].message.content


def test_errors_have_the_openai_shape_and_status(dry: ServeProcess) -> None:
    client = dry.client()
    with pytest.raises(openai.NotFoundError) as nf:
        client.chat.completions.create(model="no_such_thing", messages=QUESTION)
    assert nf.value.code == "model_not_found" and nf.value.param == "model"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="../etc/passwd", messages=QUESTION)
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="invalid", messages=QUESTION)
    assert bad.value.code == "invalid_workflow"
    assert {i["code"] for i in bad.value.body["issues"]} == {"bad_param", "unknown_ref"}
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=COT, messages=QUESTION, temperature=3)
    assert bad.value.param == "temperature"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=COT, messages=QUESTION, n=99)
    assert bad.value.param == "n"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=COT, messages=QUESTION, logprobs=True)
    assert bad.value.param == "logprobs"
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model=COT, prompt="x")
    assert bad.value.code == "model_not_supported"
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="fails", messages=QUESTION)
    assert failed.value.status_code == 500
    body = failed.value.body
    assert (body["code"], body["node"], body["cause"]) == ("run_failed", "broken", "NodeError")
    assert "for_each" in body["message"] and body["run_id"]
    with pytest.raises(openai.APIError) as in_stream:
        list(client.chat.completions.create(model="fails", messages=QUESTION, stream=True))
    assert in_stream.value.body["node"] == "broken"
    with dry.http() as http:
        as_json = {"content-type": "application/json"}
        for response, status in ((http.post("/chat/completions", content=b"{not json", headers=as_json), 400),
                                 (http.post("/chat/completions", content=b"[" + b"1," * 600_000 + b"1]",
                                            headers=as_json), 413),
                                 (http.post("/chat/completions", content=b"{}"), 415),  # no Content-Type: no run
                                 (http.get("/chat/completions"), 405), (http.get("/nothing/here"), 404),
                                 (http.post("/chat/completions", json=[1]), 400)):
            assert response.status_code == status, response.text
            _shape(response.json()["error"])
        assert httpx.get(dry.base_url.removesuffix("/v1") + "/elsewhere").status_code == 404


@pytest.fixture(scope="module")
def slow(serve_factory: Any) -> ServeProcess:
    return serve_factory("--dry-run", "--fake-latency", "1.0", "--max-concurrent-runs", "1", "--max-queue", "0")


def test_a_full_queue_is_429_with_retry_after(slow: ServeProcess) -> None:
    first: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: first.update(
        reply=slow.client().chat.completions.create(model=COT, messages=QUESTION)))
    thread.start()
    time.sleep(0.5)
    with pytest.raises(openai.RateLimitError) as info:
        slow.client().chat.completions.create(model=COT, messages=QUESTION)
    assert info.value.status_code == 429 and int(info.value.response.headers["retry-after"]) > 0
    assert info.value.code == "rate_limit_exceeded"
    thread.join(30)
    assert first["reply"].choices[0].message.content


def test_a_client_that_leaves_cancels_its_run(slow: ServeProcess) -> None:
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{slow.base_url}/chat/completions",
                         json={"model": COT, "messages": QUESTION, "stream": True}) as response:
            run_id = response.headers["x-metagen-run-id"]
            next(response.iter_lines())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        runs = {r["id"]: r for r in slow.traces()}
        if run_id in runs and runs[run_id]["status"] != "running":
            break
        time.sleep(0.3)
    assert runs[run_id]["status"] == "cancelled" and "disconnected" in (runs[run_id]["error"] or "")


def test_a_client_that_leaves_without_streaming_cancels_its_run(slow: ServeProcess) -> None:
    before = {r["id"] for r in slow.traces()}
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{slow.base_url}/chat/completions", json={"model": COT, "messages": QUESTION}, timeout=0.6)
    deadline = time.monotonic() + 20
    new: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        new = [r for r in slow.traces() if r["id"] not in before]
        if new and new[0]["status"] != "running":
            break
        time.sleep(0.3)
    assert new[0]["status"] == "cancelled" and new[0]["lm_calls"] <= 1


@pytest.fixture(scope="module")
def shared(serve_factory: Any) -> ServeProcess:
    return serve_factory("--dry-run", "--share-mode", "--cap-lm-calls", "1", "--cap-tokens", "500",
                         api_key=API_KEY)


def test_an_api_key_is_required_when_set(shared: ServeProcess) -> None:
    with pytest.raises(openai.AuthenticationError) as missing:
        shared.client(api_key="wrong").models.list()
    assert missing.value.status_code == 401 and missing.value.code == "invalid_api_key"
    response = httpx.get(f"{shared.base_url}/models")
    assert response.status_code == 401 and response.json()["error"]["code"] == "missing_api_key"
    assert shared.client().chat.completions.create(model="story", messages=QUESTION).choices[0].message.content


def test_share_mode_refusals(shared: ServeProcess) -> None:
    client = shared.client()
    with pytest.raises(openai.PermissionDeniedError) as refused:
        client.chat.completions.create(model="instruction_best_of_n", messages=[], extra_body={
            "inputs": {"prompt": "hi", "check": "all_lowercase"}})
    assert refused.value.code == "refused_by_share_mode"
    assert refused.value.body["issues"][0]["code"] == "python_disabled"
    with pytest.raises(openai.BadRequestError) as capped:
        client.chat.completions.create(model=COT, messages=QUESTION)
    assert capped.value.code == "budget_exceeded" and "max_lm_calls=1" in capped.value.message
    with pytest.raises(openai.BadRequestError) as too_many:
        client.completions.create(model="bundled", prompt="x", n=4, max_tokens=200)
    assert too_many.value.param == "max_tokens"
    runs = shared.traces()
    assert json.dumps(runs[0]["status"]) == '"budget_exceeded"'


def test_the_index_lists_every_door_served(dry: ServeProcess) -> None:
    # was: a hand-typed list of the first four routes, without /v1/responses, /v1/messages or /mcp
    index = httpx.get(dry.base_url.removesuffix("/v1") + "/", timeout=10).json()
    assert {"POST /v1/chat/completions", "POST /v1/responses", "GET /v1/responses/{response_id}",
            "DELETE /v1/responses/{response_id}", "POST /v1/messages", "GET /v1/models/{model_id}",
            "GET /health"} <= set(index["routes"])
    assert not any("mcp" in route for route in index["routes"])  # not asked for with --mcp


def test_the_route_list_reads_mounted_apps_and_an_mcp_endpoint() -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    from app.serve.server import route_list

    async def ok(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    inner = Starlette(routes=[Route("/models/{model_id:path}", ok, methods=["GET"])])
    routes = [Mount("/v1", app=inner), Route("/mcp", ok, methods=["GET", "POST", "DELETE"])]
    assert route_list(routes) == ["GET /v1/models/{model_id}", "DELETE /mcp", "GET /mcp", "POST /mcp"]
