"""Request bodies of POST /v1/messages (Anthropic's Messages API), checked field by field: custom tools, tool_use
and tool_result blocks taken; what only Anthropic's servers do (server tools, thinking, effort...) ignored with a
warning; images and documents a 400 naming the field."""

from __future__ import annotations

import json
from typing import Any

from app.serve.errors import ApiError, bad_param
from app.serve.params import (
    MAX_TOKENS_LIMIT,
    ApiRequest,
    FieldTable,
    Sampling,
    bool_param,
    float_param,
    ignored_fields,
    inputs_param,
    int_param,
    seed_param,
    stop_param,
)
from app.serve.tool_params import messages_tools

MAX_TOKENS_ACCEPTED = 1_000_000
"""Anthropic clients send large max_tokens (Claude Code: 32000 and more): any up to this is taken, as a cap."""
IGNORED: FieldTable = {
    "mcp_servers": ((None, []), "no MCP connector here: give the tools as `tools`"),
    "container": ((None,), "no code-execution container here"),
    "context_management": ((None,), "the conversation is sent to the model as it is"),
    "top_k": ((None,), "use temperature or top_p"),
    "service_tier": ((None, "auto", "standard_only"), "one tier here"),
}
"""Fields taken and ignored with a warning (x-metagen-warning): the values that mean "not used", and why."""
BLOCK_REFUSED = {"image": "images are not supported", "document": "documents are not supported",
                 "search_result": "search results are not supported"}
BLOCK_DROPPED = ("thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result",
                 "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload")
"""Blocks an earlier answer of another model may hold, left out of the conversation with a warning."""


def _ignored(body: dict[str, Any]) -> list[str]:
    warnings = ignored_fields(body, IGNORED)
    thinking = body.get("thinking")
    if thinking is not None and not (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        warnings.append("thinking ignored: the served models and workflows decide their own thinking")
    config = body.get("output_config")
    if isinstance(config, dict) and config.get("effort") is not None:
        warnings.append("output_config.effort ignored: the served models and workflows decide their own effort")
    return warnings


def _output_schema(body: dict[str, Any]) -> str | None:
    """The JSON schema of `output_config.format` (structured outputs; model files only), as JSON text."""
    config = body.get("output_config")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise bad_param("output_config", "output_config must be an object", "invalid_type")
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise bad_param("output_config.format", "output_config.format must be {\"type\": \"json_schema\", "
                        "\"schema\": {...}}")
    return json.dumps(fmt["schema"])


def _block_text(block: Any, where: str) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in BLOCK_REFUSED:
        raise bad_param(where, f"{where}: {BLOCK_REFUSED[kind]} (type {kind!r}); send text blocks only",
                        "unsupported_parameter")
    if kind != "text" or not isinstance(block.get("text"), str):
        raise bad_param(where, f"{where} must be a text block ({{\"type\": \"text\", \"text\": ...}}), got {kind!r}",
                        "invalid_type")
    return str(block["text"])


def content_text(content: Any, where: str) -> str:
    """A message's (or the system prompt's) text: a string, or a list of text blocks (`cache_control` on them is
    taken and has no effect: the engine's prefix cache is automatic)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_param(where, f"{where} must be a string or a list of text blocks", "invalid_type")
    return "".join(_block_text(block, f"{where}[{j}]") for j, block in enumerate(content))


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    """A `tool_result` block as an OpenAI chat `tool` message (an error's text marked as one)."""
    content = block.get("content")
    text = "" if content is None else content_text(content, f"{where}.content")
    if block.get("is_error") and not text.lower().startswith("error"):
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""), "content": text}


def _tool_use(block: dict[str, Any], where: str) -> dict[str, Any]:
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise bad_param(f"{where}.name", f"{where}.name must be the tool's name", "invalid_type")
    arguments = block.get("input")
    return {"id": str(block.get("id") or ""), "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments if arguments is not None else {},
                                                               ensure_ascii=False)}}


def _turn(role: str, content: Any, where: str, dropped: list[str]) -> list[dict[str, Any]]:
    """One Anthropic message as OpenAI chat messages: tool results first (each a `tool` message), then the text;
    an assistant's tool_use blocks as its `tool_calls`."""
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise bad_param(where, f"{where} must be a string or a list of content blocks", "invalid_type")
    results, texts, calls = [], [], []
    for j, block in enumerate(content):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result" and role == "user":
            results.append(_tool_result(block, at))
        elif kind == "tool_use" and role == "assistant":
            calls.append(_tool_use(block, at))
        elif kind in BLOCK_DROPPED:
            dropped.append(str(kind))
        else:
            texts.append(_block_text(block, at))
    out = list(results)
    if texts or calls or not results:
        message: dict[str, Any] = {"role": role, "content": "".join(texts)}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def _messages(body: dict[str, Any], warnings: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The conversation as chat messages, and the text of `system` messages inside it (Claude Code sends them,
    beta `mid-conversation-system`): chat templates take a system message first only, so they join the system
    prompt."""
    value = body.get("messages")
    if value is None:
        raise bad_param("messages", "messages is required: a list of {role, content} objects",
                        "missing_required_parameter")
    if not isinstance(value, list) or not value:
        raise bad_param("messages", "messages must be a non-empty list of {role, content} objects", "invalid_type")
    out: list[dict[str, Any]] = []
    dropped: list[str] = []
    systems: list[str] = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role == "system":
            systems.append(content_text(message.get("content"), f"{where}.content"))
            continue
        if role not in ("user", "assistant"):
            raise bad_param(f"{where}.role", f"{where}.role must be user, assistant or system, got {role!r}")
        out += _turn(str(role), message.get("content"), f"{where}.content", dropped)
    if not out:
        raise bad_param("messages[0].role", "messages must hold a user or assistant turn (system messages join the "
                        "system prompt)")
    if dropped:
        warnings.append(f"content blocks left out: {', '.join(dict.fromkeys(dropped))} (earlier answers' thinking "
                        "and server tools are not shown to the model)")
    if systems:
        warnings.append(f"{len(systems)} system message(s) inside messages joined the system prompt (a chat template "
                        "takes a system message first only)")
    return out, systems


def _max_tokens(body: dict[str, Any], warnings: list[str]) -> int:
    if body.get("max_tokens") is None:
        raise bad_param("max_tokens", "max_tokens is required: the most tokens the answer may have",
                        "missing_required_parameter")
    given = int_param(body, "max_tokens", 1, MAX_TOKENS_ACCEPTED) or 1
    if given > MAX_TOKENS_LIMIT:
        warnings.append(f"max_tokens {given} lowered to {MAX_TOKENS_LIMIT}, the most one answer here may have")
    return min(given, MAX_TOKENS_LIMIT)


def parse_messages(body: Any, *, counting: bool = False) -> ApiRequest:
    """The request of POST /v1/messages (`counting`: of /v1/messages/count_tokens, where max_tokens is not sent)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_param("model", "model is required: a workflow name or a model file name (see GET /v1/models)",
                        "missing_required_parameter")
    warnings = _ignored(body)
    tools, tool_warnings = messages_tools(body)
    sampling = Sampling(seed=seed_param(body), temperature=float_param(body, "temperature", 0.0, 1.0),
                        top_p=float_param(body, "top_p", 0.0, 1.0, open_low=True),
                        max_tokens=None if counting else _max_tokens(body, warnings),
                        stop=stop_param(body, "stop_sequences"), json_schema=_output_schema(body))
    system = body.get("system")
    messages, inner_systems = _messages(body, warnings)
    system_texts = ([content_text(system, "system")] if system is not None else []) + inner_systems
    if system_texts:
        messages.insert(0, {"role": "system", "content": "\n\n".join(system_texts)})
    return ApiRequest(model=model.strip(), stream=bool_param(body, "stream"), sampling=sampling, messages=messages,
                      inputs=inputs_param({"inputs": body.get("inputs")}), tools=tools,
                      warnings=warnings + tool_warnings)
