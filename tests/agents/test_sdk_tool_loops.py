"""The openai and anthropic SDKs' own tool loops against `metagen serve`: the scripted model calls a function, the
client runs it and sends its result back, and the answer quotes the result. Streamed and not: the openai SDK's
`tool_calls[i].function.arguments` deltas and the anthropic SDK's `input_json_delta`s reassembled into the call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents.agent_clients import MARKER
from tests.serve.conftest import ServeProcess

pytestmark = pytest.mark.agents

SCRIPT = Path(__file__).resolve().parent / "scripts" / "sdk_tools.yaml"
MODEL = "bundled"
SCHEMA = {"type": "object", "properties": {"prefix": {"type": "string"}, "number": {"type": "integer"}},
          "required": ["prefix", "number"]}
QUESTION = "Make the marker and tell me what it is."


def make_marker(prefix: str, number: int) -> str:
    return f"{prefix}-{number + 11}"


@pytest.fixture
def server(scripted_serve: Any) -> ServeProcess:
    return scripted_serve(SCRIPT)


def _chat_call_from_stream(stream: Any) -> tuple[dict[str, Any], str | None]:
    """The streamed tool call, reassembled from its deltas (id and name first, the arguments in pieces)."""
    call: dict[str, Any] = {"id": "", "name": "", "arguments": ""}
    finish = None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        for delta in choice.delta.tool_calls or []:
            assert delta.index == 0
            call["id"] += delta.id or ""
            if delta.function is not None:
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
        finish = choice.finish_reason or finish
    return call, finish


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_completions_tool_loop(server: ServeProcess, stream: bool) -> None:
    client = server.client(timeout=120)
    tools = [{"type": "function", "function": {"name": "make_marker", "description": "Make the marker.",
                                               "parameters": SCHEMA}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    if stream:
        call, finish = _chat_call_from_stream(client.chat.completions.create(
            model=MODEL, messages=messages, tools=tools, stream=True))
    else:
        reply = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        finish = reply.choices[0].finish_reason
        made = reply.choices[0].message.tool_calls[0]
        call = {"id": made.id, "name": made.function.name, "arguments": made.function.arguments}
    assert finish == "tool_calls" and call["name"] == "make_marker" and call["id"], call
    arguments = json.loads(call["arguments"])
    assert arguments == {"prefix": "MG-MARKER", "number": 4700}
    messages += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": call["id"], "type": "function",
                      "function": {"name": call["name"], "arguments": call["arguments"]}}]},
                 {"role": "tool", "tool_call_id": call["id"], "content": make_marker(**arguments)}]
    final = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content.strip() == f"The tool says {MARKER}"


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_tool_loop(server: ServeProcess, stream: bool) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key="unused", max_retries=0,
                                 timeout=120)
    tools = [{"name": "make_marker", "description": "Make the marker.", "input_schema": SCHEMA}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    if stream:
        with client.messages.stream(model=MODEL, max_tokens=1024, tools=tools, messages=messages) as events:
            kinds = {event.type for event in events}
            first = events.get_final_message()
        assert "input_json" in kinds, kinds  # the call's arguments came as input_json_delta events
    else:
        first = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=messages)
    assert first.stop_reason == "tool_use"
    use = next(block for block in first.content if block.type == "tool_use")
    assert use.name == "make_marker" and use.input == {"prefix": "MG-MARKER", "number": 4700} and use.id
    messages += [{"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                               "content": make_marker(**use.input)}]}]
    final = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=messages)
    assert final.stop_reason == "end_turn"
    assert "".join(b.text for b in final.content if b.type == "text").strip() == f"The tool says {MARKER}"
