"""The objects of Anthropic's Messages API (anthropic.types): the message, its usage and stop reason, the streamed
events, and errors in Anthropic's shape `{"type": "error", "error": {"type", "message"}}`."""

from __future__ import annotations

import secrets
from typing import Any

from starlette.responses import JSONResponse

from app.serve import sse
from app.serve.answer import Answer
from app.serve.errors import ApiError
from app.serve.file_prompt import ContextTooLongError
from backends.base import TokenCounts
from backends.tools.types import ToolCall

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 405: "invalid_request_error", 413: "invalid_request_error",
               429: "rate_limit_error", 503: "overloaded_error"}
"""Anthropic's error type for each status (anything else: api_error)."""


def new_message_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


def error_body(exc: ApiError) -> dict[str, Any]:
    """The error in Anthropic's shape; our code and the field at fault ride along (`code`, `param`)."""
    message = exc.anthropic_message if isinstance(exc, ContextTooLongError) else exc.message
    error: dict[str, Any] = {"type": ERROR_TYPES.get(exc.status, "api_error"), "message": message}
    error.update({k: v for k, v in (("code", exc.code), ("param", exc.param)) if v is not None})
    return {"type": "error", "error": error}


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=exc.status, headers=exc.headers)


def usage(counts: TokenCounts | None) -> dict[str, Any]:
    """Anthropic counts prompt tokens read from the cache apart from input_tokens."""
    if counts is None:
        return {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0}
    return {"input_tokens": counts.prompt_tokens - counts.prompt_tokens_cached,
            "output_tokens": counts.completion_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": counts.prompt_tokens_cached}


def stop_reason(answer: Answer) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) of an answer."""
    if answer.calls:
        return "tool_use", None
    if answer.finish == "length":
        return "max_tokens", None
    if answer.stop:
        return "stop_sequence", answer.stop
    return "end_turn", None


def message_object(mid: str, model: str, answer: Answer | None,
                   metagen: dict[str, Any] | None = None) -> dict[str, Any]:
    """The message (`answer` None: the opening of a stream, no content or stop reason yet)."""
    reason, sequence = stop_reason(answer) if answer is not None else (None, None)
    out: dict[str, Any] = {
        "id": mid, "type": "message", "role": "assistant", "model": model,
        "content": content_blocks(answer) if answer is not None else [],
        "stop_reason": reason, "stop_sequence": sequence, "usage": usage(answer.counts if answer else None)}
    metagen = answer.metagen if answer is not None else metagen
    if metagen is not None:
        out["metagen"] = metagen
    return out


def new_tool_use_id() -> str:
    return f"toolu_{secrets.token_hex(12)}"


def tool_use_id(call_id: str) -> str:
    """A call's id in Anthropic's spelling (`toolu_...`)."""
    return call_id if call_id.startswith("toolu_") else f"toolu_{call_id.removeprefix('call_')}" if call_id \
        else new_tool_use_id()


def tool_use_block(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id(call.id), "name": call.name, "input": dict(call.arguments)}


def content_blocks(answer: Answer) -> list[dict[str, Any]]:
    """A whole answer's blocks: its text (left out when it has calls and no text), then a tool_use per call."""
    text = [{"type": "text", "text": answer.text}] if answer.text or not answer.calls else []
    return text + [tool_use_block(call) for call in answer.calls]


def event(kind: str, **fields: Any) -> bytes:
    return sse.event(kind, {"type": kind, **fields})


def text_delta(text: str, index: int = 0) -> bytes:
    return event("content_block_delta", index=index, delta={"type": "text_delta", "text": text})


def closing_events(answer: Answer, index: int | None = 0) -> list[bytes]:
    """After the last delta: the open block's end (`index`; None: none open), the stop reason with the final
    usage, the message's end."""
    reason, sequence = stop_reason(answer)
    extra = {"metagen": answer.metagen} if answer.metagen is not None else {}
    return [*([event("content_block_stop", index=index)] if index is not None else []),
            event("message_delta", delta={"stop_reason": reason, "stop_sequence": sequence},
                  usage=usage(answer.counts), **extra),
            event("message_stop")]
