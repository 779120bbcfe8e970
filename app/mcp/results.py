"""What a tool call answers: the run's outputs, run id and stats as structured content plus the main output as
text, or a tool error (isError) carrying the product's coded message."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types

from app.run.scheduler import RunResult
from app.serve.failures import api_error
from app.serve.workflow_request import PreparedRun
from app.serve.workflow_runs import graded_text
from nodes.base import to_jsonable

log = logging.getLogger(__name__)


def run_stats(result: RunResult) -> dict[str, Any]:
    s = result.stats
    return {"tokens": s.prompt_tokens + s.completion_tokens, "seconds": round(s.wall_s, 3), "lm_calls": s.lm_calls}


def success(prepared: PreparedRun, result: RunResult) -> types.CallToolResult:
    structured = {"outputs": to_jsonable(result.outputs), "run_id": result.run_id, "stats": run_stats(result)}
    text = graded_text(result.outputs.get(prepared.graded.output, ""))
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


def failure(exc: BaseException) -> types.CallToolResult:
    """A tool error: the text says `[code] message`; the structured content is the /v1 error body (code, param,
    run_id, node, issues where known)."""
    error = api_error(exc, "an MCP tool call")
    return types.CallToolResult(content=[types.TextContent(text=f"[{error.code}] {error.message}")],
                                structured_content=error.body(), is_error=True)
