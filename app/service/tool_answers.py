"""A workflow output that is a tool-call answer (backends.tools.types.answer_json) as what people and clients read:
its text, its calls (name, arguments, `name(args)`) and one readable line, for the app page and MCP."""

from __future__ import annotations

from typing import Any

from backends.tools.types import ToolAnswer, parse_answer_json
from nodes.algorithms.tool_calls import call_text
from nodes.base import CandidateSet


def tool_answer_of(value: Any) -> ToolAnswer | None:
    """The tool-call answer an output value holds (its text, or a candidate set's chosen candidate's), else None."""
    if isinstance(value, CandidateSet):
        if value.winner is None or not 0 <= value.winner < len(value.candidates):
            return None
        value = value.candidates[value.winner].text
    return parse_answer_json(value)


def calls_json(answer: ToolAnswer) -> list[dict[str, Any]]:
    """Each call as {name, arguments, text}: `text` is `name(arg=value, ...)`."""
    return [{"name": c.name, "arguments": dict(c.arguments), "text": call_text(c)} for c in answer.calls]


def readable_answer(answer: ToolAnswer) -> str:
    """One text for a reader: the answer's text, then `calls name(args)` for each call, one a line."""
    lines = [answer.content.strip()] if answer.content.strip() else []
    lines += [f"calls {call_text(c)}" for c in answer.calls]
    return "\n".join(lines)


def tool_answer_json(value: Any) -> dict[str, Any] | None:
    """{content, tool_calls: [{name, arguments, text}], text} for a tool-call answer (one that made no call: its
    text, no calls), else None."""
    answer = tool_answer_of(value)
    if answer is None:
        return None
    return {"content": answer.content, "tool_calls": calls_json(answer), "text": readable_answer(answer)}
