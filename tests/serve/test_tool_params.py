"""Tools, tool choices and tool turns in each door's spelling read into one ToolRequest and OpenAI chat messages
(no server, no model): what each field becomes, what is dropped or ignored with which warning."""

from __future__ import annotations

from typing import Any

import pytest

from app.serve.errors import ApiError
from app.serve.messages_params import parse_messages
from app.serve.params import parse_chat, parse_completion
from app.serve.responses_params import parse_responses
from backends.tools.types import ToolChoice, ToolSpec

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_chat_tools_choices_and_tool_turns() -> None:
    req = parse_chat({"model": "m", "parallel_tool_calls": False,
                      "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather.",
                                                                  "parameters": WEATHER, "strict": True}}],
                      "tool_choice": {"type": "function", "function": {"name": "weather"}},
                      "messages": [{"role": "user", "content": "Paris?"},
                                   {"role": "assistant", "content": None, "tool_calls": [
                                       {"id": "call_1", "type": "function",
                                        "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                                   {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})
    assert req.tools.tools == (ToolSpec("weather", "Weather.", WEATHER, True),)
    assert req.tools.choice == ToolChoice("function", "weather") and not req.tools.parallel
    assert req.messages == [
        {"role": "user", "content": "Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    for given, mode in (("auto", "auto"), ("none", "none"), ("required", "required")):
        assert parse_chat({"model": "m", "messages": [], "tool_choice": given}).tools.choice.mode == mode
    assert req.warnings == []


def test_chat_takes_the_legacy_functions_and_drops_other_tool_types() -> None:
    req = parse_chat({"model": "m", "messages": [{"role": "user", "content": "x"}],
                      "functions": [{"name": "f", "parameters": WEATHER}], "function_call": {"name": "f"},
                      "tools": [{"type": "web_search"}]})
    assert [t.name for t in req.tools.tools] == ["f"] and req.tools.choice == ToolChoice("function", "f")
    assert req.warnings == ["tools dropped: web_search (hosted tools that run on the provider's side, which a local "
                            "model cannot run; only function tools are offered to the model)"]
    with pytest.raises(ApiError) as caught:
        parse_completion({"model": "m", "prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert caught.value.param == "tools"


CODEX_LIKE: dict[str, Any] = {
    "model": "gpt-5-codex", "instructions": "You are a coding agent.", "store": False, "stream": True,
    "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "medium", "summary": "auto"},
    "prompt_cache_key": "abc", "client_metadata": {"x": "y"}, "parallel_tool_calls": False,
    "text": {"verbosity": "low"}, "service_tier": "priority", "tool_choice": "auto",
    "tools": [{"type": "function", "name": "shell", "description": "Run a command.", "strict": False,
               "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}},
              {"type": "namespace", "name": "mcp", "tools": [{"type": "function", "name": "read", "parameters": {}}]},
              {"type": "web_search"}, {"type": "local_shell"}, {"type": "custom", "name": "apply_patch"}],
    "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be careful."}]},
              {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files."}]},
              {"type": "reasoning", "summary": [], "encrypted_content": "xyz"},
              {"type": "function_call", "call_id": "call_a", "name": "shell", "arguments": "{\"command\": [\"ls\"]}"},
              {"type": "function_call_output", "call_id": "call_a", "output": "README.md"}]}


def test_responses_reads_a_codex_request_without_refusing_anything() -> None:
    req = parse_responses(CODEX_LIKE)
    assert [t.name for t in req.api.tools.tools] == ["shell", "read"] and not req.api.tools.parallel
    assert not req.store and req.instructions == "You are a coding agent."
    assert req.input_messages == [
        {"role": "system", "content": "Be careful."}, {"role": "user", "content": "List files."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_a", "type": "function", "function": {
            "name": "shell", "arguments": "{\"command\": [\"ls\"]}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "README.md"}]
    assert req.api.warnings == [
        "include ignored: nothing extra is included (no reasoning items, logprobs or tool sources)",
        "service_tier ignored: one tier here",
        "reasoning ignored: the served models and workflows decide their own thinking",
        "text.verbosity ignored: the model answers at its own length",
        "reasoning items ignored: the model sees the messages and tool calls of the input",
        "tools dropped: web_search, local_shell, custom (hosted tools that run on the provider's side, which a local "
        "model cannot run; only function tools are offered to the model)"]


def test_responses_tool_choice_spellings() -> None:
    tools = [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}]
    base = {"model": "m", "input": "x", "tools": tools}
    assert parse_responses({**base, "tool_choice": {"type": "function", "name": "b"}}).api.tools.choice == \
        ToolChoice("function", "b")
    allowed = parse_responses({**base, "tool_choice": {"type": "allowed_tools", "mode": "required",
                                                       "tools": [{"type": "function", "name": "a"}]}}).api.tools
    assert [t.name for t in allowed.tools] == ["a"] and allowed.choice.mode == "required"
    hosted = parse_responses({**base, "tool_choice": {"type": "web_search_preview"}})
    assert hosted.api.tools.choice.mode == "auto" and "tool_choice 'web_search_preview' ignored" in \
        hosted.api.warnings[0]
    output_parts = parse_responses({"model": "m", "input": [
        {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "ok"}]}]})
    assert output_parts.input_messages == [{"role": "tool", "tool_call_id": "c", "content": "ok"}]


CLAUDE_CODE_LIKE: dict[str, Any] = {
    "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True, "metadata": {"user_id": "u"},
    "thinking": {"type": "adaptive"}, "context_management": {"edits": []}, "output_config": {"effort": "high"},
    "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "tools": [{"name": "Bash", "description": "Run bash.", "input_schema": {"type": "object", "properties": {
        "command": {"type": "string"}}}},
              {"type": "web_search_20250305", "name": "web_search"}, {"type": "bash_20250124", "name": "bash"},
              {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "List files."}]},
                 {"role": "assistant", "content": [
                     {"type": "thinking", "thinking": "hm", "signature": "s"},
                     {"type": "text", "text": "Listing."},
                     {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
                 {"role": "user", "content": [
                     {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                      "content": [{"type": "text", "text": "permission denied"}]},
                     {"type": "text", "text": "Try again.", "cache_control": {"type": "ephemeral"}}]}]}


def test_messages_reads_a_claude_code_request_without_refusing_anything() -> None:
    req = parse_messages(CLAUDE_CODE_LIKE)
    assert [t.name for t in req.tools.tools] == ["Bash"]
    assert req.tools.choice.mode == "required" and not req.tools.parallel
    assert req.sampling.max_tokens == 32000
    assert req.messages == [
        {"role": "system", "content": "You are Claude Code."}, {"role": "user", "content": "List files."},
        {"role": "assistant", "content": "Listing.", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: permission denied"},
        {"role": "user", "content": "Try again."}]
    assert req.warnings == [
        "context_management ignored: the conversation is sent to the model as it is",
        "thinking ignored: the served models and workflows decide their own thinking",
        "output_config.effort ignored: the served models and workflows decide their own effort",
        "content blocks left out: thinking (earlier answers' thinking and server tools are not shown to the model)",
        "tools dropped: web_search_20250305, bash_20250124, text_editor_20250728 (server tools that run on the "
        "provider's side, which a local model cannot run; only function tools are offered to the model)"]


def test_messages_tool_choice_spellings_and_counting_without_max_tokens() -> None:
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    base = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "tools": tools}
    for given, expected in (({"type": "auto"}, ToolChoice()), ({"type": "none"}, ToolChoice("none")),
                            ({"type": "any"}, ToolChoice("required")),
                            ({"type": "tool", "name": "f"}, ToolChoice("function", "f"))):
        assert parse_messages({**base, "tool_choice": given}).tools.choice == expected
    counted = parse_messages({"model": "m", "messages": [{"role": "user", "content": "x"}]}, counting=True)
    assert counted.sampling.max_tokens is None
    only_result = parse_messages({**base, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "42"}]}]})
    assert only_result.messages == [{"role": "tool", "tool_call_id": "t", "content": "42"}]


def test_alias_flags_read_name_equals_model() -> None:
    from app.serve.model_alias import parse_alias

    assert parse_alias(" sonnet = story ") == ("sonnet", "story")
    assert parse_alias("gpt-5=tuned/best") == ("gpt-5", "tuned/best")
    for bad in ("sonnet", "=story", "sonnet="):
        with pytest.raises(ValueError, match="NAME=MODEL"):
            parse_alias(bad)
