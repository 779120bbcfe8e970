"""A tool-calling conversation as prompt text: the GGUF's own jinja chat template given `tools` when it renders them
(llama.cpp's `--jinja`), else llama.cpp's generic form (tool definitions and the JSON answer format in the system
message, past calls and results as text the template can hold)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from backends.base import BackendError
from backends.tools.types import ToolRequest

log = logging.getLogger(__name__)

FAMILIES = ("hermes", "llama3", "mistral", "gemma", "generic")
"""The call formats parse.py, stream.py and grammar.py know; "generic" is llama.cpp's JSON form."""
GENERIC = "generic"


@dataclass(frozen=True)
class RenderedPrompt:
    """The prompt text, the call format the model was shown (what to parse and constrain with), and whether the
    model's own template rendered the tools (`native`) or the generic form was used."""

    text: str
    family: str
    native: bool


def detect_family(template: str | None) -> str:
    """The tool-call format a chat template teaches, from its source (the markers llama.cpp's common/chat.cpp
    looks for): hermes (`<tool_call>`: Hermes 2/3, Qwen 2.5 / 3), llama3 (the ipython role of Llama 3.1-3.3),
    mistral (`[TOOL_CALLS]`), gemma (Gemma 3 turns; FunctionGemma's `<start_function_call>`), else generic."""
    if not template:
        return GENERIC
    if "<tool_call>" in template:
        return "hermes"
    if "<start_function_call>" in template or "start_function_declaration" in template:
        return "gemma"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|start_header_id|>" in template and ("ipython" in template or "<|python_tag|>" in template):
        return "llama3"
    if "<start_of_turn>" in template:
        return "gemma"
    return GENERIC


# -- the jinja environment (as llama-cpp-python's Jinja2ChatFormatter and transformers set it up) ------------

def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False,
            ensure_ascii: bool = False) -> str:
    """transformers' `tojson`: plain JSON (jinja's own escapes `<`, `>`, `&` and `'` for HTML)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=tuple(separators) if separators else None, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=32)
def _compiled(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.Undefined)
    env.filters["tojson"] = _tojson
    env.filters["fromjson"] = json.loads  # vLLM's templates read string arguments with it
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(template)


def _raw_render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                add_generation_prompt: bool, bos_token: str, eos_token: str, extra: Mapping[str, Any]) -> str:
    context: dict[str, Any] = {"messages": messages, "add_generation_prompt": add_generation_prompt,
                               "bos_token": bos_token, "eos_token": eos_token, **extra}
    if tools is not None:
        context["tools"] = tools
    return _compiled(template).render(**context)


# -- what a template can do, probed as minja's chat_template does --------------------------------------------

@dataclass(frozen=True)
class TemplateCaps:
    """What a chat template renders, found by rendering probe conversations (minja's chat_template_caps)."""

    supports_system_role: bool = False
    supports_tools: bool = False
    supports_tool_calls: bool = False
    supports_tool_responses: bool = False
    supports_parallel_tool_calls: bool = False
    requires_object_arguments: bool = False
    requires_non_null_content: bool = False
    tools_need_system: bool = False
    """The tools show only beside a system (developer) message, as in FunctionGemma's templates."""


def _try_render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    try:
        return _raw_render(template, messages, tools, False, "", "", {})
    except Exception:  # a probe the template refuses simply shows it cannot do that
        return ""


_ARG_NEEDLES = ('"argument_needle":', "'argument_needle':", "<parameter=argument_needle>", "argument_needle:<escape>")
"""An argument rendered as the template writes it: JSON, a Python dict, XML, FunctionGemma's `key:<escape>`."""


@functools.lru_cache(maxsize=32)
def template_caps(template: str) -> TemplateCaps:
    """The capabilities of a template (cached per template text)."""
    user = {"role": "user", "content": "<User Needle>"}
    system_out = _try_render(template, [{"role": "system", "content": "<System Needle>"}, user])
    probe_tool = {"name": "some_tool", "type": "function", "function": {
        "name": "some_tool", "description": "Some tool.", "parameters": {
            "type": "object", "properties": {"arg": {"type": "string", "description": "Some argument."}},
            "required": ["arg"]}}}
    supports_tools = "some_tool" in _try_render(template, [user], [probe_tool])
    need_system = not supports_tools and "some_tool" in _try_render(
        template, [{"role": "system", "content": "<System Needle>"}, user], [probe_tool])
    supports_tools = supports_tools or need_system

    def with_content(content: Any) -> str:
        assistant = {"role": "assistant", "content": content}
        return _try_render(template, [user, assistant, user, assistant])

    requires_non_null = "<User Needle>" in with_content("") and "<User Needle>" not in with_content(None)

    def calls_message(calls: list[dict[str, Any]]) -> dict[str, Any]:
        return {"role": "assistant", "content": "" if requires_non_null else None, "tool_calls": calls}

    def call(name: str, arguments: Any) -> dict[str, Any]:
        return {"id": "call_1___", "type": "function", "function": {"arguments": arguments, "name": name}}

    args = {"argument_needle": "print('Hello, World!')"}
    out_str = _try_render(template, [user, calls_message([call("ipython", json.dumps(args))])])
    out_obj = _try_render(template, [user, calls_message([call("ipython", args)])])
    renders_str = any(n in out_str for n in _ARG_NEEDLES)
    renders_obj = any(n in out_obj for n in _ARG_NEEDLES)
    supports_calls = renders_str or renders_obj
    requires_obj = not renders_str and renders_obj
    parallel = responses = False
    if supports_calls:
        dummy = args if requires_obj else json.dumps(args)
        out = _try_render(template, [user, calls_message([call("test_tool1", dummy), call("test_tool2", dummy)])])
        parallel = "test_tool1" in out and "test_tool2" in out
        out = _try_render(template, [user, calls_message([call("test_tool1", dummy)]), {
            "role": "tool", "name": "test_tool1", "content": "Some response!", "tool_call_id": "call_911_"}])
        responses = "Some response!" in out
    return TemplateCaps(supports_system_role="<System Needle>" in system_out, supports_tools=supports_tools,
                        supports_tool_calls=supports_calls, supports_tool_responses=responses,
                        supports_parallel_tool_calls=parallel, requires_object_arguments=requires_obj,
                        requires_non_null_content=requires_non_null, tools_need_system=need_system)


# -- messages ----------------------------------------------------------------------------------------------

def _text(content: Any) -> str | None:
    """A message's content as one text (OpenAI's list of parts joined; None stays None)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                parts.append(text if isinstance(text, str) else "")
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    if isinstance(content, Mapping):
        return json.dumps(content, ensure_ascii=False)
    return str(content)


def _arguments_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _mistral_id(call_id: str) -> str:
    """Mistral's templates refuse ids that are not 9 alphanumerics: other ids map to 9 of them, the same each time."""
    if len(call_id) == 9 and call_id.isalnum():
        return call_id
    digest = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = []
    for _ in range(9):
        digest, r = divmod(digest, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def _normalized(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages in one plain shape: developer as system, text content, calls as
    `{"id", "type": "function", "function": {"name", "arguments"}}` with arguments as given, tool results named."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise BackendError(f"Chat message {i} must be a mapping with a 'role' (got {message!r:.80}).")
        role = "system" if message["role"] == "developer" else message["role"]
        item: dict[str, Any] = {"role": role, "content": _text(message.get("content"))}
        calls = message.get("tool_calls")
        if role == "assistant" and calls:
            item["tool_calls"] = []
            for j, call in enumerate(calls):
                fn = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                    raise BackendError(f"messages[{i}].tool_calls[{j}] must be {{\"type\": \"function\", "
                                       "\"function\": {\"name\": ..., \"arguments\": ...}}.")
                call_id = str(call.get("id") or f"call_{i}_{j}")
                names[call_id] = fn["name"]
                item["tool_calls"].append({"id": call_id, "type": "function", "function": {
                    "name": fn["name"], "arguments": fn.get("arguments", "{}")}})
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            item["tool_call_id"] = call_id
            name = message.get("name") or names.get(call_id)
            if name:
                item["name"] = str(name)
        elif item["content"] is None:
            item["content"] = ""
        out.append(item)
    return _one_system(out)


def _one_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every system (and developer) message joined into one at the head, in order: templates take one, first (agents
    such as Codex send several, some after the first user turn)."""
    systems = [m["content"] or "" for m in messages if m["role"] == "system"]
    if len(systems) <= 1 and (not systems or messages[0]["role"] == "system"):
        return messages
    rest = [m for m in messages if m["role"] != "system"]
    return [{"role": "system", "content": "\n\n".join(s for s in systems if s)}, *rest]


def _merge_same_role(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive user messages (tool results turned into user text, turns around a system message moved to the
    head) as one, for templates that insist on turns alternating."""
    merged: list[dict[str, Any]] = []
    for m in messages:
        if merged and m["role"] == "user" and merged[-1]["role"] == "user" and "tool_calls" not in m:
            merged[-1] = {**merged[-1], "content": f"{merged[-1]['content']}\n\n{m['content']}"}
        else:
            merged.append(m)
    return merged


def _polyfilled(messages: list[dict[str, Any]], caps: TemplateCaps, *, calls_as_text: bool,
                results_as_text: bool, system_as_user: bool, object_arguments: bool,
                split_parallel: bool) -> list[dict[str, Any]]:
    """What minja's polyfills do, chosen by the caller: calls as the generic JSON answer, results as user JSON,
    the system message folded into the first user turn, arguments as objects, one call per assistant message."""
    out: list[dict[str, Any]] = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            calls = m["tool_calls"]
            if calls_as_text:
                listed = [{"name": c["function"]["name"], "arguments": _arguments_object(c["function"]["arguments"]),
                           "id": c["id"]} for c in calls]
                obj: dict[str, Any] = {"tool_calls": listed}
                if m.get("content"):
                    obj["content"] = m["content"]
                m["content"] = json.dumps(obj, ensure_ascii=False, indent=2)
                del m["tool_calls"]
            else:
                fixed = [{**c, "function": {**c["function"], "arguments": (
                    _arguments_object(c["function"]["arguments"]) if object_arguments
                    else _arguments_text(c["function"]["arguments"]))}} for c in calls]
                if m.get("content") is None and caps.requires_non_null_content:
                    m["content"] = ""
                if split_parallel and len(fixed) > 1:
                    out.extend({**m, "content": m["content"] if k == 0 else (
                        "" if caps.requires_non_null_content else None), "tool_calls": [c]}
                        for k, c in enumerate(fixed))
                    continue
                m["tool_calls"] = fixed
        if m["role"] == "tool" and results_as_text:
            response: dict[str, Any] = {}
            if m.get("name"):
                response["tool"] = m["name"]
            response["content"] = m.get("content") or ""
            if m.get("tool_call_id"):
                response["tool_call_id"] = m["tool_call_id"]
            m = {"role": "user", "content": json.dumps({"tool_response": response}, ensure_ascii=False, indent=2)}
        if m.get("content") is None and "tool_calls" not in m:
            m["content"] = ""
        out.append(m)
    if system_as_user:
        out = _system_into_user(out)
    return _merge_same_role(out)


def _system_into_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pending: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            pending.append(m.get("content") or "")
            continue
        if pending and m["role"] == "user":
            m = {**m, "content": "\n".join(pending) + ("\n" + m["content"] if m["content"] else "")}
            pending = []
        elif pending:
            out.append({"role": "user", "content": "\n".join(pending)})
            pending = []
        out.append(m)
    if pending:
        out.append({"role": "user", "content": "\n".join(pending)})
    return out


def _add_system(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


# -- the generic form -----------------------------------------------------------------------------------------

def generic_instructions(request: ToolRequest) -> str:
    """The system text of the generic form: the tools, and the JSON the answer must be (what grammar.py's generic
    grammar constrains and parse.py's generic parser reads)."""
    tools = [t.to_openai() for t in request.tools]
    lines = ["You can call any of the following tools to satisfy the user's requests: "
             + json.dumps(tools, ensure_ascii=False, indent=2), ""]
    call_shape = '{"tool_calls": [{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}]}'
    mode = request.choice.mode
    if mode == "function" and request.choice.name:
        lines.append(f"Respond in JSON format with `tool_calls`, calling the tool `{request.choice.name}`: "
                     + call_shape)
    elif mode == "required":
        lines.append("Respond in JSON format with `tool_calls` (a request to call tools): " + call_shape)
    else:
        lines.append("Respond in JSON format, either with `tool_calls` (a request to call tools): " + call_shape
                     + ' or with `response` (a reply to the user\'s request): {"response": "<your reply>"}')
    lines.append("Call one tool at a time: exactly one item in `tool_calls`." if not request.parallel else
                 "`tool_calls` may hold several calls when they are independent.")
    return "\n".join(lines)


# -- rendering ------------------------------------------------------------------------------------------------

def _llama3_extra() -> dict[str, Any]:
    return {"date_string": datetime.now().strftime("%d %b %Y"), "tools_in_user_message": False}


def render_tool_prompt(template: str | None, messages: list[dict], request: ToolRequest, *, bos_token: str = "",
                       eos_token: str = "", add_generation_prompt: bool = True) -> RenderedPrompt:
    """The prompt for a tool-calling conversation: natively through `template` when it renders tools and its
    call format is one parse.py knows, else the generic form through the same template (or a plain ChatML-like
    rendering when there is no template). BackendError when the template refuses the conversation."""
    family = detect_family(template)
    normalized = _normalized(messages)
    if not template:
        template = _FALLBACK_TEMPLATE
    caps = template_caps(template)
    native = family != GENERIC and caps.supports_tools and caps.supports_tool_calls
    extra: dict[str, Any] = _llama3_extra() if family == "llama3" else {}
    if native:
        if family == "mistral":
            normalized = _mistral_ids(normalized)
        if caps.tools_need_system and request.active and not any(m["role"] == "system" for m in normalized):
            normalized = [{"role": "system", "content": FUNCTION_CALLING_SYSTEM}, *normalized]
        prepared = _polyfilled(normalized, caps, calls_as_text=False, results_as_text=not caps.supports_tool_responses,
                               system_as_user=not caps.supports_system_role,
                               object_arguments=caps.requires_object_arguments,
                               split_parallel=not caps.supports_parallel_tool_calls)
        tools = [t.to_openai() for t in request.tools] if request.active else None
        text = _render(template, prepared, tools, add_generation_prompt, bos_token, eos_token, extra)
        return RenderedPrompt(text, family, True)
    prepared = normalized
    if request.active:
        prepared = _add_system(prepared, generic_instructions(request))
    prepared = _polyfilled(prepared, caps, calls_as_text=True, results_as_text=True,
                           system_as_user=not caps.supports_system_role, object_arguments=True, split_parallel=False)
    text = _render(template, prepared, None, add_generation_prompt, bos_token, eos_token, extra)
    return RenderedPrompt(text, GENERIC, False)


def _mistral_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        if "tool_calls" in m:
            m = {**m, "tool_calls": [{**c, "id": _mistral_id(c["id"])} for c in m["tool_calls"]]}
        elif m["role"] == "tool":
            m = {**m, "tool_call_id": _mistral_id(m.get("tool_call_id") or "")}
        out.append(m)
    return out


def _render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
            add_generation_prompt: bool, bos_token: str, eos_token: str, extra: Mapping[str, Any]) -> str:
    try:
        return _raw_render(template, messages, tools, add_generation_prompt, bos_token, eos_token, extra)
    except Exception as exc:  # jinja errors, raise_exception() in templates
        raise BackendError(f"The model's chat template rejected this tool-calling conversation: {exc}") from exc


FUNCTION_CALLING_SYSTEM = "You are a model that can do function calling with the following functions"
"""The developer message FunctionGemma's documentation prescribes, for templates that list tools only beside one."""

_FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""No template at all (the engine gives models without one their architecture's turns, so this is a last resort)."""
