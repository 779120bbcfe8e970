"""Request bodies of POST /v1/responses, checked field by field: function tools and their calls and outputs taken;
what only OpenAI's servers do (hosted tools, reasoning, include...) ignored with a warning; what cannot be done
without (files, images, background) a 400 naming the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.serve.errors import ApiError, bad_param
from app.serve.params import (
    MAX_TOKENS_LIMIT,
    ROLES,
    ApiRequest,
    FieldTable,
    Sampling,
    bool_param,
    float_param,
    ignored_fields,
    inputs_param,
    int_param,
    refuse_fields,
    seed_param,
)
from app.serve.tool_params import responses_tools

REFUSED: FieldTable = {
    "background": ((None, False), "background responses are not supported: leave background out (or use stream)"),
    "conversation": ((None,), "conversation objects are not supported: continue with previous_response_id"),
    "prompt": ((None,), "prompt templates are not supported: send instructions and input"),
}
"""Fields this server cannot honour and cannot do without: the values that mean "not used", and why."""
IGNORED: FieldTable = {
    "include": ((None, []), "nothing extra is included (no reasoning items, logprobs or tool sources)"),
    "top_logprobs": ((None, 0), "logprobs are on /v1/chat/completions only"),
    "truncation": ((None, "disabled"), "a conversation longer than the model's context is an error"),
    "context_management": ((None, []), "the conversation is sent to the model as it is"),
    "service_tier": ((None, "auto", "default"), "one tier here"),
    "max_tool_calls": ((None,), "the answer's calls are not counted"),
}
"""Fields taken and ignored with a warning (x-metagen-warning): the values that mean "not used", and why."""
PART_TEXT = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
PART_REFUSED = {"input_image": "images are not supported", "input_file": "files are not supported",
                "input_audio": "audio is not supported"}


@dataclass
class ResponsesRequest:
    api: ApiRequest
    """The model, stream flag, sampling and workflow inputs; its messages are set once the conversation is known."""
    input_messages: list[dict[str, Any]]
    """This request's input as messages (without the instructions)."""
    instructions: str | None = None
    store: bool = True
    previous_response_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    text_format: dict[str, Any] = field(default_factory=lambda: {"type": "text"})


def _refuse_unsupported(body: dict[str, Any]) -> list[str]:
    """400 for what cannot be done without; the warnings for what is ignored."""
    refuse_fields(body, REFUSED)
    warnings = ignored_fields(body, IGNORED)
    reasoning = body.get("reasoning")
    if reasoning is not None and (not isinstance(reasoning, dict) or any(v is not None for v in reasoning.values())):
        warnings.append("reasoning ignored: the served models and workflows decide their own thinking")
    return warnings


def _text_part(part: Any, where: str) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in PART_REFUSED:
        raise bad_param(where, f"{where}: {PART_REFUSED[kind]} (type {kind!r}); send text parts only",
                        "unsupported_parameter")
    key = PART_TEXT.get(kind) if isinstance(kind, str) else None
    if key is None or not isinstance(part.get(key), str):
        raise bad_param(where, f"{where} must be a text part ({{\"type\": \"input_text\", \"text\": ...}}), got "
                        f"{kind!r}", "invalid_type")
    return str(part[key])


def _message_item(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = ROLES.get(str(item.get("role")))
    if role is None:
        raise bad_param(f"{where}.role", f"{where}.role must be user, assistant, system or developer, got "
                        f"{item.get('role')!r}")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise bad_param(f"{where}.content", f"{where}.content must be a string or a list of text parts",
                        "invalid_type")
    return {"role": role, "content": "".join(_text_part(p, f"{where}.content[{j}]") for j, p in enumerate(content))}


def _call(item: dict[str, Any], where: str) -> dict[str, Any]:
    """A `function_call` item as an OpenAI chat tool call."""
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise bad_param(f"{where}.name", f"{where}.name must be the function's name", "invalid_type")
    arguments = item.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return {"id": str(item.get("call_id") or item.get("id") or ""), "type": "function",
            "function": {"name": name, "arguments": arguments}}


def _output_text(value: Any, where: str) -> str:
    """A `function_call_output` item's output: a string, or text parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_text_part(p, f"{where}[{j}]") for j, p in enumerate(value))
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def _items(value: list[Any], warnings: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    skipped: list[str] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_param(where, f"{where} must be a message object with role and content", "invalid_type")
        kind = item.get("type", "message")
        if kind == "message":
            out.append(_message_item(item, where))
        elif kind == "function_call":
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":  # one assistant turn: its text, then its calls
                last.setdefault("tool_calls", []).append(_call(item, where))
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [_call(item, where)]})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                        "content": _output_text(item.get("output"), f"{where}.output")})
        elif kind == "reasoning":
            skipped.append(kind)
        else:
            raise bad_param(where, f"{where} is a {kind!r} item, which this server does not take: send message, "
                            "function_call and function_call_output items", "unsupported_parameter")
    if skipped:
        warnings.append("reasoning items ignored: the model sees the messages and tool calls of the input")
    return out


def input_messages(value: Any, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """`input` as messages in OpenAI chat shape: a string is one user message; a list holds message,
    function_call and function_call_output items."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if value is None:
        raise bad_param("input", "input is required: a string, or a list of message items",
                        "missing_required_parameter")
    if not isinstance(value, list) or not value:
        raise bad_param("input", "input must be a string or a non-empty list of message items", "invalid_type")
    return _items(value, warnings if warnings is not None else [])


def _text_format(body: dict[str, Any], warnings: list[str]) -> tuple[dict[str, Any], str | None]:
    """The echoed `text.format` and the JSON schema it asks for (JSON text; None for plain text)."""
    text = body.get("text")
    if text is None:
        return {"type": "text"}, None
    if not isinstance(text, dict):
        raise bad_param("text", "text must be an object such as {\"format\": {\"type\": \"text\"}}", "invalid_type")
    if text.get("verbosity") not in (None, "medium"):
        warnings.append("text.verbosity ignored: the model answers at its own length")
    fmt = text.get("format") or {"type": "text"}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return {"type": "text"}, None
    if kind == "json_object":
        return {"type": "json_object"}, json.dumps({"type": "object"})
    if kind == "json_schema" and isinstance(fmt.get("schema"), dict):
        return dict(fmt), json.dumps(fmt["schema"])
    raise bad_param("text.format", "text.format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                    "{\"type\": \"json_schema\", \"name\": ..., \"schema\": {...}}")


def _metadata(body: dict[str, Any]) -> dict[str, str]:
    value = body.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_param("metadata", "metadata must be an object of strings", "invalid_type")
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


def _optional_text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise bad_param(name, f"{name} must be a string", "invalid_type")
    return value or None


def parse_responses(body: Any) -> ResponsesRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_param("model", "model is required: a workflow name or a model file name (see GET /v1/models)",
                        "missing_required_parameter")
    warnings = _refuse_unsupported(body)
    tools, tool_warnings = responses_tools(body)
    text_format, schema = _text_format(body, warnings)
    sampling = Sampling(seed=seed_param(body), temperature=float_param(body, "temperature", 0.0, 2.0),
                        top_p=float_param(body, "top_p", 0.0, 1.0, open_low=True),
                        max_tokens=int_param(body, "max_output_tokens", 1, MAX_TOKENS_LIMIT), json_schema=schema)
    api = ApiRequest(model=model.strip(), stream=bool_param(body, "stream"), sampling=sampling,
                     inputs=inputs_param(body), tools=tools, warnings=warnings)
    store = body.get("store", True)
    if not isinstance(store, bool | None):
        raise bad_param("store", f"store must be true or false, got {store!r}", "invalid_type")
    messages = input_messages(body.get("input"), warnings)
    warnings += tool_warnings
    return ResponsesRequest(api=api, input_messages=messages,
                            instructions=_optional_text(body, "instructions"), store=store is not False,
                            previous_response_id=_optional_text(body, "previous_response_id"),
                            metadata=_metadata(body), text_format=text_format)
