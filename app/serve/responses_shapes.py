"""The objects of the Responses API (openai.types.responses): the response, its output message and function
calls, usage, and the streamed events, each with its sequence number."""

from __future__ import annotations

import secrets
import time
from typing import Any

from app.serve import sse
from app.serve.errors import ApiError
from app.serve.responses_params import ResponsesRequest
from app.serve.tool_params import responses_choice_echo, responses_tools_echo
from backends.base import TokenCounts
from backends.tools.types import ToolCall

FAILURE_CODES = {429: "rate_limit_exceeded"}
"""A failed response's error.code (the Responses API names few codes; ours goes into error.type)."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def usage(counts: TokenCounts) -> dict[str, Any]:
    return {"input_tokens": counts.prompt_tokens,
            "input_tokens_details": {"cached_tokens": counts.prompt_tokens_cached, "cache_write_tokens": 0},
            "output_tokens": counts.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": counts.thinking_tokens},
            "total_tokens": counts.prompt_tokens + counts.completion_tokens}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def output_message(item_id: str, text: str | None, status: str = "completed") -> dict[str, Any]:
    """The assistant message item (`text` None: not started, no content part yet)."""
    return {"id": item_id, "type": "message", "role": "assistant", "status": status,
            "content": [] if text is None else [text_part(text)]}


def function_call_item(item_id: str, call: ToolCall | None, status: str = "completed", *, call_id: str = "",
                       name: str = "") -> dict[str, Any]:
    """A `function_call` output item (`call` None: just started, its arguments still to come)."""
    return {"id": item_id, "type": "function_call", "status": status,
            "call_id": call.id if call is not None else call_id, "name": call.name if call is not None else name,
            "arguments": call.arguments_json() if call is not None else ""}


def answer_output(message_id: str, text: str, calls: tuple[ToolCall, ...], status: str) -> list[dict[str, Any]]:
    """The output items of a whole answer: its message (left out when it has calls and no text), then its calls."""
    items = [output_message(message_id, text, status)] if text or not calls else []
    return items + [function_call_item(new_id("fc"), call) for call in calls]


def failure_error(exc: ApiError) -> dict[str, Any]:
    return {"code": FAILURE_CODES.get(exc.status, "server_error"), "message": exc.message, "type": exc.code,
            "param": exc.param}


def response_object(rid: str, req: ResponsesRequest, model: str, *, created_at: int, status: str,
                    output: list[dict[str, Any]], counts: TokenCounts | None = None,
                    error: dict[str, Any] | None = None, incomplete: str | None = None, store: bool | None = None,
                    metagen: dict[str, Any] | None = None) -> dict[str, Any]:
    s = req.api.sampling
    out: dict[str, Any] = {
        "id": rid, "object": "response", "created_at": created_at, "status": status, "background": False,
        "error": error, "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": req.instructions, "max_output_tokens": s.max_tokens, "metadata": req.metadata,
        "model": model, "output": output, "parallel_tool_calls": req.api.tools.parallel,
        "previous_response_id": req.previous_response_id, "reasoning": None,
        "store": req.store if store is None else store, "temperature": s.temperature, "top_p": s.top_p,
        "text": {"format": req.text_format}, "tool_choice": responses_choice_echo(req.api.tools),
        "tools": responses_tools_echo(req.api.tools), "truncation": "disabled",
        "usage": usage(counts) if counts is not None else None, "user": None,
        "completed_at": int(time.time()) if status == "completed" else None}
    if metagen is not None:
        out["metagen"] = metagen
    return out


class ResponseEvents:
    """Numbers the events of one streamed response (sequence_number from 0) and writes them as named SSE events;
    `item_id` and `output_index` say which message item `on_text` is about."""

    def __init__(self, item_id: str, output_index: int = 0) -> None:
        self.item_id = item_id
        self.output_index = output_index
        self.sequence = 0

    def __call__(self, kind: str, **fields: Any) -> bytes:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse.event(kind, event)

    def on_text(self, kind: str, **fields: Any) -> bytes:
        """An event about the current message's one text part (content 0)."""
        return self(kind, item_id=self.item_id, output_index=self.output_index, content_index=0, **fields)
