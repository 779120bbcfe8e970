"""Request bodies of /v1/chat/completions and /v1/completions, checked field by field: a 400 names the field."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from app.serve.config import MAX_N
from app.serve.errors import ApiError, bad_param
from app.serve.tool_params import chat_tool_calls, chat_tools
from backends.base import stop_problem
from backends.tools.types import ToolRequest

MAX_TOP_LOGPROBS = 20
MAX_TOKENS_LIMIT = 32_768
SEED_LIMIT = 2**63
"""Seeds are 64-bit integers, as OpenAI's are."""
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
UNSUPPORTED = ("audio", "modalities", "suffix")
FieldTable = dict[str, tuple[Any, str]]
"""Fields a door cannot honour: the values that mean "not used", and why (the Responses and Messages doors' tables)."""


def refuse_fields(body: dict[str, Any], table: FieldTable) -> None:
    """400 for the first field of `table` set to a value that is used: the server cannot do without it."""
    for name, (unused, why) in table.items():
        if body.get(name) not in unused:
            raise bad_param(name, f"{name} is not supported by this server: {why}", "unsupported_parameter")


def ignored_fields(body: dict[str, Any], table: FieldTable) -> list[str]:
    """The warnings (x-metagen-warning) for the fields of `table` that are set and ignored."""
    return [f"{name} ignored: {why}" for name, (unused, why) in table.items() if body.get(name) not in unused]


@dataclass
class Sampling:
    """The sampling fields both endpoints share (None: not given)."""

    n: int = 1
    seed: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: int | None = None
    """None: no logprobs; k >= 0: the chosen token's logprob and k alternatives."""
    json_schema: str | None = None
    """From response_format (JSON text)."""


@dataclass
class ApiRequest:
    model: str
    stream: bool = False
    include_usage: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    messages: list[dict[str, Any]] = field(default_factory=list)
    """Chat: role + text content of each message, in OpenAI chat shape (an assistant message may carry
    `tool_calls`, a `tool` message its `tool_call_id`)."""
    prompt: str | None = None
    """Completions: the prompt."""
    inputs: dict[str, Any] | None = None
    """Workflow inputs from `inputs` (extra_body) or `metadata.inputs`."""
    tools: ToolRequest = field(default_factory=ToolRequest)
    """The functions the model may call and the choice among them."""
    warnings: list[str] = field(default_factory=list)
    """Request fields taken but not honoured (said in the x-metagen-warning header)."""


def int_param(body: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float)
                                                                         and not value.is_integer()):
        raise bad_param(name, f"{name} must be a whole number, got {value!r}", "invalid_type")
    if not low <= value <= high:
        raise bad_param(name, f"{name} must be between {low} and {high}, got {int(value)}")
    return int(value)


def float_param(body: dict[str, Any], name: str, low: float, high: float, *, open_low: bool = False) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise bad_param(name, f"{name} must be a number, got {value!r}", "invalid_type")
    if value > high or value < low or (open_low and value <= low):
        bound = f"above {low:g}" if open_low else f"at least {low:g}"
        raise bad_param(name, f"{name} must be {bound} and at most {high:g}, got {value:g}")
    return float(value)


def bool_param(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_param(name, f"{name} must be true or false, got {value!r}", "invalid_type")
    return value


def seed_param(body: dict[str, Any]) -> int | None:
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_param("seed", f"seed must be a whole number, got {seed!r}", "invalid_type")
    if seed is not None and not -SEED_LIMIT <= seed < SEED_LIMIT:
        shown = str(seed) if len(str(seed)) <= 24 else f"a number of {len(str(seed))} digits"
        raise bad_param("seed", f"seed must be a 64-bit integer (from -2**63 to 2**63 - 1), got {shown}")
    return seed


def stop_param(body: dict[str, Any], name: str = "stop") -> tuple[str, ...]:
    value = body.get(name)
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise bad_param(name, f"{name} must be a string or a list of strings", "invalid_type")
    problem = stop_problem(items)
    if problem:
        raise bad_param(name, f"{name} {problem}")
    return tuple(s for s in items if s)


def _response_format(body: dict[str, Any]) -> str | None:
    value = body.get("response_format")
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in (None, "text"):
        if kind is None:
            raise bad_param("response_format", "response_format must be an object with a `type`: text, "
                            "json_object or json_schema")
        return None
    if kind == "json_object":
        return json.dumps({"type": "object"})
    if kind == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise bad_param("response_format", "response_format.json_schema.schema must be a JSON schema object")
        return json.dumps(schema)
    raise bad_param("response_format", f"response_format type {kind!r} is not supported; use text, json_object "
                    "or json_schema")


def _sampling(body: dict[str, Any], *, chat: bool, max_n: int) -> Sampling:
    tokens = int_param(body, "max_completion_tokens", 1, MAX_TOKENS_LIMIT) if chat else None
    if tokens is None:
        tokens = int_param(body, "max_tokens", 1, MAX_TOKENS_LIMIT)
    if chat:
        top = int_param(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
        if top is not None and not body.get("logprobs"):
            raise bad_param("top_logprobs", "top_logprobs needs logprobs: true")
        logprobs = (top or 0) if bool_param(body, "logprobs") else None
    else:
        logprobs = int_param(body, "logprobs", 0, MAX_TOP_LOGPROBS)
    return Sampling(
        n=int_param(body, "n", 1, max_n) or 1,
        seed=seed_param(body),
        temperature=float_param(body, "temperature", 0.0, 2.0),
        top_p=float_param(body, "top_p", 0.0, 1.0, open_low=True),
        max_tokens=tokens,
        stop=stop_param(body),
        logprobs=logprobs,
        json_schema=_response_format(body),
    )


def message_text(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise bad_param(where, f"{where}: only text content parts are supported, got {kind!r}")
            texts.append(part["text"])
        return "".join(texts)
    raise bad_param(where, f"{where} must be a string or a list of text parts", "invalid_type")


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    value = body.get("messages")
    if value is None:
        raise bad_param("messages", "messages is required: a list of {role, content} objects",
                        "missing_required_parameter")
    if not isinstance(value, list):
        raise bad_param("messages", "messages must be a list of {role, content} objects", "invalid_type")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_param(where, f"{where} must be an object with role and content", "invalid_type")
        out.append(_message(message, where))
    return out


def _message(message: dict[str, Any], where: str) -> dict[str, Any]:
    """One chat message in OpenAI chat shape: tool results and the assistant's tool calls kept."""
    given = str(message.get("role"))
    if given in ("tool", "function"):
        call_id = message.get("tool_call_id") or message.get("name") or ""
        return {"role": "tool", "tool_call_id": str(call_id),
                "content": message_text(message.get("content"), f"{where}.content")}
    role = ROLES.get(given)
    if role is None:
        raise bad_param(f"{where}.role", f"{where}.role must be system, developer, user, assistant or tool, got "
                        f"{message.get('role')!r}")
    out: dict[str, Any] = {"role": role, "content": message_text(message.get("content"), f"{where}.content")}
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = chat_tool_calls(message["tool_calls"], f"{where}.tool_calls")
    elif role == "assistant" and isinstance(message.get("function_call"), dict):
        out["tool_calls"] = chat_tool_calls([{"id": "call_0", "function": message["function_call"]}],
                                            f"{where}.function_call")
    return out


def inputs_param(body: dict[str, Any]) -> dict[str, Any] | None:
    if body.get("inputs") is not None:
        if not isinstance(body["inputs"], dict):
            raise bad_param("inputs", "inputs must be an object of workflow input values", "invalid_type")
        return dict(body["inputs"])
    metadata = body.get("metadata")
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise bad_param("metadata", "metadata must be an object", "invalid_type")
    value = metadata.get("inputs")
    if isinstance(value, str):  # metadata values are strings in OpenAI's API: inputs may come as JSON text
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise bad_param("metadata.inputs", "metadata.inputs must be a JSON object (as text or as an object)") \
                from None
    if value is not None and not isinstance(value, dict):
        raise bad_param("metadata.inputs", "metadata.inputs must be a JSON object of workflow input values")
    return value


def _common(body: Any) -> tuple[dict[str, Any], str]:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_param("model", "model is required: a workflow name or a model file name (see GET /v1/models)",
                        "missing_required_parameter")
    for name in UNSUPPORTED:
        if body.get(name) not in (None, [], ""):
            raise bad_param(name, f"{name} is not supported by this server", "unsupported_parameter")
    return body, model.strip()


def _stream_options(body: dict[str, Any], stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise bad_param("stream_options", "stream_options must be an object", "invalid_type")
    if not stream:
        raise bad_param("stream_options", "stream_options is only allowed with stream: true")
    return bool_param(options, "include_usage")


def parse_chat(body: Any, max_n: int = MAX_N) -> ApiRequest:
    body, model = _common(body)
    stream = bool_param(body, "stream")
    tools, warnings = chat_tools(body)
    return ApiRequest(model=model, stream=stream, include_usage=_stream_options(body, stream),
                      sampling=_sampling(body, chat=True, max_n=max_n), messages=_messages(body),
                      inputs=inputs_param(body), tools=tools, warnings=warnings)


def parse_completion(body: Any, max_n: int = MAX_N) -> ApiRequest:
    body, model = _common(body)
    for name in ("tools", "functions", "tool_choice", "function_call"):
        if body.get(name) not in (None, [], ""):
            raise bad_param(name, f"{name} is not taken by /v1/completions: tools are for /v1/chat/completions, "
                            "/v1/responses and /v1/messages", "unsupported_parameter")
    if bool_param(body, "echo"):
        raise bad_param("echo", "echo is not supported by this server", "unsupported_parameter")
    if body.get("best_of") not in (None, 1):
        raise bad_param("best_of", "best_of is not supported; use n, or serve a best-of-N workflow",
                        "unsupported_parameter")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad_param("prompt", "prompt must be one string (token-id prompts and lists of prompts are not "
                        "supported)", "invalid_type" if prompt is not None else "missing_required_parameter")
    stream = bool_param(body, "stream")
    return ApiRequest(model=model, stream=stream, include_usage=_stream_options(body, stream),
                      sampling=_sampling(body, chat=False, max_n=max_n), prompt=prompt)
