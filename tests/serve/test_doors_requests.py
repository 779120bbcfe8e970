"""The request checks of /v1/responses and /v1/messages (each refusal names its field and code), and the shapes
they answer with, validated by the openai and anthropic SDKs' own types (no server, no model)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from app.serve.answer import Answer
from app.serve.errors import ApiError
from app.serve.messages_params import parse_messages
from app.serve.messages_shapes import closing_events, error_body, message_object
from app.serve.params import MAX_TOKENS_LIMIT
from app.serve.responses_params import parse_responses
from app.serve.responses_shapes import ResponseEvents, failure_error, output_message, response_object, text_part
from backends.base import TokenCounts

COUNTS = TokenCounts(prompt_tokens=20, prompt_tokens_evaluated=8, prompt_tokens_cached=12, completion_tokens=5)


def _refused(parse: Any, body: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(body)
    assert caught.value.status == 400
    return caught.value


@pytest.mark.parametrize(("extra", "param", "code"), [
    ({"background": True}, "background", "unsupported_parameter"),
    ({"conversation": "conv_1"}, "conversation", "unsupported_parameter"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format", "invalid_value"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0]", "unsupported_parameter"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].content[0]", "unsupported_parameter"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]", "unsupported_parameter"),
    ({"tools": [{"type": "function"}]}, "tools[0].name", "missing_required_parameter"),
    ({"tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}},
     "tool_choice", "invalid_value"),
    ({"tool_choice": "sometimes"}, "tool_choice", "invalid_value"),
    ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role", "invalid_value"),
    ({"input": []}, "input", "invalid_type"),
    ({"input": None}, "input", "missing_required_parameter"),
    ({"max_output_tokens": 0}, "max_output_tokens", "invalid_value"),
    ({"temperature": 3}, "temperature", "invalid_value"),
    ({"store": "yes"}, "store", "invalid_type"),
    ({"previous_response_id": 7}, "previous_response_id", "invalid_type"),
])
def test_responses_refuses_what_it_cannot_honour_naming_the_field(extra: dict[str, Any], param: str,
                                                                   code: str) -> None:
    error = _refused(parse_responses, {"model": "story", "input": "Hi", **extra})
    assert (error.param, error.code) == (param, code), error.message
    assert param.split("[")[0].split(".")[0] in error.message


def test_responses_takes_text_and_the_harmless_defaults() -> None:
    req = parse_responses({"model": " story ", "instructions": "Be brief.", "max_output_tokens": 16,
                           "temperature": 0.5, "top_p": 0.9, "store": False, "stream": True, "tools": [],
                           "tool_choice": "auto", "include": [], "truncation": "disabled", "seed": 3,
                           "parallel_tool_calls": True, "metadata": {"inputs": {"question": "q"}, "tag": "a"},
                           "input": [{"role": "developer", "content": "Use words."},
                                     {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                                      "content": [{"type": "output_text", "text": "Earlier", "annotations": []}]},
                                     {"role": "user", "content": [{"type": "input_text", "text": "A "},
                                                                  {"type": "input_text", "text": "question"}]}]})
    assert req.api.model == "story" and req.api.stream and not req.store and req.instructions == "Be brief."
    s = req.api.sampling
    assert (s.max_tokens, s.temperature, s.top_p, s.seed, s.n) == (16, 0.5, 0.9, 3, 1)
    assert req.input_messages == [{"role": "system", "content": "Use words."},
                                  {"role": "assistant", "content": "Earlier"},
                                  {"role": "user", "content": "A question"}]
    assert req.api.inputs == {"question": "q"} and req.metadata["tag"] == "a"
    schema = parse_responses({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "n",
                                                                                "schema": {"type": "object"}}}})
    assert schema.api.sampling.json_schema == '{"type": "object"}'


@pytest.mark.parametrize(("extra", "param", "code"), [
    ({"max_tokens": None}, "max_tokens", "missing_required_parameter"),
    ({"max_tokens": 0}, "max_tokens", "invalid_value"),
    ({"temperature": 1.5}, "temperature", "invalid_value"),
    ({"tool_choice": {"type": "sometimes"}}, "tool_choice", "invalid_value"),
    ({"tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "g"}}, "tool_choice",
     "invalid_value"),
    ({"tools": [{"name": "f", "input_schema": 3}]}, "tools[0].input_schema", "invalid_type"),
    ({"stop_sequences": [1]}, "stop_sequences", "invalid_type"),
    ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role", "invalid_value"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "messages[0].content[0]",
     "unsupported_parameter"),
    ({"messages": []}, "messages", "invalid_type"),
    ({"system": [{"type": "image"}]}, "system[0]", "unsupported_parameter"),
    ({"output_config": {"format": {"type": "xml"}}}, "output_config.format", "invalid_value"),
])
def test_messages_refuses_what_it_cannot_honour_naming_the_field(extra: dict[str, Any], param: str,
                                                                  code: str) -> None:
    body = {"model": "story", "max_tokens": 32, "messages": [{"role": "user", "content": "Hi"}], **extra}
    error = _refused(parse_messages, body)
    assert (error.param, error.code) == (param, code), error.message


def test_messages_takes_system_blocks_and_caps_a_huge_max_tokens() -> None:
    req = parse_messages({"model": "story", "max_tokens": 64000, "stop_sequences": ["\n\n"], "temperature": 0.2,
                          "system": [{"type": "text", "text": "Be ", "cache_control": {"type": "ephemeral"}},
                                     {"type": "text", "text": "brief."}],
                          "tool_choice": {"type": "auto"}, "thinking": {"type": "disabled"}, "tools": [],
                          "metadata": {"user_id": "u"}, "stream": True,
                          "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]})
    assert req.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    assert req.sampling.max_tokens == MAX_TOKENS_LIMIT and req.sampling.stop == ("\n\n",) and req.stream
    structured = parse_messages({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
                                 "cache_control": {"type": "ephemeral"}, "speed": "fast",
                                 "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}})
    assert structured.sampling.json_schema == '{"type": "object"}'


def _events(raw: list[bytes]) -> list[dict[str, Any]]:
    """Named SSE events back into (name, data) pairs, checking the name matches the data's type."""
    import json

    out = []
    for chunk in raw:
        name_line, data_line = chunk.decode().strip().split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert name_line == f"event: {data['type']}"
        out.append(data)
    return out


def test_response_objects_and_events_parse_with_the_openai_sdk() -> None:
    from openai.types.responses import Response, ResponseStreamEvent

    req = parse_responses({"model": "story", "input": "Hi", "instructions": "Be brief.", "metadata": {"a": "b"}})
    final = response_object("resp_1", req, "story", created_at=1, status="completed",
                            output=[output_message("msg_1", "Hello")], counts=COUNTS, metagen={"run_id": "r"})
    parsed = Response.model_validate(final)
    assert parsed.output_text == "Hello" and parsed.usage is not None and parsed.usage.total_tokens == 25
    assert parsed.usage.input_tokens_details.cached_tokens == 12
    events = ResponseEvents("msg_1")
    failed = ApiError(500, "run r failed at node 'x'", code="run_failed")
    raw = [events("response.created", response=response_object("resp_1", req, "story", created_at=1,
                                                                status="in_progress", output=[])),
           events("response.output_item.added", output_index=0, item=output_message("msg_1", None, "in_progress")),
           events.on_text("response.content_part.added", part=text_part("")),
           events.on_text("response.output_text.delta", delta="Hel", logprobs=[]),
           events.on_text("response.output_text.done", text="Hello", logprobs=[]),
           events.on_text("response.content_part.done", part=text_part("Hello")),
           events("response.output_item.done", output_index=0, item=output_message("msg_1", "Hello")),
           events("response.completed", response=final),
           events("error", code="run_failed", message="boom", param=None),
           events("response.failed", response=response_object("resp_1", req, "story", created_at=1, status="failed",
                                                               output=[], error=failure_error(failed)))]
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    parsed_events = [adapter.validate_python(e) for e in _events(raw)]
    assert [e.sequence_number for e in parsed_events] == list(range(len(raw)))
    assert parsed_events[-1].response.error.message == "run r failed at node 'x'"


def test_message_objects_events_and_errors_parse_with_the_anthropic_sdk() -> None:
    from anthropic.types import Message, RawMessageStreamEvent
    from anthropic.types.shared import ErrorResponse

    answer = Answer("Hello", COUNTS, stop="\n\n")
    message = Message.model_validate(message_object("msg_1", "story", answer))
    assert message.content[0].text == "Hello" and message.stop_reason == "stop_sequence"
    assert message.stop_sequence == "\n\n" and (message.usage.input_tokens, message.usage.cache_read_input_tokens,
                                                 message.usage.output_tokens) == (8, 12, 5)
    assert message_object("m", "story", Answer("x", COUNTS, finish="length"))["stop_reason"] == "max_tokens"
    opening = {"type": "message_start", "message": message_object("msg_1", "story", None)}
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    kinds = [adapter.validate_python(e).type for e in [opening, *_events(closing_events(answer))]]
    assert kinds == ["message_start", "content_block_stop", "message_delta", "message_stop"]
    for status, kind in ((400, "invalid_request_error"), (401, "authentication_error"), (404, "not_found_error"),
                         (429, "rate_limit_error"), (500, "api_error")):
        body = error_body(ApiError(status, "what went wrong", param="max_tokens", code="x"))
        parsed = ErrorResponse.model_validate(body)
        assert parsed.type == "error" and parsed.error.type == kind and parsed.error.message == "what went wrong"
