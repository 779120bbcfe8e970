"""A workflow whose answer is tool calls (tool_self_consistency on a scripted fake) through the MCP door: the result's
structured content holds the calls (`tool_answer`: name and arguments) valid against the tool's output schema, and
its text reads `calls get_weather(city="Paris")`, not the answer JSON; a text answer stays text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema

from app.mcp.server import build_mcp_server
from app.serve.access import Caller
from app.serve.config import studio_config
from app.service.studio import StudioService
from tests.fresh_loop import run_fresh
from tests.mcp.conftest import ROOT, text_of
from tests.studio_fixtures import studio_service

CALL = json.dumps({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})


def _call(service: StudioService, arguments: dict[str, Any]) -> Any:
    config = studio_config(service)
    server = build_mcp_server(service, config, lambda request: Caller(remote=False, policy=service.policy))

    async def main() -> Any:
        from mcp import Client

        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return tools["tool_self_consistency"], await client.call_tool("tool_self_consistency", arguments)

    return run_fresh(main)


def _service(tmp_path: Path, reply: str) -> StudioService:
    service = studio_service(tmp_path, reply=lambda prompt, i: reply)
    shutil.copyfile(ROOT / "workflows" / "tool_self_consistency.yaml",
                    service.workflows_dir / "tool_self_consistency.yaml")
    return service


def test_a_tool_call_answer_is_structured_calls_and_a_readable_text(tmp_path: Path) -> None:
    service = _service(tmp_path, CALL)
    try:
        tool, result = _call(service, {})
    finally:
        service.close()
    assert not result.is_error, text_of(result)
    data = result.structured_content
    jsonschema.validate(data, tool.output_schema)
    assert data["tool_answer"] == {"content": "", "tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}, "text": 'get_weather(city="Paris")'}]}
    assert text_of(result) == 'calls get_weather(city="Paris")'
    assert json.loads(data["outputs"]["answer"])["tool_calls"][0]["name"] == "get_weather"  # the output as made


def test_a_text_answer_of_a_tool_workflow_is_its_text(tmp_path: Path) -> None:
    service = _service(tmp_path, '{"response": "It is sunny."}')
    try:
        _, result = _call(service, {"tool_choice": '"auto"'})
    finally:
        service.close()
    assert not result.is_error, text_of(result)
    assert text_of(result) == "It is sunny." and result.structured_content["tool_answer"]["tool_calls"] == []
