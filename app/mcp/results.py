"""What a tool call answers: the run's outputs, run id and stats as structured content plus the main output as
text (a tool-call answer as its calls, structured and readable), or a tool error (isError) carrying the product's
coded message."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types

from app.run.scheduler import RunResult
from app.serve.failures import api_error
from app.serve.workflow_request import PreparedRun
from app.serve.workflow_runs import graded_text
from app.service.tool_answers import tool_answer_json
from nodes.base import to_jsonable

log = logging.getLogger(__name__)


def run_stats(result: RunResult) -> dict[str, Any]:
    s = result.stats
    return {"tokens": s.prompt_tokens + s.completion_tokens, "seconds": round(s.wall_s, 3), "lm_calls": s.lm_calls}


def success(prepared: PreparedRun, result: RunResult) -> types.CallToolResult:
    """The outputs, run id and stats; when the main output is a tool-call answer, that answer as `tool_answer`
    ({content, tool_calls: [{name, arguments, text}]}) and its calls as the text (`calls get_weather(city="Paris")`),
    not its answer JSON."""
    value = result.outputs.get(prepared.graded.output, "")
    structured = {"outputs": to_jsonable(result.outputs), "run_id": result.run_id, "stats": run_stats(result)}
    tool_answer = tool_answer_json(value)
    if tool_answer is not None:
        text = tool_answer.pop("text") or "(no call)"
        structured["tool_answer"] = tool_answer
    else:
        text = graded_text(value)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


def failure(exc: BaseException) -> types.CallToolResult:
    """A tool error: the text says `[code] message`; the structured content is the /v1 error body (code, param,
    run_id, node, issues where known)."""
    error = api_error(exc, "an MCP tool call")
    return types.CallToolResult(content=[types.TextContent(text=f"[{error.code}] {error.message}")],
                                structured_content=error.body(), is_error=True)
