"""Tools and tool choices in each door's spelling (chat completions, Responses, Messages) read into one
`ToolRequest`; tools a local model cannot run (hosted and server tools) are dropped with a warning, never a 400."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.serve.errors import bad_param
from backends.tools.types import ToolChoice, ToolRequest, ToolSpec

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
CHAT_CHOICES = {"auto": "auto", "none": "none", "required": "required"}
MESSAGES_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def dropped(kinds: list[str], door: str) -> list[str]:
    """The warning for tools this server cannot run (one line for all of them)."""
    if not kinds:
        return []
    return [f"tools dropped: {', '.join(dict.fromkeys(kinds))} ({door} tools that run on the provider's side, which "
            "a local model cannot run; only function tools are offered to the model)"]


def _schema(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return dict(EMPTY_SCHEMA)
    if not isinstance(value, Mapping):
        raise bad_param(where, f"{where} must be a JSON schema object", "invalid_type")
    return dict(value)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad_param(where, f"{where} must be the function's name (a non-empty string)",
                        "missing_required_parameter" if value is None else "invalid_type")
    return value.strip()


def _list(body: Mapping[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_param(key, f"{key} must be a list of tools", "invalid_type")
    return value


def _check_named(request: ToolRequest, where: str) -> ToolRequest:
    name = request.choice.name
    if request.choice.mode == "function" and request.tool(name or "") is None:
        known = ", ".join(t.name for t in request.tools) or "none"
        raise bad_param(where, f"{where} names the function {name!r}, which is not among the tools ({known})")
    return request


# ---------------------------------------------------------------- chat completions


def _chat_choice(value: Any, where: str) -> ToolChoice:
    if value is None:
        return ToolChoice()
    if isinstance(value, str) and value in CHAT_CHOICES:
        return ToolChoice(CHAT_CHOICES[value])  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        fn = value.get("function")
        if value.get("type") == "function" and isinstance(fn, Mapping):
            return ToolChoice("function", _name(fn.get("name"), f"{where}.function.name"))
        if "name" in value and value.get("type") in (None, "function"):  # the legacy function_call {"name"}
            return ToolChoice("function", _name(value.get("name"), f"{where}.name"))
    raise bad_param(where, f"{where} must be \"auto\", \"none\", \"required\" or {{\"type\": \"function\", "
                    f"\"function\": {{\"name\": ...}}}}, got {value!r}")


def chat_tools(body: Mapping[str, Any]) -> tuple[ToolRequest, list[str]]:
    """`tools`, `tool_choice` and `parallel_tool_calls` of /v1/chat/completions (and the legacy `functions` /
    `function_call`)."""
    specs, other = [], []
    for i, item in enumerate(_list(body, "tools")):
        where = f"tools[{i}]"
        if not isinstance(item, Mapping):
            raise bad_param(where, f"{where} must be a tool object", "invalid_type")
        if item.get("type", "function") != "function":
            other.append(str(item.get("type")))
            continue
        fn = item.get("function")
        if not isinstance(fn, Mapping):
            raise bad_param(where, f"{where} must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                            "invalid_type")
        specs.append(ToolSpec(_name(fn.get("name"), f"{where}.function.name"), str(fn.get("description") or ""),
                              _schema(fn.get("parameters"), f"{where}.function.parameters"), bool(fn.get("strict"))))
    for i, fn in enumerate(_list(body, "functions")):
        where = f"functions[{i}]"
        if not isinstance(fn, Mapping):
            raise bad_param(where, f"{where} must be a function object", "invalid_type")
        specs.append(ToolSpec(_name(fn.get("name"), f"{where}.name"), str(fn.get("description") or ""),
                              _schema(fn.get("parameters"), f"{where}.parameters")))
    key = "tool_choice" if body.get("tool_choice") is not None else "function_call"
    choice = _chat_choice(body.get(key), key)
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool | None):
        raise bad_param("parallel_tool_calls", "parallel_tool_calls must be true or false", "invalid_type")
    request = ToolRequest(tuple(specs), choice, parallel is not False)
    return _check_named(request, key), dropped(other, "hosted")


def chat_tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    """An assistant message's `tool_calls`, checked, in OpenAI chat shape (arguments as JSON text)."""
    if not isinstance(value, list):
        raise bad_param(where, f"{where} must be a list of tool calls", "invalid_type")
    calls = []
    for j, call in enumerate(value):
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            raise bad_param(f"{where}[{j}]", f"{where}[{j}] must be {{\"id\", \"type\": \"function\", "
                            "\"function\": {\"name\", \"arguments\"}}", "invalid_type")
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        calls.append({"id": str(call.get("id") or f"call_{j}"), "type": "function",
                      "function": {"name": _name(fn.get("name"), f"{where}[{j}].function.name"),
                                   "arguments": arguments}})
    return calls


# ---------------------------------------------------------------- Responses


def _responses_function(item: Mapping[str, Any], where: str) -> ToolSpec:
    return ToolSpec(_name(item.get("name"), f"{where}.name"), str(item.get("description") or ""),
                    _schema(item.get("parameters"), f"{where}.parameters"), bool(item.get("strict")))


def _responses_specs(items: list[Any], where: str, specs: list[ToolSpec], other: list[str]) -> None:
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise bad_param(at, f"{at} must be a tool object", "invalid_type")
        kind = item.get("type")
        if kind == "function":
            specs.append(_responses_function(item, at))
        elif kind == "namespace" and isinstance(item.get("tools"), list):  # a group of tools: offered one by one
            _responses_specs(item["tools"], f"{at}.tools", specs, other)
        else:
            other.append(str(kind))


def _responses_choice(value: Any, specs: list[ToolSpec]) -> tuple[ToolChoice, list[ToolSpec], list[str]]:
    """The choice, the tools it leaves (`allowed_tools` narrows them) and warnings."""
    if value is None:
        return ToolChoice(), specs, []
    if isinstance(value, str) and value in CHAT_CHOICES:
        return ToolChoice(CHAT_CHOICES[value]), specs, []  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind == "function":
            return ToolChoice("function", _name(value.get("name"), "tool_choice.name")), specs, []
        if kind == "allowed_tools" and isinstance(value.get("tools"), list):
            names = {t.get("name") for t in value["tools"] if isinstance(t, Mapping)}
            mode = "required" if value.get("mode") == "required" else "auto"
            return ToolChoice(mode), [s for s in specs if s.name in names], []
        if isinstance(kind, str):
            return ToolChoice(), specs, [f"tool_choice {kind!r} ignored: that tool is not offered here (auto instead)"]
    raise bad_param("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                    f"\"name\": ...}}, got {value!r}")


def responses_tools(body: Mapping[str, Any]) -> tuple[ToolRequest, list[str]]:
    """`tools` (function tools, namespaces of them), `tool_choice` and `parallel_tool_calls` of /v1/responses."""
    specs: list[ToolSpec] = []
    other: list[str] = []
    _responses_specs(_list(body, "tools"), "tools", specs, other)
    choice, specs, warnings = _responses_choice(body.get("tool_choice"), specs)
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool | None):
        raise bad_param("parallel_tool_calls", "parallel_tool_calls must be true or false", "invalid_type")
    request = ToolRequest(tuple(specs), choice, parallel is not False)
    return _check_named(request, "tool_choice"), dropped(other, "hosted") + warnings


def responses_tools_echo(request: ToolRequest) -> list[dict[str, Any]]:
    """The function tools as a response object lists them."""
    return [{"type": "function", "name": t.name, "description": t.description or None,
             "parameters": dict(t.parameters), "strict": t.strict} for t in request.tools]


def responses_choice_echo(request: ToolRequest) -> Any:
    mode = request.choice.mode
    return {"type": "function", "name": request.choice.name} if mode == "function" else mode


# ---------------------------------------------------------------- Messages


def messages_tools(body: Mapping[str, Any]) -> tuple[ToolRequest, list[str]]:
    """`tools` (custom tools with `input_schema`) and `tool_choice` of /v1/messages; server tools (web search,
    bash, the text editor, code execution...) are dropped with a warning."""
    specs, other = [], []
    for i, item in enumerate(_list(body, "tools")):
        where = f"tools[{i}]"
        if not isinstance(item, Mapping):
            raise bad_param(where, f"{where} must be a tool object", "invalid_type")
        kind = item.get("type")
        if kind not in (None, "custom") or "input_schema" not in item:
            other.append(str(kind or item.get("name")))
            continue
        specs.append(ToolSpec(_name(item.get("name"), f"{where}.name"), str(item.get("description") or ""),
                              _schema(item.get("input_schema"), f"{where}.input_schema")))
    value = body.get("tool_choice")
    choice, parallel = ToolChoice(), True
    if value is not None:
        kind = value.get("type") if isinstance(value, Mapping) else None
        if kind == "tool":
            choice = ToolChoice("function", _name(value.get("name"), "tool_choice.name"))
        elif kind in MESSAGES_CHOICES:
            choice = ToolChoice(MESSAGES_CHOICES[kind])  # type: ignore[arg-type]
        else:
            raise bad_param("tool_choice", "tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} or "
                            f"{{\"type\": \"tool\", \"name\": ...}}, got {value!r}")
        parallel = not value.get("disable_parallel_tool_use", False)
    request = ToolRequest(tuple(specs), choice, parallel)
    return _check_named(request, "tool_choice"), dropped(other, "server")
