"""Tool calls on the three doors (issue 49) with a scripted fake model: a model file's answer holding a call in the
generic JSON form (the bundled SmolLM2's ChatML template) or the hermes form (a Qwen 2.5 template), whole and
streamed, in each API's documented shapes (validated by the openai and anthropic SDKs' types); a tool result
reaching the prompt; tool_choice none / required / named; ignored fields and dropped server tools said in
x-metagen-warning with a 200; count_tokens; aliases and vendor model names; a prompt longer than the context refused
before any decoding in each API's words; a workflow that takes the tools and answers with calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import gguf
import pytest
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app.serve.config import studio_config
from app.serve.routes import api_routes
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from backends.base import SamplingParams
from backends.fake import FakeBackend

ROOT = Path(__file__).resolve().parents[2]
QWEN_TEMPLATE = ROOT / "tests" / "fixtures" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
BUNDLED = "SmolLM2-135M-Instruct.Q4_1.gguf"
HERMES = "hermes-tiny.gguf"
WARNING = "x-metagen-warning"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current conditions.",
                                                "parameters": WEATHER}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "Current conditions.",
                    "parameters": WEATHER, "strict": True}]
MESSAGES_TOOLS = [{"name": "get_weather", "description": "Current conditions.", "input_schema": WEATHER}]
ASK = "What is the weather in Paris right now?"
RESULT = "sunny and 21C"
FINAL = "It is sunny in Paris."
GENERIC_CALL = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
HERMES_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
WORKFLOW = """version: 1
name: tool_agent
description: Answers with the tool-call answer its model writes (the tool-calling door tests).
inputs:
  question: {type: text}
  tools: {type: json, default: []}
  tool_choice: {type: json, default: '"auto"'}
  messages: {type: json, default: []}
nodes:
- id: call
  kind: generator
  params: {prompt: 'AGENT tools={tools} choice={choice} turns={turns} question={question}'}
  inputs: {question: inputs.question, tools: inputs.tools, choice: inputs.tool_choice, turns: inputs.messages}
outputs: {answer: call.text}
"""
WORKFLOW_ANSWER = json.dumps({"content": "", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]})


class RecordingFake(FakeBackend):
    """The scripted fake, keeping the sampling params of each request (the grammar a tool choice asks for)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.params: list[SamplingParams] = []

    def generate(self, prompt: Any, params: SamplingParams, *args: Any, **kwargs: Any) -> Any:
        self.params.append(params)
        return super().generate(prompt, params, *args, **kwargs)


def write_hermes_model(path: Path) -> Path:
    """A GGUF holding only what the studio reads before loading: a Qwen 2.5 chat template and a few tokens."""
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_context_length(32768)
    writer.add_chat_template(QWEN_TEMPLATE.read_text(encoding="utf-8"))
    writer.add_token_list(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def fake() -> RecordingFake:
    return RecordingFake(by_prompt={RESULT: FINAL, "AGENT": WORKFLOW_ANSWER, f"{ASK} (hermes)": HERMES_CALL,
                                    ASK: GENERIC_CALL})


@pytest.fixture
def service(tmp_path: Path, fake: RecordingFake) -> Iterator[StudioService]:
    folder, models = tmp_path / "wf", tmp_path / "models"
    folder.mkdir()
    models.mkdir()
    (folder / "tool_agent.yaml").write_text(WORKFLOW, encoding="utf-8")
    (folder / "plain_wf.yaml").write_text((ROOT / "tests" / "serve" / "workflows" / "story.yaml").read_text())
    write_hermes_model(models / HERMES)
    service = StudioService(policy=SharePolicy.local(), provider=lambda spec: fake, workflows_dir=folder,
                            examples_dir=tmp_path / "none", models_dir=models, trace_db=tmp_path / "t.db")
    yield service
    service.close()


def make_client(service: StudioService, **config: Any) -> TestClient:
    return TestClient(Starlette(routes=api_routes(service, replace(studio_config(service), **config))),
                      client=("127.0.0.1", 5000))


@pytest.fixture
def client(service: StudioService) -> TestClient:
    return make_client(service)


def sse_events(text: str) -> list[dict[str, Any]]:
    """The data of each SSE event of a stream (comments and [DONE] left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line.removeprefix("data: ")))
    return out


def ask(question: str = ASK) -> list[dict[str, Any]]:
    return [{"role": "user", "content": question}]


# ---------------------------------------------------------------- chat completions


@pytest.mark.parametrize(("model", "question"), [(BUNDLED, ASK), (HERMES, f"{ASK} (hermes)")])
def test_chat_answers_with_a_tool_call_whole(client: TestClient, fake: RecordingFake, model: str,
                                             question: str) -> None:
    from openai.types.chat import ChatCompletion

    reply = client.post("/v1/chat/completions", json={"model": model, "messages": ask(question), "tools": CHAT_TOOLS})
    assert reply.status_code == 200, reply.text
    completion = ChatCompletion.model_validate(reply.json())
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert "get_weather" in fake.calls[-1]["prompt"] and question in fake.calls[-1]["prompt"]
    if model == HERMES:
        assert "<tools>" in fake.calls[-1]["prompt"]  # the Qwen template's own tool section


def test_chat_streams_the_call_as_documented_and_the_sdk_reassembles_it(client: TestClient) -> None:
    import openai

    sdk = openai.OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=client, max_retries=0)
    chunks = list(sdk.chat.completions.create(model=BUNDLED, messages=ask(), tools=CHAT_TOOLS, stream=True))
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    first = deltas[0][0]
    assert first.index == 0 and first.id and first.type == "function" and first.function.name == "get_weather"
    assert all(d[0].id is None and d[0].function.name is None for d in deltas[1:])
    arguments = "".join(d[0].function.arguments or "" for d in deltas)
    assert json.loads(arguments) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert not any(c.choices[0].delta.content for c in chunks if c.choices)  # no JSON leaks as text
    with sdk.chat.completions.stream(model=BUNDLED, messages=ask(), tools=CHAT_TOOLS) as stream:
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}


def test_a_tool_result_goes_back_into_the_prompt(client: TestClient, fake: RecordingFake) -> None:
    first = client.post("/v1/chat/completions", json={"model": BUNDLED, "messages": ask(), "tools": CHAT_TOOLS})
    message = first.json()["choices"][0]["message"]
    turns = [*ask(), message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": RESULT}]
    second = client.post("/v1/chat/completions", json={"model": BUNDLED, "messages": turns, "tools": CHAT_TOOLS})
    assert second.status_code == 200, second.text
    choice = second.json()["choices"][0]
    assert choice["message"]["content"] == FINAL and choice["finish_reason"] == "stop"
    assert "tool_calls" not in choice["message"]
    prompt = fake.calls[-1]["prompt"]
    assert RESULT in prompt and "Paris" in prompt and prompt.index(ASK) < prompt.index(RESULT)


def test_tool_choice_none_required_and_named(client: TestClient, fake: RecordingFake) -> None:
    def chat(choice: Any) -> dict[str, Any]:
        reply = client.post("/v1/chat/completions", json={"model": BUNDLED, "messages": ask(), "tools": CHAT_TOOLS,
                                                          "tool_choice": choice})
        assert reply.status_code == 200, reply.text
        return dict(reply.json()["choices"][0])

    none = chat("none")
    assert none["finish_reason"] == "stop" and "tool_calls" not in none["message"]
    assert '"get_weather"' not in fake.calls[-1]["prompt"]  # the model is shown no tools
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        answer = chat(choice)
        assert answer["finish_reason"] == "tool_calls"
        assert fake.params[-1].grammar, "a call the choice demands is constrained by a grammar"
        assert "get_weather" in fake.params[-1].grammar
    chat("auto")
    assert fake.params[-1].grammar is None or "response" in fake.params[-1].grammar


# ---------------------------------------------------------------- Responses


def test_responses_answers_with_function_call_items(client: TestClient) -> None:
    from openai.types.responses import Response

    reply = client.post("/v1/responses", json={"model": HERMES, "input": f"{ASK} (hermes)", "tools": RESPONSES_TOOLS,
                                               "store": False})
    assert reply.status_code == 200, reply.text
    response = Response.model_validate(reply.json())
    (item,) = response.output
    assert item.type == "function_call" and item.name == "get_weather" and item.status == "completed"
    assert item.call_id and item.id and json.loads(item.arguments) == {"city": "Paris"}
    assert response.tools[0].name == "get_weather" and response.tool_choice == "auto"


@pytest.mark.parametrize(("model", "question"), [(BUNDLED, ASK), (HERMES, f"{ASK} (hermes)")])
def test_responses_streams_the_documented_function_call_events(client: TestClient, model: str, question: str) -> None:
    from openai.types.responses import ResponseStreamEvent

    reply = client.post("/v1/responses", json={"model": model, "input": question, "tools": RESPONSES_TOOLS,
                                               "stream": True, "store": False})
    assert reply.status_code == 200, reply.text
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    events = [adapter.validate_python(e) for e in sse_events(reply.text)]
    kinds = [e.type for e in events]
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    assert collapsed == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.function_call_arguments.delta", "response.function_call_arguments.done",
                         "response.output_item.done", "response.completed"]
    added, done = events[2], events[-2]
    assert added.item.type == "function_call" and added.item.arguments == "" and added.item.status == "in_progress"
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(arguments) == {"city": "Paris"} and events[-3].arguments == arguments
    assert {e.item_id for e in events if "arguments" in e.type} == {added.item.id}
    assert done.item.call_id == added.item.call_id and done.item.status == "completed"
    assert events[-1].response.output[0].call_id == added.item.call_id
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_responses_round_trip_with_function_call_output(client: TestClient, fake: RecordingFake) -> None:
    first = client.post("/v1/responses", json={"model": BUNDLED, "input": ASK, "tools": RESPONSES_TOOLS}).json()
    call = first["output"][0]
    follow = client.post("/v1/responses", json={"model": BUNDLED, "tools": RESPONSES_TOOLS, "input": [
        {"role": "user", "content": ASK}, call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": RESULT}]})
    assert follow.status_code == 200, follow.text
    assert follow.json()["output"][0]["content"][0]["text"] == FINAL and RESULT in fake.calls[-1]["prompt"]
    chained = client.post("/v1/responses", json={"model": BUNDLED, "tools": RESPONSES_TOOLS,
                                                 "previous_response_id": first["id"], "input": [
                                                     {"type": "function_call_output", "call_id": call["call_id"],
                                                      "output": RESULT}]})
    assert chained.status_code == 200, chained.text
    assert chained.json()["output"][0]["content"][0]["text"] == FINAL
    assert ASK in fake.calls[-1]["prompt"] and RESULT in fake.calls[-1]["prompt"]


CODEX_FIELDS = {"include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto"}, "store": False,
                "prompt_cache_key": "k", "client_metadata": {"a": "b"}, "parallel_tool_calls": False,
                "text": {"verbosity": "low"}, "service_tier": "priority"}


def test_responses_ignores_codex_fields_with_one_warning_header(client: TestClient) -> None:
    tools = [*RESPONSES_TOOLS, {"type": "web_search"}, {"type": "local_shell"}]
    reply = client.post("/v1/responses", json={"model": BUNDLED, "input": ASK, "tools": tools, **CODEX_FIELDS})
    assert reply.status_code == 200, reply.text
    warning = reply.headers[WARNING]
    for part in ("include ignored", "reasoning ignored", "text.verbosity ignored", "service_tier ignored",
                 "tools dropped: web_search, local_shell"):
        assert part in warning
    assert reply.json()["parallel_tool_calls"] is False and reply.json()["output"][0]["type"] == "function_call"


# ---------------------------------------------------------------- Messages


def test_messages_answers_with_tool_use_blocks(client: TestClient) -> None:
    from anthropic.types import Message

    reply = client.post("/v1/messages?beta=true", json={"model": HERMES, "max_tokens": 256,
                                                        "messages": ask(f"{ASK} (hermes)"), "tools": MESSAGES_TOOLS})
    assert reply.status_code == 200, reply.text
    message = Message.model_validate(reply.json())
    (block,) = message.content
    assert message.stop_reason == "tool_use" and block.type == "tool_use" and block.id.startswith("toolu_")
    assert block.name == "get_weather" and block.input == {"city": "Paris"}


@pytest.mark.parametrize(("model", "question"), [(BUNDLED, ASK), (HERMES, f"{ASK} (hermes)")])
def test_messages_streams_the_documented_tool_use_events(client: TestClient, model: str, question: str) -> None:
    from anthropic.types import RawMessageStreamEvent

    reply = client.post("/v1/messages", json={"model": model, "max_tokens": 256, "messages": ask(question),
                                              "stream": True, "tools": MESSAGES_TOOLS})
    assert reply.status_code == 200, reply.text
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    events = [adapter.validate_python(e) for e in sse_events(reply.text)]
    kinds = [e.type for e in events]
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    assert collapsed == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop"]
    start = events[1]
    assert start.content_block.type == "tool_use" and start.content_block.input == {} and start.index == 0
    partial = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta")
    assert {e.delta.type for e in events if e.type == "content_block_delta"} == {"input_json_delta"}
    assert json.loads(partial) == {"city": "Paris"} and events[-2].delta.stop_reason == "tool_use"


def test_the_anthropic_sdk_runs_a_tool_loop(client: TestClient, fake: RecordingFake) -> None:
    import anthropic

    sdk = anthropic.Anthropic(base_url="http://testserver", api_key="unused", http_client=client, max_retries=0)
    turns: list[Any] = ask()
    with sdk.messages.stream(model="claude-sonnet-4-5", max_tokens=32000, messages=turns,
                             tools=MESSAGES_TOOLS) as stream:  # type: ignore[arg-type]
        first = stream.get_final_message()
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert first.stop_reason == "tool_use" and use.input == {"city": "Paris"}
    turns += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": RESULT}]}]
    second = sdk.messages.create(model="claude-sonnet-4-5", max_tokens=4096, messages=turns,
                                 tools=MESSAGES_TOOLS)  # type: ignore[arg-type]
    assert second.stop_reason == "end_turn" and second.content[0].text == FINAL  # type: ignore[union-attr]
    assert RESULT in fake.calls[-1]["prompt"]


CLAUDE_CODE_FIELDS = {"thinking": {"type": "adaptive"}, "context_management": {"edits": []},
                      "output_config": {"effort": "high"}, "metadata": {"user_id": "u"},
                      "system": [{"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}]}


def test_messages_ignores_claude_code_fields_and_fits_max_tokens(client: TestClient, fake: RecordingFake) -> None:
    tools = [*MESSAGES_TOOLS, {"type": "web_search_20250305", "name": "web_search"},
             {"type": "bash_20250124", "name": "bash"}, {"type": "text_editor_20250728", "name": "editor"}]
    reply = client.post("/v1/messages?beta=true", json={"model": BUNDLED, "max_tokens": 32000, "messages": ask(),
                                                        "tools": tools, **CLAUDE_CODE_FIELDS})
    assert reply.status_code == 200, reply.text
    warning = reply.headers[WARNING]
    for part in ("thinking ignored", "context_management ignored", "output_config.effort ignored",
                 "tools dropped: web_search_20250305, bash_20250124, text_editor_20250728",
                 "max_tokens 32000 lowered to"):
        assert part in warning
    prompt_tokens = reply.json()["usage"]["input_tokens"]
    assert fake.params[-1].max_tokens == 8192 - prompt_tokens  # the bundled SmolLM2 is served with its 8k context


def test_count_tokens_counts_the_rendered_prompt_with_its_tools(client: TestClient) -> None:
    body = {"model": BUNDLED, "messages": ask(), "tools": MESSAGES_TOOLS, "system": "Be brief."}
    counted = client.post("/v1/messages/count_tokens", json=body)
    assert counted.status_code == 200, counted.text
    answered = client.post("/v1/messages", json={**body, "max_tokens": 64})
    assert counted.json() == {"input_tokens": answered.json()["usage"]["input_tokens"]}
    bare = client.post("/v1/messages/count_tokens", json={"model": BUNDLED, "messages": ask()}).json()
    assert 0 < bare["input_tokens"] < counted.json()["input_tokens"]


# ---------------------------------------------------------------- names, context


def test_vendor_model_names_and_aliases(service: StudioService) -> None:
    plain = make_client(service)
    reply = plain.post("/v1/messages", json={"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": ask("Hi")})
    assert reply.status_code == 200, reply.text
    assert reply.json()["model"] == BUNDLED
    assert f"model 'claude-sonnet-4-5' answered by '{BUNDLED}'" in reply.headers[WARNING]
    odd = plain.post("/v1/chat/completions", json={"model": "gpt-ünï-😀", "messages": ask("Hi")})
    assert odd.status_code == 200 and "gpt-\\xfcn\\xef-\\U0001f600" in odd.headers[WARNING]  # a header is ASCII
    missing = plain.post("/v1/chat/completions", json={"model": "llama-9", "messages": ask("Hi")})
    assert missing.status_code == 404
    aliased = make_client(service, aliases=(("gpt-5-codex", "plain_wf"), ("fast", HERMES)))
    workflow = aliased.post("/v1/responses", json={"model": "gpt-5-codex", "input": "Tell me a story."})
    assert workflow.status_code == 200 and workflow.json()["model"] == "plain_wf"
    assert WARNING not in workflow.headers or "answered by" not in workflow.headers[WARNING]
    assert aliased.post("/v1/chat/completions", json={"model": "fast", "messages": ask("Hi")}).json()["model"] == \
        HERMES


def test_a_prompt_longer_than_the_context_is_refused_before_decoding(client: TestClient, fake: RecordingFake) -> None:
    long = ask("word " * 9000)
    chat = client.post("/v1/chat/completions", json={"model": BUNDLED, "messages": long, "stream": True})
    assert chat.status_code == 400
    error = chat.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert "maximum context length is 8192 tokens" in error["message"]
    messages = client.post("/v1/messages", json={"model": BUNDLED, "max_tokens": 32000, "messages": long,
                                                 "tools": MESSAGES_TOOLS})
    assert messages.status_code == 400
    body = messages.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    n = body["error"]["message"].removeprefix("prompt is too long: ").split(" ")[0]
    assert body["error"]["message"] == f"prompt is too long: {n} tokens > 8192 maximum" and int(n) > 9000
    responses = client.post("/v1/responses", json={"model": BUNDLED, "input": "word " * 9000})
    assert responses.status_code == 400 and responses.json()["error"]["code"] == "context_length_exceeded"
    assert fake.calls == []  # nothing was decoded


# ---------------------------------------------------------------- workflows


def test_a_workflow_takes_the_tools_and_answers_with_calls(client: TestClient, fake: RecordingFake) -> None:
    turns = [{"role": "system", "content": "Be useful."}, *ask("Weather in Oslo?")]
    reply = client.post("/v1/chat/completions", json={"model": "tool_agent", "messages": turns, "tools": CHAT_TOOLS,
                                                      "tool_choice": "required"})
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    prompt = fake.calls[-1]["prompt"]
    assert "get_weather" in prompt and "required" in prompt and "Be useful." in prompt  # tools, choice, turns
    streamed = client.post("/v1/messages", json={"model": "tool_agent", "max_tokens": 64, "stream": True,
                                                 "messages": ask("Weather in Oslo?"), "tools": MESSAGES_TOOLS})
    events = sse_events(streamed.text)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["tool_use"] and starts[0]["name"] == "get_weather"
    partial = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    assert json.loads(partial) == {"city": "Oslo"}
    assert next(e for e in events if e["type"] == "message_delta")["delta"]["stop_reason"] == "tool_use"
    responses = client.post("/v1/responses", json={"model": "tool_agent", "input": "Weather in Oslo?",
                                                   "tools": RESPONSES_TOOLS}).json()
    assert responses["output"][0]["type"] == "function_call" and responses["output"][0]["name"] == "get_weather"


def test_a_workflow_without_a_tools_input_answers_text_with_a_warning(client: TestClient) -> None:
    reply = client.post("/v1/chat/completions", json={"model": "plain_wf", "messages": ask("Tell me a story."),
                                                      "tools": CHAT_TOOLS})
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["finish_reason"] == "stop"
    assert reply.headers[WARNING].startswith("tools ignored: workflow 'plain_wf' has no `tools` input")


def test_an_openai_agents_agent_calls_its_function_tool(service: StudioService, fake: RecordingFake) -> None:
    import httpx
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    from tests.fresh_loop import run_fresh

    set_tracing_disabled(True)  # nothing leaves this machine
    seen: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Current conditions."""
        seen.append(city)
        return RESULT

    app = Starlette(routes=api_routes(service, studio_config(service)))

    async def run(stream: bool) -> Any:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            client = openai.AsyncOpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http,
                                        max_retries=0)
            agent = Agent(name="weather", instructions="Answer about the weather.", tools=[get_weather],
                          model=OpenAIResponsesModel(model=BUNDLED, openai_client=client))
            if not stream:
                return await Runner.run(agent, ASK)
            result = Runner.run_streamed(agent, ASK)
            async for _ in result.stream_events():
                pass
            return result

    for stream in (False, True):
        result = run_fresh(run, stream)
        assert result.final_output == FINAL and seen[-1] == "Paris"
        assert RESULT in fake.calls[-1]["prompt"]
