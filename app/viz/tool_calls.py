"""Tool-call candidates in the views: their calls as `name(args)` lines instead of their answer JSON, the canonical
answer they voted with as the same lines, and the `tool_schema` verdict beside them."""

from __future__ import annotations

from typing import Any

from app.viz.common import esc
from nodes.algorithms.tool_calls import canonical_label, readable


def is_tool_candidate(c: dict[str, Any]) -> bool:
    meta = c.get("meta")
    return isinstance(meta, dict) and isinstance(meta.get("tool_calls"), dict)


def candidate_text(c: dict[str, Any]) -> str:
    """The text a view shows: a tool candidate's calls as `name(args)` lines (its text when it made none)."""
    text = str(c.get("text", ""))
    return readable(text) if is_tool_candidate(c) else text


def candidate_answer(c: dict[str, Any]) -> Any:
    """The answer a view shows: a tool candidate's canonical calls as `name(args)` lines."""
    answer = c.get("answer")
    if answer is None or not is_tool_candidate(c):
        return answer
    try:
        return canonical_label(str(answer))
    except (ValueError, TypeError, IndexError):  # an answer some later node replaced
        return answer


def schema_verdict(c: dict[str, Any]) -> dict[str, Any] | None:
    meta = c.get("meta")
    verdict = meta.get("tool_schema") if isinstance(meta, dict) else None
    return verdict if isinstance(verdict, dict) else None


def schema_cell(c: dict[str, Any]) -> str:
    """The schema check's verdict as a table cell: ✓ or ✗ with its reason ('' when unchecked)."""
    verdict = schema_verdict(c)
    if verdict is None:
        return ""
    mark = "✓ valid" if verdict.get("ok") else "✗ " + str(verdict.get("reason", ""))
    return f"<span class=mg-text title=\"{esc(str(verdict.get('reason', '')))}\">{esc(mark[:160])}</span>"
