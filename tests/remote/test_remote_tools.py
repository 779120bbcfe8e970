"""Tool calls on a remote engine (vLLM, SGLang, llama-server...): a tool-calling node sends the conversation with
`tools`, `tool_choice` and `parallel_tool_calls` to the server's chat endpoint and takes the server's parsed
`tool_calls` back, whole or as streamed argument deltas, against a stdlib server replaying the documented chat
completion shapes; a malformed call is text; `options: {tool_calls: prompt}` (and llama_cpp.server) keep the tools
in the prompt."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import load_workflow
from backends.base import BackendError, ModelSpec, SamplingParams
from backends.remote.openai_backend import OpenAIBackend
from backends.remote.openai_caps import Capabilities
from backends.tools.types import SERVER_FAMILY, ToolChoice, ToolRequest, parse_answer_json, tools_from_openai
from nodes.registry import default_registry
from tests.remote.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather.",
                                           "parameters": WEATHER}}]
ARGUMENTS = '{"city": "Paris"}'


class ToolServer:
    """Answers chat completions with one get_weather call (n choices), whole or streamed in argument pieces;
    `bodies` keeps each request's JSON body. `arguments` is what the call's arguments text will be."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.arguments = ARGUMENTS
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                owner.bodies.append(body)
                if body.get("stream"):
                    data = owner.stream(body).encode()
                    kind = "text/event-stream"
                else:
                    data = json.dumps(owner.whole(body)).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def whole(self, body: dict[str, Any]) -> dict[str, Any]:
        choices = [{"index": i, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {
                "name": "get_weather", "arguments": self.arguments}}]}} for i in range(int(body.get("n") or 1))]
        return {"id": "x", "object": "chat.completion", "model": "m", "choices": choices,
                "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}}

    def stream(self, body: dict[str, Any]) -> str:
        chunks: list[dict[str, Any]] = []
        for i in range(int(body.get("n") or 1)):
            chunks.append({"index": i, "delta": {"role": "assistant", "tool_calls": [
                {"index": 0, "id": f"call_{i}", "type": "function",
                 "function": {"name": "get_weather", "arguments": ""}}]}})
            half = len(self.arguments) // 2
            for piece in (self.arguments[:half], self.arguments[half:]):
                chunks.append({"index": i, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}})
            chunks.append({"index": i, "delta": {}, "finish_reason": "tool_calls"})
        lines = [f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'choices': [c]})}\n\n"
                 for c in chunks]
        return "".join(lines) + "data: [DONE]\n\n"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ToolServer]:
    fake = ToolServer()
    kinds: dict[str, str] = {}
    monkeypatch.setattr(OpenAIBackend, "caps", property(lambda self: Capabilities(
        kind=kinds.get(self.model_name, "vllm"), chat=True, completions=True, n=True, stream=True)))
    fake.kinds = kinds  # type: ignore[attr-defined]
    yield fake
    fake.close()


def _request(choice: str = "auto") -> ToolRequest:
    return ToolRequest(tools_from_openai(TOOLS), ToolChoice(choice))  # type: ignore[arg-type]


def _params(request: ToolRequest) -> SamplingParams:
    from backends.tools.types import request_fields

    return SamplingParams(max_tokens=64, tools=json.dumps(request_fields(request)))


CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lyon"}}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "rain"},
    {"role": "user", "content": "And in Paris?"},
]


@pytest.mark.parametrize("streamed", [False, True])
def test_the_server_gets_the_tools_and_its_parsed_calls_come_back(server: ToolServer, streamed: bool) -> None:
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=server.base_url, model="m"))
    request = _request("required")
    text, family = backend.render_tool_prompt(CONVERSATION, request)
    assert family == SERVER_FAMILY and "And in Paris?" in text
    pieces: list[str] = []
    result = backend.generate(CONVERSATION, _params(request), n=2,
                              on_token=(lambda i, piece: pieces.append(piece)) if streamed else None)
    for c in result.completions:
        answer = parse_answer_json(c.text)
        assert answer is not None and [(k.name, dict(k.arguments)) for k in answer.calls] == \
            [("get_weather", {"city": "Paris"})]
    body = server.bodies[-1]
    assert body["tools"] == TOOLS and body["tool_choice"] == "required" and body["parallel_tool_calls"] is True
    assert bool(body.get("stream")) is streamed and body["n"] == 2 and "prompt" not in body
    assistant, tool = body["messages"][1], body["messages"][2]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"city": "Lyon"}'  # the API's JSON text
    assert tool == {"role": "tool", "tool_call_id": "call_a", "content": "rain"}


def test_a_call_with_malformed_arguments_is_text(server: ToolServer) -> None:
    server.arguments = '{"city": "Par'
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=server.base_url, model="m"))
    (c,) = backend.generate(CONVERSATION, _params(_request())).completions
    answer = parse_answer_json(c.text)
    assert answer is not None and not answer.calls and answer.content == 'get_weather({"city": "Par)'


def test_the_tool_self_consistency_example_runs_on_a_remote_engine(server: ToolServer, llama_provide: Any) -> None:
    wf = load_workflow(ROOT / "workflows" / "tool_self_consistency.yaml")
    data = wf.to_dict()
    data["models"]["main"] = {"source": "openai", "base_url": server.base_url, "model": "m"}
    from app.workflow.spec import workflow_from_dict

    result = Scheduler(default_registry(), llama_provide).run(workflow_from_dict(data), seed=0)
    assert result.status == SUCCEEDED, result.error
    answer = parse_answer_json(result.outputs["answer"])
    assert answer is not None and [(k.name, dict(k.arguments)) for k in answer.calls] == \
        [("get_weather", {"city": "Paris"})]
    assert result.outputs["votes"]["clusters"][0]["members"] == list(range(8))
    (body,) = server.bodies  # the eight samples in one request of n = 8
    assert body["n"] == 8 and body["tool_choice"] == "auto" and body["temperature"] == 0.7
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
    assert body["tools"][0]["function"]["parameters"]["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert body["messages"] == [{"role": "user", "content": "What is the weather like in Paris today, in celsius?"}]


@pytest.mark.parametrize(("kind", "options"), [("vllm", (("tool_calls", "prompt"),)), ("llama_cpp_python", ())])
def test_the_tools_stay_in_the_prompt_where_the_server_does_not_parse_calls(server: ToolServer, kind: str,
                                                                            options: Any) -> None:
    server.kinds["m"] = kind  # type: ignore[attr-defined]
    backend = OpenAIBackend(ModelSpec(source="openai", base_url=server.base_url, model="m", options=options))
    text, family = backend.render_tool_prompt([{"role": "user", "content": "Weather?"}], _request())
    assert family == "generic" and '"get_weather"' in text
    with pytest.raises(BackendError, match=r"options\.tool_calls must be"):
        OpenAIBackend(ModelSpec(source="openai", base_url=server.base_url, model="m",
                                options=(("tool_calls", "native"),))).render_tool_prompt([], _request())


def test_a_local_engine_refuses_server_parsed_tools() -> None:
    from backends.base import validate_params

    with pytest.raises(BackendError, match="need a remote OpenAI-compatible server"):
        validate_params(SamplingParams(tools=json.dumps({"tools": TOOLS})))
    validate_params(SamplingParams(tools=json.dumps({"tools": TOOLS})), server_tools=True)


def test_a_chat_request_with_tools_to_a_workflow_on_a_remote_engine_answers_its_calls(server: ToolServer,
                                                                                    tmp_path: Path) -> None:
    import yaml
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from app.serve.config import studio_config
    from app.serve.routes import api_routes
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy

    data = yaml.safe_load((ROOT / "workflows" / "tool_self_consistency.yaml").read_text(encoding="utf-8"))
    data["models"]["main"] = {"source": "openai", "base_url": server.base_url, "model": "m"}
    (tmp_path / "wf").mkdir()
    (tmp_path / "wf" / "remote_tools.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    service = StudioService(policy=SharePolicy.local(), workflows_dir=tmp_path / "wf", trace_db=tmp_path / "t.db",
                            examples_dir=tmp_path / "none", models_dir=tmp_path / "models")
    try:
        client = TestClient(Starlette(routes=api_routes(service, studio_config(service))), client=("127.0.0.1", 5000))
        reply = client.post("/v1/chat/completions", json={
            "model": "remote_tools", "messages": CONVERSATION, "tools": TOOLS, "tool_choice": "required"})
    finally:
        service.close()
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    (body,) = server.bodies
    assert body["tools"] == TOOLS and body["tool_choice"] == "required" and body["n"] == 8
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_a", "content": "rain"}
