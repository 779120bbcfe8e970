"""The data of tool calling that crosses every layer: a request's tools and choice, a model's calls, and the
answer (text and calls) a workflow output carries as JSON text."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ChoiceMode = Literal["auto", "none", "required", "function"]
ANSWER_KEY = "tool_calls"
"""A workflow output whose value is a JSON object with this key is a tool-call answer (see `answer_json`)."""


@dataclass(frozen=True)
class ToolSpec:
    """One function the model may call: its name, what it does and its arguments' JSON schema (an object)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions shape `{"type": "function", "function": {...}}` (what chat templates read)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.parameters)}}


@dataclass(frozen=True)
class ToolChoice:
    """auto: the model decides; none: text only; required: at least one call; function: a call of `name`."""

    mode: ChoiceMode = "auto"
    name: str | None = None


@dataclass(frozen=True)
class ToolRequest:
    """What a request asks of tool calling."""

    tools: tuple[ToolSpec, ...] = ()
    choice: ToolChoice = ToolChoice()
    parallel: bool = True
    """Several calls in one answer allowed (`parallel_tool_calls`)."""

    @property
    def active(self) -> bool:
        """Whether tools take part at all (tools given and the choice is not `none`)."""
        return bool(self.tools) and self.choice.mode != "none"

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)


SERVER_FAMILY = "server"
"""The call family of a backend whose server parses calls itself (a remote OpenAI-compatible engine): the prompt goes
as chat messages with the request's tools (SamplingParams.tools), and each completion's text is answer_json."""


def request_fields(request: ToolRequest, strict: bool = False) -> dict[str, Any]:
    """The request as chat-completions fields: `tools` (strict ones marked `strict: true`, all of them when
    `strict`), `tool_choice` in the API's spelling, `parallel_tool_calls`."""
    tools = []
    for t in request.tools:
        item = t.to_openai()
        if strict or t.strict:
            item["function"]["strict"] = True
        tools.append(item)
    choice: Any = request.choice.mode if request.choice.mode != "function" else \
        {"type": "function", "function": {"name": request.choice.name}}
    return {"tools": tools, "tool_choice": choice, "parallel_tool_calls": request.parallel}


def new_call_id() -> str:
    return f"call_{secrets.token_hex(12)}"


@dataclass(frozen=True)
class ToolCall:
    """One call a model made: the function's name and its arguments (decoded JSON)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""

    def arguments_json(self) -> str:
        return json.dumps(dict(self.arguments), ensure_ascii=False)

    def with_id(self) -> ToolCall:
        return self if self.id else ToolCall(self.name, self.arguments, new_call_id())

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments), **({"id": self.id} if self.id else {})}


@dataclass(frozen=True)
class ToolAnswer:
    """An answer that may hold tool calls: text before or beside them, and the calls in order."""

    content: str = ""
    calls: tuple[ToolCall, ...] = ()


def answer_json(answer: ToolAnswer) -> str:
    """A tool-call answer as the JSON text a workflow output carries (`parse_answer_json` reads it back)."""
    return json.dumps({"content": answer.content, ANSWER_KEY: [c.to_json() for c in answer.calls]},
                      ensure_ascii=False, sort_keys=True)


def parse_answer_json(value: object) -> ToolAnswer | None:
    """The tool-call answer a workflow output holds, or None when the value is plain text (or malformed)."""
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get(ANSWER_KEY), list):
        return None
    calls = []
    for item in data[ANSWER_KEY]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        args = item.get("arguments", {})
        if not isinstance(args, dict):
            return None
        calls.append(ToolCall(item["name"], args, item.get("id") if isinstance(item.get("id"), str) else ""))
    content = data.get("content")
    return ToolAnswer(content if isinstance(content, str) else "", tuple(calls))


def tools_from_openai(items: Sequence[Mapping[str, Any]]) -> tuple[ToolSpec, ...]:
    """ToolSpecs from chat-completions function tools (`{"type": "function", "function": {...}}`); ValueError
    naming the first malformed entry."""
    specs = []
    for i, item in enumerate(items):
        fn = item.get("function") if isinstance(item, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError(f"tools[{i}] must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(params, Mapping):
            raise ValueError(f"tools[{i}].function.parameters must be a JSON schema object")
        specs.append(ToolSpec(fn["name"], str(fn.get("description") or ""), dict(params), bool(fn.get("strict"))))
    return tuple(specs)
