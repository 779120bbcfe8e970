"""Request bodies of POST /v1/messages (Anthropic's Messages API), checked field by field: what this server cannot
honour (tools, images, documents, extended thinking, top_k...) is a 400 naming the field."""

from __future__ import annotations

import json
from typing import Any

from app.serve.errors import ApiError, bad_param
from app.serve.params import (
    MAX_TOKENS_LIMIT,
    ApiRequest,
    Sampling,
    bool_param,
    float_param,
    inputs_param,
    int_param,
    seed_param,
    stop_param,
)

MAX_TOKENS_ACCEPTED = 1_000_000
"""Anthropic clients send large max_tokens (Claude Code: 32000 and more): any up to this is taken, as a cap."""
TOOLS = "this server has no tools: a workflow or a model file answers with text only"
REFUSED: dict[str, tuple[Any, str]] = {
    "tools": ((None, []), TOOLS),
    "mcp_servers": ((None, []), TOOLS),
    "container": ((None,), "code-execution containers are not supported"),
    "context_management": ((None,), "context management is not supported"),
    "top_k": ((None,), "top_k is not supported: use temperature or top_p"),
}
"""Fields this server cannot honour: the values that mean "not used", and why."""
BLOCK_REFUSED = {"image": "images are not supported", "document": "documents are not supported",
                 "tool_use": TOOLS, "tool_result": TOOLS, "server_tool_use": TOOLS,
                 "thinking": "thinking blocks are not supported", "redacted_thinking": "thinking blocks are not "
                 "supported", "search_result": "search results are not supported"}


def _refuse_unsupported(body: dict[str, Any]) -> None:
    for name, (unused, why) in REFUSED.items():
        if body.get(name) not in unused:
            raise bad_param(name, f"{name} is not supported by this server: {why}", "unsupported_parameter")
    choice = body.get("tool_choice")
    if choice is not None and not (isinstance(choice, dict) and choice.get("type") in ("none", "auto")):
        raise bad_param("tool_choice", f"tool_choice is not supported by this server: {TOOLS}",
                        "unsupported_parameter")
    thinking = body.get("thinking")
    if thinking is not None and not (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        raise bad_param("thinking", "extended thinking is not supported: the served models and workflows decide "
                        "their own thinking (leave thinking out)", "unsupported_parameter")


def _output_schema(body: dict[str, Any]) -> str | None:
    """The JSON schema of `output_config.format` (structured outputs; model files only), as JSON text."""
    config = body.get("output_config")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise bad_param("output_config", "output_config must be an object", "invalid_type")
    if config.get("effort") is not None:
        raise bad_param("output_config.effort", "output_config.effort is not supported: the served models and "
                        "workflows decide their own effort (leave it out)", "unsupported_parameter")
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
    """A message's (or the system prompt's) text: a string, or a list of text blocks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_param(where, f"{where} must be a string or a list of text blocks", "invalid_type")
    return "".join(_block_text(block, f"{where}[{j}]") for j, block in enumerate(content))


def _messages(body: dict[str, Any]) -> list[dict[str, str]]:
    value = body.get("messages")
    if value is None:
        raise bad_param("messages", "messages is required: a list of {role, content} objects",
                        "missing_required_parameter")
    if not isinstance(value, list) or not value:
        raise bad_param("messages", "messages must be a non-empty list of {role, content} objects", "invalid_type")
    out = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise bad_param(f"{where}.role", f"{where}.role must be user or assistant (the system prompt goes in "
                            f"`system`), got {role!r}")
        out.append({"role": str(role), "content": content_text(message.get("content"), f"{where}.content")})
    return out


def _max_tokens(body: dict[str, Any]) -> int:
    if body.get("max_tokens") is None:
        raise bad_param("max_tokens", "max_tokens is required: the most tokens the answer may have",
                        "missing_required_parameter")
    return min(int_param(body, "max_tokens", 1, MAX_TOKENS_ACCEPTED) or 1, MAX_TOKENS_LIMIT)


def parse_messages(body: Any) -> ApiRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_param("model", "model is required: a workflow name or a model file name (see GET /v1/models)",
                        "missing_required_parameter")
    _refuse_unsupported(body)
    sampling = Sampling(seed=seed_param(body), temperature=float_param(body, "temperature", 0.0, 1.0),
                        top_p=float_param(body, "top_p", 0.0, 1.0, open_low=True), max_tokens=_max_tokens(body),
                        stop=stop_param(body, "stop_sequences"), json_schema=_output_schema(body))
    system = body.get("system")
    messages = _messages(body)
    if system is not None:
        messages.insert(0, {"role": "system", "content": content_text(system, "system")})
    return ApiRequest(model=model.strip(), stream=bool_param(body, "stream"), sampling=sampling, messages=messages,
                      inputs=inputs_param({"inputs": body.get("inputs")}))
