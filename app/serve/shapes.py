"""The response objects of the OpenAI API: chat completions and their chunks, text completions, usage."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from backends.base import Completion, TokenCounts
from backends.tools.types import ToolCall

FINISH = {"stop": "stop", "eog": "stop", "length": "length", "cancelled": "stop"}


def now() -> int:
    return int(time.time())


def finish_reason(completion: Completion) -> str:
    return FINISH.get(completion.finish_reason, "stop")


def usage(counts: TokenCounts) -> dict[str, Any]:
    return {"prompt_tokens": counts.prompt_tokens, "completion_tokens": counts.completion_tokens,
            "total_tokens": counts.prompt_tokens + counts.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": counts.prompt_tokens_cached},
            "completion_tokens_details": {"reasoning_tokens": counts.thinking_tokens, **prediction_tokens(counts)}}


def prediction_tokens(counts: TokenCounts) -> dict[str, int]:
    """Speculative decoding's accepted and rejected draft tokens, in OpenAI's predicted-output fields (only for
    counts that carry them: a request's Usage on a model with `speculative:`)."""
    drafted = getattr(counts, "draft_tokens", 0)
    if not drafted:
        return {}
    accepted = getattr(counts, "draft_accepted", 0)
    return {"accepted_prediction_tokens": accepted, "rejected_prediction_tokens": drafted - accepted}


def chat_choice(index: int, text: str | None, finish: str = "stop", logprobs: Any = None,
                calls: Sequence[ToolCall] = ()) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments_json()}} for c in calls]
    return {"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish}


def call_delta(index: int, call_id: str | None = None, name: str | None = None,
               arguments: str = "") -> dict[str, Any]:
    """One entry of a chunk's `delta.tool_calls`: the first of a call has its id, type and name (arguments ""),
    the next ones pieces of its arguments."""
    if call_id is None:
        return {"index": index, "function": {"arguments": arguments}}
    return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_completion(cid: str, model: str, created: int, choices: list[dict[str, Any]], counts: TokenCounts,
                    **extra: Any) -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion", "created": created, "model": model, "choices": choices,
            "usage": usage(counts), "system_fingerprint": None, **extra}


def chat_chunk(cid: str, model: str, created: int, choices: list[dict[str, Any]], *,
               include_usage: bool = False, counts: TokenCounts | None = None, **extra: Any) -> dict[str, Any]:
    out = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
           "system_fingerprint": None, "choices": choices, **extra}
    if include_usage:
        out["usage"] = usage(counts) if counts is not None else None
    return out


def delta(index: int, content: str | None = None, *, role: bool = False, finish: str | None = None,
          tool_call: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if role:
        d["role"] = "assistant"
    if content is not None:
        d["content"] = content
    if tool_call is not None:
        d["tool_calls"] = [tool_call]
    return {"index": index, "delta": d, "logprobs": None, "finish_reason": finish}


def text_choice(index: int, text: str, finish: str | None = "stop", logprobs: Any = None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}


def text_completion(cid: str, model: str, created: int, choices: list[dict[str, Any]],
                    counts: TokenCounts | None = None, *, include_usage: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"id": cid, "object": "text_completion", "created": created, "model": model,
                           "system_fingerprint": None, "choices": choices}
    if include_usage:
        out["usage"] = usage(counts) if counts is not None else None
    return out


def chat_logprobs(completion: Completion) -> dict[str, Any] | None:
    if completion.logprobs is None:
        return None

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}

    return {"content": [{**entry(lp.token, lp.logprob), "top_logprobs": [entry(t, v) for t, v in lp.top]}
                        for lp in completion.logprobs], "refusal": None}


def text_logprobs(completion: Completion) -> dict[str, Any] | None:
    if completion.logprobs is None:
        return None
    offsets, at = [], 0
    for lp in completion.logprobs:
        offsets.append(at)
        at += len(lp.token)
    return {"tokens": [lp.token for lp in completion.logprobs],
            "token_logprobs": [lp.logprob for lp in completion.logprobs],
            "top_logprobs": [dict(lp.top) for lp in completion.logprobs],
            "text_offset": offsets}
