"""POST /v1/messages (Anthropic's Messages API): a workflow or a model file answers the conversation (text and
tool_use blocks), whole or streamed as the documented events (message_start ... message_stop); `max_tokens` caps
each generating node of a workflow (Anthropic clients send it on every request). POST /v1/messages/count_tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve import file_prompt, sse
from app.serve.access import Caller
from app.serve.answer import KEEPALIVE, Answer, AnswerJob, CallArgs, CallOpen, Delta, Note, Piece, start_answer
from app.serve.catalog import FileModel, WorkflowModel, find_model
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, bad_param
from app.serve.jobs import ClientGoneError
from app.serve.messages_params import parse_messages
from app.serve.messages_shapes import (
    closing_events,
    error_body,
    event,
    message_object,
    new_message_id,
    text_delta,
    tool_use_id,
)
from app.serve.model_alias import default_model, resolve_model
from app.serve.plain import warning_headers
from app.serve.rerank import refuse_rank_generation
from app.service.studio import StudioService


async def create_message(request: Request, service: StudioService, config: ServeConfig, caller: Caller,
                         body: Any) -> Response:
    req = parse_messages(body)
    target = resolve_model(service, caller.policy, config, req)
    if isinstance(target, WorkflowModel) and req.sampling.json_schema is not None:
        raise bad_param("output_config.format", "a workflow answers with text: output_config.format works with "
                        "model files", "unsupported_parameter")
    job = await start_answer(service, config, caller, target, req, max_tokens_cap=True)
    mid = new_message_id()
    if req.stream:
        return sse.EventStreamResponse(_stream(job, mid, lazy_text=req.tools.active), on_close=job.cancel,
                                       headers=job.headers)
    answer = await job.result(request)
    return JSONResponse(message_object(mid, job.model, answer), headers=job.headers)


async def count_tokens(request: Request, service: StudioService, config: ServeConfig, caller: Caller,
                       body: Any) -> Response:
    """POST /v1/messages/count_tokens: the prompt's tokens as the model would see it (its chat template, its tools,
    its tokenizer); a workflow's counted with the default model's tokenizer."""
    req = parse_messages(body, counting=True)
    target = resolve_model(service, caller.policy, config, req)
    if isinstance(target, WorkflowModel):
        target = find_model(service, caller.policy, default_model(config), config.auto)
        if not isinstance(target, FileModel):
            raise ApiError(400, f"{req.model!r} is a workflow and the default model is too: count_tokens counts with "
                           "a model file's tokenizer", param="model", code="model_not_supported")
        req.warnings.append(f"counted with {target.name!r}: a workflow has no one tokenizer")
    refuse_rank_generation(target)
    model = target
    backend = await asyncio.to_thread(service.scheduler.provider, model.spec)
    n = await asyncio.to_thread(file_prompt.count, backend, model.spec, req.messages, req.tools)
    return JSONResponse({"input_tokens": n}, headers=warning_headers(req.warnings))


class _Blocks:
    """The content blocks of a streamed message as they are made: text opened when it comes (at once on a request
    without tools), a tool_use block per call."""

    def __init__(self) -> None:
        self.count = 0
        self.open: int | None = None
        self.is_text = False

    def start(self, block: dict[str, Any]) -> list[bytes]:
        out = self.stop()
        self.open, self.is_text = self.count, block["type"] == "text"
        self.count += 1
        return [*out, event("content_block_start", index=self.open, content_block=block)]

    def stop(self) -> list[bytes]:
        if self.open is None:
            return []
        index, self.open = self.open, None
        return [event("content_block_stop", index=index)]

    def on(self, piece: Piece) -> list[bytes]:
        if isinstance(piece, Delta):
            out = [] if self.open is not None and self.is_text else self.start({"type": "text", "text": ""})
            return [*out, text_delta(piece.text, self.open or 0)]
        if isinstance(piece, CallOpen):
            return self.start({"type": "tool_use", "id": tool_use_id(piece.id), "name": piece.name, "input": {}})
        if isinstance(piece, CallArgs):
            return [event("content_block_delta", index=self.open,
                          delta={"type": "input_json_delta", "partial_json": piece.text})]
        return self.stop()


async def _stream(job: AnswerJob, mid: str, *, lazy_text: bool = False) -> AsyncIterator[bytes]:
    yield event("message_start", message=message_object(mid, job.model, None, job.opening_metagen()))
    blocks = _Blocks()
    if not lazy_text:
        for chunk in blocks.start({"type": "text", "text": ""}):
            yield chunk
    answer: Answer | None = None
    try:
        async for piece in job.stream():
            if isinstance(piece, Note):
                yield event("ping") if piece == KEEPALIVE else sse.comment(piece.text)
            elif isinstance(piece, Answer):
                answer = piece
            else:
                for chunk in blocks.on(piece):
                    yield chunk
    except ClientGoneError:
        return
    except ApiError as exc:
        yield sse.event("error", error_body(exc))
        return
    assert answer is not None  # the stream ends with the answer
    if blocks.count == 0:
        for chunk in blocks.start({"type": "text", "text": ""}):
            yield chunk
    for chunk in closing_events(answer, blocks.open):
        yield chunk
