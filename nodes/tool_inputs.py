"""Tool calling in the generating kinds: the `tool_calls` / `constrained` params, the request a node reads from its
inputs named `tools`, `tool_choice` and `messages` (OpenAI chat shapes), the prompt rendered through the model's
chat template with those tools, and each sample parsed into a candidate whose text is `answer_json(...)`.

A candidate set drawn this way carries the request in `meta["tool_request"]` ({"tools", "tool_choice",
"parallel"}), so a `tool_schema` verifier or a `tool_calls` voter downstream needs no wiring of its own; each
candidate keeps its raw completion and its family in `meta["tool_calls"]` ({"family", "raw", "calls": the
name(args) lines, "native"}).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from backends.base import Completion, Prompt, SamplingParams
from backends.tools.types import (
    SERVER_FAMILY,
    ToolAnswer,
    ToolCall,
    ToolChoice,
    ToolRequest,
    answer_json,
    parse_answer_json,
    request_fields,
    tools_from_openai,
)
from nodes.algorithms.tool_calls import answer_text, canonical_answer
from nodes.base import Candidate, CandidateSet, NodeContext, NodeError, Param

TOOLS_INPUT, CHOICE_INPUT, MESSAGES_INPUT = "tools", "tool_choice", "messages"
"""The inputs a tool-calling node reads (the doors fill workflow inputs of these names from the request)."""
REQUEST_META = "tool_request"

TOOL_PARAMS = (
    Param("tool_calls", "bool", False, "Answer with tool calls: the inputs `tools` (OpenAI function tools), "
          "`tool_choice` (auto, none, required or {type: function, function: {name}}) and `messages` (the "
          "conversation; empty: the prompt as the user's message) are rendered through the model's chat template "
          "with the tools, and each sample is parsed into its calls (or its text)"),
    Param("constrained", "bool", False, "Tool calls: sample under a grammar built from the tools' JSON schemas, "
          "so a malformed call cannot be sampled (auto: a valid call or a reply; required / a named function: "
          "calls only)", show_if=("tool_calls", (True,))),
)


def tool_mode(params: Mapping[str, Any]) -> bool:
    return params.get("tool_calls") is True


def tool_problems(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Cross-param checks of tool-calling mode."""
    if not tool_mode(params):
        return [("constrained", "constrained applies to tool calls: set tool_calls: true")] \
            if params.get("constrained") is True else []
    out: list[tuple[str, str]] = []
    if params.get("mode") == "raw":
        out.append(("mode", "tool calls are rendered through the chat template: set mode: chat"))
    if params.get("constrained") is True and (params.get("grammar") or params.get("json_schema")):
        out.append(("constrained", "constrained builds its grammar from the tools: leave grammar and json_schema "
                                   "empty"))
    return out


def parse_choice(value: Any) -> ToolChoice:
    """An OpenAI chat `tool_choice` ("auto", "none", "required", {"type": "function", "function": {"name"}}, or
    that as JSON text; empty: auto) as a ToolChoice; NodeError naming the accepted forms otherwise."""
    if value is None or value == "" or value == {}:
        return ToolChoice()
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if isinstance(value, str) and value.strip() in ("auto", "none", "required"):
        return ToolChoice(value.strip())  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        fn = value.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else value.get("name")
        if isinstance(name, str) and name:
            return ToolChoice("function", name)
    raise NodeError(f"tool_choice must be auto, none, required or {{\"type\": \"function\", \"function\": "
                    f"{{\"name\": ...}}}}; got {json.dumps(value, default=str)[:80]}")


def _json_value(value: Any, name: str) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            return json.loads(text)
        except ValueError:
            raise NodeError(f"input {name!r} must be JSON (a list), got text that does not parse: {text[:60]!r}") \
                from None
    return value


def tool_request(tools: Any, choice: Any = None, parallel: bool = True) -> ToolRequest:
    """The ToolRequest of OpenAI chat function tools and a tool_choice; NodeError saying what is malformed."""
    items = _json_value(tools, TOOLS_INPUT)
    if items is None:
        items = []
    if not isinstance(items, list):
        raise NodeError(f"input 'tools' must be a list of {{\"type\": \"function\", \"function\": {{name, "
                        f"description, parameters}}}}, got {type(items).__name__}")
    try:
        specs = tools_from_openai(items)
    except ValueError as exc:
        raise NodeError(f"input 'tools': {exc}") from None
    request = ToolRequest(specs, parse_choice(choice), parallel)
    if request.choice.mode == "function" and request.tool(request.choice.name or "") is None:
        names = ", ".join(t.name for t in specs) or "none"
        raise NodeError(f"tool_choice names {request.choice.name!r}, which is not among the tools ({names})")
    return request


def request_json(request: ToolRequest) -> dict[str, Any]:
    """The request as the plain data a candidate set's meta carries (request_from_json reads it back)."""
    choice: Any = request.choice.mode if request.choice.mode != "function" else \
        {"type": "function", "function": {"name": request.choice.name}}
    return {"tools": [t.to_openai() for t in request.tools], "tool_choice": choice, "parallel": request.parallel}


def request_from_json(data: Any) -> ToolRequest | None:
    if not isinstance(data, Mapping):
        return None
    return tool_request(data.get("tools") or [], data.get("tool_choice"), bool(data.get("parallel", True)))


def request_for(inputs: Mapping[str, Any], cset: CandidateSet | None = None) -> ToolRequest | None:
    """The tool request a scoring or voting node works against: its own wired `tools` (and `tool_choice`) when
    given, else the one its candidates were drawn with; None when neither says."""
    if inputs.get(TOOLS_INPUT) not in (None, ""):
        return tool_request(inputs[TOOLS_INPUT], inputs.get(CHOICE_INPUT))
    if cset is not None:
        return request_from_json(cset.meta.get(REQUEST_META))
    return None


def conversation(inputs: Mapping[str, Any], fallback: Any) -> list[dict[str, Any]]:
    """The node's `messages` input (OpenAI chat shape) when wired and not empty, else `fallback` (the prompt's
    system and user messages)."""
    given = _json_value(inputs.get(MESSAGES_INPUT), MESSAGES_INPUT) if MESSAGES_INPUT in inputs else []
    if given:
        if not isinstance(given, list) or not all(isinstance(m, Mapping) and "role" in m for m in given):
            raise NodeError("input 'messages' must be a list of chat messages ({\"role\": ..., \"content\": ...})")
        return [dict(m) for m in given]
    if isinstance(fallback, str):
        return [{"role": "user", "content": fallback}]
    return [dict(m) for m in fallback]


class ToolPrompt:
    """One tool-calling prompt of a node: the request, the prompt (the rendered text, or the messages where the
    backend's server parses calls: family `server`, the tools in SamplingParams.tools) and family, the sampling
    (grammar when constrained; strict tools on such a server), and the parse of each completion into a
    candidate."""

    def __init__(self, ctx: NodeContext, inputs: Mapping[str, Any], params: Mapping[str, Any], fallback: Any,
                 sp: SamplingParams) -> None:
        if TOOLS_INPUT not in inputs:
            raise NodeError("tool_calls: true reads the tools from an input named 'tools': wire the workflow's "
                            "`tools` input (a json list of OpenAI function tools) into this node")
        self.request = tool_request(inputs[TOOLS_INPUT], inputs.get(CHOICE_INPUT))
        self.messages = conversation(inputs, fallback)
        self.text, self.family = ctx.backend().render_tool_prompt(self.messages, self.request)
        self.native = self.family != "generic"
        self.params = sp
        self.prompt: Prompt = self.text
        constrained = params.get("constrained") is True
        if self.family == SERVER_FAMILY:  # the server renders the tools and parses the calls
            self.prompt = self.messages
            if self.request.tools:  # tool_choice none too: the conversation's calls need their tools
                self.params = replace(sp, tools=json.dumps(request_fields(self.request, strict=constrained)))
        elif constrained and self.request.active:
            from backends.tools.grammar import tool_call_grammar

            strict = replace(self.request, tools=tuple(replace(t, strict=True) for t in self.request.tools))
            try:
                grammar = tool_call_grammar(strict, self.family)
            except ValueError as exc:
                raise NodeError(f"constrained: {exc}") from None
            if grammar:
                self.params = replace(sp, grammar=grammar, json_schema=None)

    def answer(self, text: str) -> ToolAnswer:
        from backends.tools.parse import parse_tool_calls

        if self.family == SERVER_FAMILY:
            return parse_answer_json(text) or ToolAnswer(text.strip())
        parsed = parse_tool_calls(text, self.family, self.request)
        # ids are the door's to give (ToolCall.with_id): a candidate's text depends on the sample alone
        return ToolAnswer(parsed.content.strip(), tuple(ToolCall(c.name, c.arguments) for c in parsed.calls))

    def parse(self, c: Completion) -> tuple[Completion, str, dict[str, Any]]:
        """A completion as a candidate's parts: the completion with its text the answer's answer_json, the
        canonical answer (its calls as a multiset), and the meta it keeps (family, raw text, name(args) lines)."""
        parsed = self.answer(c.text)
        meta = {"family": self.family, "native": self.native, "raw": c.text, "calls": answer_text(parsed),
                "count": len(parsed.calls)}
        return replace(c, text=answer_json(parsed)), canonical_answer(parsed, self.request), meta

    def candidate_set(self, candidates: list[Candidate], prompt_text: str) -> CandidateSet:
        return CandidateSet(candidates, prompt=prompt_text,
                            meta={REQUEST_META: request_json(self.request), "tool_family": self.family})
