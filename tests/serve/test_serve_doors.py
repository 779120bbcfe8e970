"""`metagen serve --dry-run` through the openai SDK's Responses API and the anthropic SDK's Messages API (the fake
model: fast and scripted): answers, the streamed events in order, stored responses continued after a restart,
read and deleted by their own API key only, failures mid-stream, and errors in each API's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.serve.conftest import API_KEY, ServeProcess, start_serve, stop_serve

COT = "chain_of_thought"
OTHER_KEY = "other-key-456"
FAKE_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
RESPONSE_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
                   "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                   "response.content_part.done", "response.output_item.done", "response.completed"]


@pytest.fixture(scope="module")
def dry(serve_factory: Any) -> ServeProcess:
    return serve_factory("--dry-run", api_key=API_KEY)


def _anthropic(server: ServeProcess, api_key: str = API_KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=api_key, max_retries=0,
                               timeout=120)


def _collapse(kinds: list[str]) -> list[str]:
    """Event types with runs of deltas collapsed to one."""
    return [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]


def test_a_workflow_answers_on_responses_with_its_run_and_usage(dry: ServeProcess) -> None:
    raw = dry.client().responses.with_raw_response.create(model=COT, input="What is 6 times 7?",
                                                          extra_body={"seed": 3})
    response = raw.parse()
    meta = response.model_dump()["metagen"]
    assert response.status == "completed" and response.object == "response" and response.model == COT
    assert response.output_text == meta["outputs"][0]["answer"] and response.output_text
    assert raw.headers["x-metagen-run-id"] == meta["run_id"]
    stats = meta["stats"][0]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (stats["prompt_tokens"],
                                                                           stats["completion_tokens"])
    assert meta["run_id"] in {r["id"] for r in dry.traces()}
    assert dry.client().responses.retrieve(response.id).output_text == response.output_text


def test_streamed_responses_send_the_documented_events_in_order(dry: ServeProcess) -> None:
    events = list(dry.client().responses.create(model="story", input="Tell me a story about a cat.", stream=True))
    kinds = [e.type for e in events]
    assert _collapse(kinds) == RESPONSE_EVENTS and kinds.count("response.output_text.delta") > 3
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert text == final.output_text == events[-4].text and final.usage.output_tokens > 0
    assert events[0].response.status == "in_progress" and final.status == "completed"


def _two_key_server(home: Path) -> ServeProcess:
    keys = home.parent / "keys.txt"
    keys.write_text(f"{API_KEY}\n{OTHER_KEY}\n", encoding="utf-8")
    server = start_serve(home, ["--dry-run", "--api-key-file", str(keys)])
    server.api_key = API_KEY
    return server


def test_a_model_file_continues_a_stored_conversation_after_a_restart(tmp_path: Path) -> None:
    first_server = _two_key_server(tmp_path / "home")
    try:
        first = first_server.client().responses.create(model=FAKE_MODEL, input="My name is Ada.",
                                                       instructions="Be brief.", max_output_tokens=8)
    finally:
        stop_serve(first_server)
    server = _two_key_server(tmp_path / "home")
    try:
        client = server.client()
        second = client.responses.create(model=FAKE_MODEL, input="What is my name?", previous_response_id=first.id)
        assert second.previous_response_id == first.id and second.output_text
        assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
        assert client.responses.retrieve(first.id).output_text == first.output_text
        with pytest.raises(openai.NotFoundError):  # another key's responses are not even said to exist
            server.client(api_key=OTHER_KEY).responses.retrieve(first.id)
        client.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError) as gone:
            client.responses.retrieve(first.id)
        assert gone.value.body["param"] == "response_id"
        with pytest.raises(openai.NotFoundError) as missing:
            client.responses.create(model=FAKE_MODEL, input="Again?", previous_response_id=first.id)
        assert missing.value.body["code"] == "previous_response_not_found"
    finally:
        stop_serve(server)


def test_store_false_keeps_nothing_and_a_workflow_says_it_saw_one_turn(dry: ServeProcess) -> None:
    client = dry.client()
    kept = client.responses.create(model=COT, input="What is 2 + 2?")
    unkept = client.responses.create(model=COT, input="What is 2 + 3?", store=False)
    assert unkept.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unkept.id)
    raw = client.responses.with_raw_response.create(model=COT, input="And 3 + 3?", previous_response_id=kept.id)
    assert "earlier turns not seen" in raw.headers["x-metagen-warning"] and raw.parse().output_text


def test_responses_refusals_name_the_field(dry: ServeProcess) -> None:
    client = dry.client()
    cases = [({"tools": [{"type": "function", "name": "f", "parameters": {}}],
               "tool_choice": {"type": "function", "name": "g"}}, "tool_choice"),
             ({"background": True}, "background"),
             ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]},
              "input[0].content[0]"),
             ({"text": {"format": {"type": "json_object"}}}, "text.format")]
    for extra, param in cases:
        body = {"model": COT, "input": "Hi", **extra}
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(**body)
        assert caught.value.body["param"] == param, caught.value.body
    with pytest.raises(openai.NotFoundError) as unknown:
        client.responses.create(model="no_such_workflow", input="Hi")
    assert unknown.value.body["code"] == "model_not_found"


def test_a_run_that_fails_mid_stream_ends_with_error_and_response_failed(dry: ServeProcess) -> None:
    events = list(dry.client().responses.create(model="fails", input="Hi", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == RESPONSE_EVENTS[:4] and kinds[-2:] == ["error", "response.failed"]
    assert events[-2].code == "run_failed" and "broken" in events[-2].message
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.code == "server_error" and "broken" in failed.error.message


def test_messages_answer_with_a_workflow_and_a_model_file(dry: ServeProcess) -> None:
    client = _anthropic(dry)
    raw = client.messages.with_raw_response.create(model=COT, max_tokens=1024, system="Be brief.",
                                                   messages=[{"role": "user", "content": "What is 6 times 7?"}])
    message = raw.parse()
    meta = message.model_dump()["metagen"]
    assert message.type == "message" and message.role == "assistant" and message.stop_reason == "end_turn"
    assert message.content[0].text == meta["outputs"][0]["answer"]
    assert raw.headers["x-metagen-run-id"] == meta["run_id"] and "max_tokens" not in meta.get("overrides", {})
    usage = message.usage
    assert usage.input_tokens + usage.cache_read_input_tokens == meta["stats"][0]["prompt_tokens"]
    assert usage.output_tokens == meta["stats"][0]["completion_tokens"]
    capped = client.messages.create(model=COT, max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    assert capped.model_dump()["metagen"]["overrides"]["max_tokens"]
    stopped = client.messages.create(model=FAKE_MODEL, max_tokens=64, stop_sequences=["ends"],
                                     messages=[{"role": "user", "content": "This line ends here"}])
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "ends"
    cut = client.messages.create(model=FAKE_MODEL, max_tokens=2,
                                 messages=[{"role": "user", "content": "one two three four five six"}])
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 2


def test_streamed_messages_send_the_documented_events(dry: ServeProcess) -> None:
    client = _anthropic(dry)
    with client.messages.stream(model="story", max_tokens=256,
                                messages=[{"role": "user", "content": "Tell me a story about a cat."}]) as stream:
        events = [event for event in stream if event.type != "text"]
        final = stream.get_final_message()
    kinds = [event.type for event in events]
    assert _collapse(kinds) == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                                "message_delta", "message_stop"]
    assert kinds.count("content_block_delta") > 3
    run_id = events[0].message.model_dump()["metagen"]["run_id"]
    meta = events[-2].model_dump()["metagen"]
    assert meta["run_id"] == run_id and final.content[0].text == meta["outputs"][0]["answer"]
    assert final.usage.output_tokens == meta["stats"][0]["completion_tokens"] > 0 and final.stop_reason == "end_turn"


def test_messages_errors_have_anthropics_shape(dry: ServeProcess) -> None:
    client = _anthropic(dry)
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model=COT, max_tokens=64, tools=[{"name": "f", "input_schema": {"type": "object"}}],
                               tool_choice={"type": "tool", "name": "g"}, messages=[{"role": "user", "content": "Hi"}])
    assert bad.value.body["type"] == "error" and bad.value.body["error"]["type"] == "invalid_request_error"
    assert bad.value.body["error"]["param"] == "tool_choice"
    with pytest.raises(anthropic.NotFoundError) as unknown:
        client.messages.create(model="no_such_workflow", max_tokens=8, messages=[{"role": "user", "content": "Hi"}])
    assert unknown.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.AuthenticationError) as denied:
        _anthropic(dry, "wrong-key").messages.create(model=COT, max_tokens=8,
                                                     messages=[{"role": "user", "content": "Hi"}])
    assert denied.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.InternalServerError) as failed:
        client.messages.create(model="fails", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    assert failed.value.body["error"]["type"] == "api_error" and "broken" in failed.value.body["error"]["message"]
    with httpx.stream("POST", f"{dry.base_url}/messages", headers={"x-api-key": API_KEY}, timeout=60,
                      json={"model": "fails", "max_tokens": 64, "stream": True,
                            "messages": [{"role": "user", "content": "Hi"}]}) as response:
        lines = [line for line in response.iter_lines() if line.startswith("event: ")]
    assert lines[0] == "event: message_start" and lines[-1] == "event: error"
