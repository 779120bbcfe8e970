"""POST /v1/responses (the Responses API: a workflow or a model file answers, streamed as the documented events;
kept for `previous_response_id` unless `store: false`), GET and DELETE /v1/responses/{id}."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve import sse
from app.serve.access import Caller
from app.serve.answer import Answer, AnswerJob, Delta, Note, start_answer
from app.serve.catalog import WorkflowModel, find_model
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, bad_param
from app.serve.jobs import ClientGoneError
from app.serve.responses_params import ResponsesRequest, parse_responses
from app.serve.responses_shapes import (
    ResponseEvents,
    failure_error,
    new_id,
    output_message,
    response_object,
    text_part,
)
from app.serve.responses_store import ResponseStore, owner_of, response_store
from app.serve.workflow_request import WARNING_HEADER
from app.service.studio import StudioService

log = logging.getLogger(__name__)


@dataclass
class _Turn:
    """One response being made: its ids, its request, its answer job and where it is kept."""

    rid: str
    item_id: str
    created_at: int
    req: ResponsesRequest
    job: AnswerJob
    conversation: list[dict[str, str]]
    store: ResponseStore | None
    owner: str

    def response(self, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return response_object(self.rid, self.req, self.job.model, created_at=self.created_at, status=status,
                               output=output, **extra)

    async def finish(self, answer: Answer) -> dict[str, Any]:
        """The final response object, stored first when asked (so the next request may continue from it)."""
        status = "incomplete" if answer.finish == "length" else "completed"
        body = self.response(status, [output_message(self.item_id, answer.text, status)], counts=answer.counts,
                             incomplete="max_output_tokens" if status == "incomplete" else None,
                             metagen=answer.metagen)
        if self.req.store and not await self._save(body, answer.text):
            body["store"] = False
        return body

    async def _save(self, body: dict[str, Any], text: str) -> bool:
        if self.store is None:
            log.warning("response %s not stored: the trace database cannot be opened", self.rid)
            return False
        conversation = [*self.conversation, {"role": "assistant", "content": text}]
        try:
            await asyncio.to_thread(self.store.save, body, conversation, self.owner)
        except Exception:
            log.exception("response %s could not be stored", self.rid)
            return False
        return True


async def _history(store: ResponseStore | None, req: ResponsesRequest, owner: str) -> list[dict[str, str]]:
    """The conversation before this request: that of `previous_response_id` (404 when it is not kept)."""
    if req.previous_response_id is None:
        return []
    stored = await asyncio.to_thread(store.get, req.previous_response_id, owner) if store is not None else None
    if stored is None:
        raise ApiError(404, f"previous response {req.previous_response_id!r} not found (it was deleted, made with "
                       "store: false or another API key, or never existed)", param="previous_response_id",
                       code="previous_response_not_found")
    return stored.conversation


def _earlier_turns_warning(job: AnswerJob, conversation: list[dict[str, str]]) -> None:
    if job.prepared is not None and len(conversation) > 1:
        note = (f"earlier turns not seen: workflow {job.model!r} takes the last user message as its input (as on "
                "/v1/chat/completions)")
        job.headers[WARNING_HEADER] = "; ".join(filter(None, [job.headers.get(WARNING_HEADER), note]))


async def create_response(request: Request, service: StudioService, config: ServeConfig, caller: Caller,
                          body: Any) -> Response:
    req = parse_responses(body)
    target = find_model(service, caller.policy, req.api.model)
    if isinstance(target, WorkflowModel) and req.api.sampling.json_schema is not None:
        raise bad_param("text.format", "a workflow answers with text: text.format json_object / json_schema works "
                        "with model files", "unsupported_parameter")
    owner, store = owner_of(request, config), response_store(service)
    conversation = [*await _history(store, req, owner), *req.input_messages]
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    req.api.messages = [*system, *conversation]
    job = await start_answer(service, config, caller, target, req.api)
    _earlier_turns_warning(job, conversation)
    turn = _Turn(new_id("resp"), new_id("msg"), int(time.time()), req, job, conversation, store, owner)
    if req.api.stream:
        return sse.EventStreamResponse(_stream(turn), on_close=job.cancel, headers=job.headers)
    answer = await job.result(request)
    return JSONResponse(await turn.finish(answer), headers=job.headers)


async def _stream(turn: _Turn) -> AsyncIterator[bytes]:
    events = ResponseEvents(turn.item_id)
    opening = turn.response("in_progress", [], metagen=turn.job.opening_metagen())
    yield events("response.created", response=opening)
    yield events("response.in_progress", response=opening)
    yield events("response.output_item.added", output_index=0, item=output_message(turn.item_id, None, "in_progress"))
    yield events.on_text("response.content_part.added", part=text_part(""))
    answer: Answer | None = None
    try:
        async for piece in turn.job.stream():
            if isinstance(piece, Delta):
                yield events.on_text("response.output_text.delta", delta=piece.text, logprobs=[])
            elif isinstance(piece, Note):
                yield sse.comment(piece.text)
            else:
                answer = piece
    except ClientGoneError:
        return
    except ApiError as exc:
        yield events("error", code=exc.code, message=exc.message, param=exc.param)
        yield events("response.failed", response=turn.response("failed", [], error=failure_error(exc)))
        return
    assert answer is not None  # the stream ends with the answer
    final = await turn.finish(answer)
    yield events.on_text("response.output_text.done", text=answer.text, logprobs=[])
    yield events.on_text("response.content_part.done", part=text_part(answer.text))
    yield events("response.output_item.done", output_index=0, item=final["output"][0])
    yield events(f"response.{final['status']}", response=final)


def _not_found(response_id: str) -> ApiError:
    return ApiError(404, f"no stored response {response_id!r} (deleted, made with store: false or another API key, "
                    "or never existed)", param="response_id", code="response_not_found")


async def get_response(request: Request, service: StudioService, config: ServeConfig) -> Response:
    response_id, store = request.path_params["response_id"], response_store(service)
    stored = await asyncio.to_thread(store.get, response_id, owner_of(request, config)) if store else None
    if stored is None:
        raise _not_found(response_id)
    return JSONResponse(stored.response)


async def delete_response(request: Request, service: StudioService, config: ServeConfig) -> Response:
    response_id, store = request.path_params["response_id"], response_store(service)
    deleted = await asyncio.to_thread(store.delete, response_id, owner_of(request, config)) if store else False
    if not deleted:
        raise _not_found(response_id)
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})
