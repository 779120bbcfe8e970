"""POST /v1/messages (Anthropic's Messages API): a workflow or a model file answers the conversation, whole or
streamed as the documented events (message_start ... message_stop); `max_tokens` caps each generating node of a
workflow (Anthropic clients send it on every request)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve import sse
from app.serve.access import Caller
from app.serve.answer import KEEPALIVE, Answer, AnswerJob, Delta, Note, start_answer
from app.serve.catalog import WorkflowModel, find_model
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
)
from app.service.studio import StudioService


async def create_message(request: Request, service: StudioService, config: ServeConfig, caller: Caller,
                         body: Any) -> Response:
    req = parse_messages(body)
    target = find_model(service, caller.policy, req.model)
    if isinstance(target, WorkflowModel) and req.sampling.json_schema is not None:
        raise bad_param("output_config.format", "a workflow answers with text: output_config.format works with "
                        "model files", "unsupported_parameter")
    job = await start_answer(service, config, caller, target, req, max_tokens_cap=True)
    mid = new_message_id()
    if req.stream:
        return sse.EventStreamResponse(_stream(job, mid), on_close=job.cancel, headers=job.headers)
    answer = await job.result(request)
    return JSONResponse(message_object(mid, job.model, answer), headers=job.headers)


async def _stream(job: AnswerJob, mid: str) -> AsyncIterator[bytes]:
    yield event("message_start", message=message_object(mid, job.model, None, job.opening_metagen()))
    yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
    answer: Answer | None = None
    try:
        async for piece in job.stream():
            if isinstance(piece, Delta):
                yield text_delta(piece.text)
            elif isinstance(piece, Note):
                yield event("ping") if piece == KEEPALIVE else sse.comment(piece.text)
            else:
                answer = piece
    except ClientGoneError:
        return
    except ApiError as exc:
        yield sse.event("error", error_body(exc))
        return
    assert answer is not None  # the stream ends with the answer
    for chunk in closing_events(answer):
        yield chunk
