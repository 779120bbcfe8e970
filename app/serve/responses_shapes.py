"""The objects of the Responses API (openai.types.responses): the response, its output message, usage, and the
streamed events, each with its sequence number."""

from __future__ import annotations

import secrets
import time
from typing import Any

from app.serve import sse
from app.serve.errors import ApiError
from app.serve.responses_params import ResponsesRequest
from backends.base import TokenCounts

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
        "model": model, "output": output, "parallel_tool_calls": False,
        "previous_response_id": req.previous_response_id, "reasoning": None,
        "store": req.store if store is None else store, "temperature": s.temperature, "top_p": s.top_p,
        "text": {"format": req.text_format}, "tool_choice": "none", "tools": [], "truncation": "disabled",
        "usage": usage(counts) if counts is not None else None, "user": None,
        "completed_at": int(time.time()) if status == "completed" else None}
    if metagen is not None:
        out["metagen"] = metagen
    return out


class ResponseEvents:
    """Numbers the events of one streamed response (sequence_number from 0) and writes them as named SSE events."""

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        self.sequence = 0

    def __call__(self, kind: str, **fields: Any) -> bytes:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse.event(kind, event)

    def on_text(self, kind: str, **fields: Any) -> bytes:
        """An event about the message's one text part (output 0, content 0)."""
        return self(kind, item_id=self.item_id, output_index=0, content_index=0, **fields)
