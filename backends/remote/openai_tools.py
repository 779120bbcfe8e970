"""Tool calls parsed by a remote server: which servers do it, the messages and tool fields of a chat request, the
streamed `tool_calls` deltas put together, and a choice's text and calls as the answer JSON the nodes read."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from backends.base import BackendError, Prompt
from backends.tools.types import ToolAnswer, ToolCall, answer_json

log = logging.getLogger(__name__)

TOOL_SERVERS = ("vllm", "sglang", "llama_server", "ollama", "metagen", "openai")
"""Server kinds whose chat endpoint takes `tools` and answers parsed `tool_calls` (vLLM with
--enable-auto-tool-choice, llama-server with --jinja). llama_cpp.server parses calls for its functionary formats
only, so its models get the tools in the prompt, as an unknown server's do."""
TOOL_CALLS_OPTION = "tool_calls"
"""The model entry's option that chooses: `server` (tools sent, calls parsed by the server) or `prompt` (the
generic JSON form rendered into the prompt and parsed here); default: server where the kind is in TOOL_SERVERS."""
MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def server_parses_calls(kind: str, option: Any) -> bool:
    """Whether tool calls go to the server (`options: {tool_calls: server | prompt}`, else by server kind)."""
    if option in (None, ""):
        return kind in TOOL_SERVERS
    if option not in ("server", "prompt"):
        raise BackendError(f"options.tool_calls must be 'server' (the server parses calls) or 'prompt' (the tools in "
                           f"the prompt, parsed by the studio), got {option!r}")
    return option == "server"


def tool_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """A tool conversation's messages as the chat API takes them: assistant `tool_calls` and tool results'
    `tool_call_id` kept (arguments as JSON text, as the API spells them)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    out = []
    for m in prompt:
        message = {k: m[k] for k in MESSAGE_KEYS if k in m}  # type: ignore[literal-required]
        message.setdefault("role", "user")
        if message.get("content") is None and not message.get("tool_calls"):
            message["content"] = ""
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [_api_call(c) for c in calls]
        out.append(message)
    return out


def _api_call(call: Any) -> Any:
    if not isinstance(call, Mapping):
        return call
    fn = call.get("function")
    if isinstance(fn, Mapping) and not isinstance(fn.get("arguments", ""), str):
        return {**call, "function": {**fn, "arguments": json.dumps(fn["arguments"], ensure_ascii=False)}}
    return dict(call)


def tool_body_fields(tools_json: str) -> dict[str, Any]:
    """SamplingParams.tools (JSON text) as the request body's fields."""
    try:
        fields = json.loads(tools_json)
    except ValueError:
        raise BackendError("SamplingParams.tools must be JSON text of {tools, tool_choice, parallel_tool_calls}") \
            from None
    if not isinstance(fields, dict) or not isinstance(fields.get("tools"), list):
        raise BackendError("SamplingParams.tools must be a JSON object with a `tools` list")
    return {k: fields[k] for k in ("tools", "tool_choice", "parallel_tool_calls") if k in fields}


def add_call_deltas(calls: dict[int, dict[str, str]], part: Any) -> None:
    """Put a message's `tool_calls` (whole, or a streamed delta of them) into `calls`: by index, the id and name
    as first sent, the arguments text as its pieces arrive."""
    items = part.get("tool_calls") if isinstance(part, Mapping) else None
    if not isinstance(items, list):
        return
    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        index = item.get("index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else n
        slot = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if isinstance(item.get("id"), str) and not slot["id"]:
            slot["id"] = item["id"]
        fn = item.get("function")
        if not isinstance(fn, Mapping):
            continue
        if isinstance(fn.get("name"), str) and fn["name"]:
            slot["name"] = slot["name"] or fn["name"]
        arguments = fn.get("arguments")
        if isinstance(arguments, str):
            slot["arguments"] += arguments
        elif isinstance(arguments, Mapping):  # Ollama sends arguments as an object
            slot["arguments"] = json.dumps(arguments, ensure_ascii=False)


def answer_of(content: str, calls: Mapping[int, Mapping[str, str]]) -> str:
    """The answer JSON of a choice: its text and its calls in order. A call without a name, or whose arguments are
    not a JSON object, is kept as text (a malformed call is a text answer, never a crash)."""
    made: list[ToolCall] = []
    text = content
    for index in sorted(calls):
        slot = calls[index]
        try:
            arguments = json.loads(slot.get("arguments") or "{}")
        except ValueError:
            arguments = None
        if not slot.get("name") or not isinstance(arguments, dict):
            log.info("a server's tool call is malformed, kept as text: %s", dict(slot))
            text += ("\n" if text else "") + f"{slot.get('name', '')}({slot.get('arguments', '')})"
            continue
        made.append(ToolCall(slot["name"], arguments))
    return answer_json(ToolAnswer(text.strip(), tuple(made)))
