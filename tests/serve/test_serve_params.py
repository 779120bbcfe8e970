"""Request bodies: every field checked, a 400 naming the field at fault; the SSE answer stream adds up."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.serve.errors import ApiError
from app.serve.params import parse_chat, parse_completion
from app.serve.sse import AnswerStream, comment, data

CHAT = {"model": "chain_of_thought", "messages": [{"role": "user", "content": "hi"}]}


def _error(fn: Any, body: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(body)
    return info.value


def test_a_full_chat_body_is_read() -> None:
    req = parse_chat({**CHAT, "n": 3, "seed": 7, "temperature": 0.5, "top_p": 0.9, "max_tokens": 20,
                      "stop": "\n", "logprobs": True, "top_logprobs": 2, "stream": True,
                      "stream_options": {"include_usage": True},
                      "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                          "type": "object"}}},
                      "messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                {"type": "text", "text": "b"}]}]})
    s = req.sampling
    assert (s.n, s.seed, s.temperature, s.top_p, s.max_tokens, s.stop, s.logprobs) == (3, 7, 0.5, 0.9, 20, ("\n",), 2)
    assert json.loads(s.json_schema or "") == {"type": "object"}
    assert req.stream and req.include_usage
    assert req.messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "ab"}]


def test_workflow_inputs_come_from_the_body_or_metadata() -> None:
    assert parse_chat({**CHAT, "inputs": {"a": 1}}).inputs == {"a": 1}
    assert parse_chat({**CHAT, "metadata": {"inputs": '{"a": "x"}'}}).inputs == {"a": "x"}
    assert parse_chat(CHAT).inputs is None


@pytest.mark.parametrize(("change", "param"), [
    ({"n": 0}, "n"), ({"n": 17}, "n"), ({"n": 1.5}, "n"), ({"n": True}, "n"),
    ({"max_tokens": 0}, "max_tokens"), ({"max_completion_tokens": -1}, "max_completion_tokens"),
    ({"temperature": 2.5}, "temperature"), ({"temperature": -0.1}, "temperature"), ({"temperature": "hot"},
                                                                                     "temperature"),
    ({"top_p": 0}, "top_p"), ({"seed": "1"}, "seed"), ({"stop": [1]}, "stop"), ({"stop": ["x"] * 17}, "stop"),
    ({"top_logprobs": 3}, "top_logprobs"), ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"stream": "yes"}, "stream"), ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {}}}, "response_format"),
    ({"messages": None}, "messages"), ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content"),
    ({"model": ""}, "model"), ({"model": 3}, "model"), ({"tools": [{"type": "function"}]}, "tools[0]"),
    ({"inputs": [1]}, "inputs"), ({"metadata": {"inputs": "not json"}}, "metadata.inputs"),
])
def test_bad_chat_fields_are_400_naming_the_param(change: dict[str, Any], param: str) -> None:
    err = _error(parse_chat, {**CHAT, **change})
    assert err.status == 400 and err.param == param
    assert set(err.body()["error"]) >= {"message", "type", "param", "code"}


def test_completion_bodies() -> None:
    req = parse_completion({"model": "m", "prompt": ["once"], "logprobs": 2, "max_tokens": 5})
    assert (req.prompt, req.sampling.logprobs, req.sampling.max_tokens) == ("once", 2, 5)
    assert _error(parse_completion, {"model": "m", "prompt": ["a", "b"]}).param == "prompt"
    assert _error(parse_completion, {"model": "m", "prompt": [1, 2]}).param == "prompt"
    assert _error(parse_completion, {"model": "m", "prompt": "a", "echo": True}).param == "echo"
    assert _error(parse_completion, {"model": "m"}).code == "missing_required_parameter"
    assert _error(parse_completion, [1]).status == 400


def test_the_answer_stream_adds_up_to_the_stripped_answer() -> None:
    pieces = ["\n", " ", "Hello", " ", "world", "\n\n", "again", " \n"]
    stream = AnswerStream()
    sent = "".join(stream.feed(p) for p in pieces)
    final = "".join(pieces).strip()
    assert sent == "Hello world\n\nagain"
    assert stream.finish(final) == ""
    other = AnswerStream()
    other.feed("Hi")
    assert other.finish("Hi there") == " there"
    assert AnswerStream().finish("x") == "x"
    mismatch = AnswerStream()
    mismatch.feed("abc")
    assert mismatch.finish("xyz") is None


def test_sse_lines() -> None:
    assert data({"a": "é"}) == 'data: {"a":"é"}\n\n'.encode()
    assert comment("progress\nnode=x") == b": progress node=x\n\n"
