"""What the real agents sent (tests/fixtures/agents, captured by scripts/capture_agents.py) is taken by the doors'
request checks, never refused: Codex CLI's Responses request, Claude Code's Messages and count_tokens requests,
their tools read and their shell tool kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.serve.messages_params import parse_messages
from app.serve.responses_params import parse_responses

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def captured(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))["body"]


def test_codex_cli_responses_request_is_taken_with_its_shell_tool() -> None:
    body = captured("codex_responses_request.json")
    req = parse_responses(body)
    names = [t.name for t in req.api.tools.tools]
    assert "exec_command" in names and req.api.tools.parallel
    assert next(t for t in req.api.tools.tools if t.name == "exec_command").parameters["properties"]["cmd"]
    roles = [m["role"] for m in req.input_messages]
    assert roles.count("user") == 2 and req.api.stream
    assert any("web_search" in w for w in req.api.warnings), req.api.warnings  # a hosted tool: dropped, said so


def test_claude_code_messages_request_is_taken_its_inner_system_message_joining_the_system_prompt() -> None:
    body = captured("claude_code_messages_request.json")
    assert [m["role"] for m in body["messages"]] == ["user", "system"]  # the beta mid-conversation-system
    req = parse_messages(body)
    assert len(req.tools.tools) == 24 and req.tools.tool("Bash") is not None
    assert [m["role"] for m in req.messages] == ["system", "user"]
    system = req.messages[0]["content"]
    assert system.startswith("x-anthropic-billing-header") and "Available agent types" in system
    assert any("system message(s) inside messages" in w for w in req.warnings), req.warnings


def test_claude_code_count_tokens_requests_are_taken() -> None:
    for name in ("claude_code_count_tokens.json", "claude_code_count_tokens_largest.json"):
        req = parse_messages(captured(name), counting=True)
        assert req.messages[-1] == {"role": "user", "content": "foo"}
    assert len(parse_messages(captured("claude_code_count_tokens_largest.json"), counting=True).tools.tools) == 8


def test_a_conversation_of_system_messages_only_is_refused() -> None:
    from app.serve.errors import ApiError

    try:
        parse_messages({"model": "m", "max_tokens": 8, "messages": [{"role": "system", "content": "x"}]})
    except ApiError as exc:
        assert (exc.status, exc.param) == (400, "messages[0].role") and "user or assistant turn" in exc.message
    else:
        raise AssertionError("a conversation without a user turn was taken")
