"""POST /v1/responses (the Responses API: a workflow or a model file answers, streamed as the documented events;
kept for `previous_response_id` unless `store: false`), GET and DELETE /v1/responses/{id}."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve import sse
from app.serve.access import Caller
from app.serve.answer import Answer, AnswerJob, CallArgs, CallOpen, Delta, Note, Piece, start_answer
from app.serve.catalog import WorkflowModel
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, bad_param
from app.serve.jobs import ClientGoneError
from app.serve.model_alias import resolve_model
from app.serve.responses_params import ResponsesRequest, parse_responses
from app.serve.responses_shapes import (
    ResponseEvents,
    answer_output,
    failure_error,
    function_call_item,
    new_id,
    output_message,
    response_object,
    text_part,
)
from app.serve.responses_store import ResponseStore, owner_of, response_store
from app.serve.workflow_request import MESSAGES_INPUT
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
    conversation: list[dict[str, Any]]
    store: ResponseStore | None
    owner: str

    def response(self, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return response_object(self.rid, self.req, self.job.model, created_at=self.created_at, status=status,
                               output=output, **extra)

    async def finish(self, answer: Answer, output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The final response object (`output`: the items as streamed), stored first when asked (so the next
        request may continue from it)."""
        status = "incomplete" if answer.finish == "length" and not answer.calls else "completed"
        if output is None:
            output = answer_output(self.item_id, answer.text, answer.calls, status)
        body = self.response(status, output, counts=answer.counts,
                             incomplete="max_output_tokens" if status == "incomplete" else None,
                             metagen=answer.metagen)
        if self.req.store and not await self._save(body, answer):
            body["store"] = False
        return body

    async def _save(self, body: dict[str, Any], answer: Answer) -> bool:
        if self.store is None:
            log.warning("response %s not stored: the trace database cannot be opened", self.rid)
            return False
        reply: dict[str, Any] = {"role": "assistant", "content": answer.text}
        if answer.calls:
            reply["tool_calls"] = [{"id": c.id, "type": "function",
                                    "function": {"name": c.name, "arguments": c.arguments_json()}}
                                   for c in answer.calls]
        conversation = [*self.conversation, reply]
        try:
            await asyncio.to_thread(self.store.save, body, conversation, self.owner)
        except Exception:
            log.exception("response %s could not be stored", self.rid)
            return False
        return True


async def _history(store: ResponseStore | None, req: ResponsesRequest, owner: str) -> list[dict[str, Any]]:
    """The conversation before this request: that of `previous_response_id` (404 when it is not kept)."""
    if req.previous_response_id is None:
        return []
    stored = await asyncio.to_thread(store.get, req.previous_response_id, owner) if store is not None else None
    if stored is None:
        raise ApiError(404, f"previous response {req.previous_response_id!r} not found (it was deleted, made with "
                       "store: false or another API key, or never existed)", param="previous_response_id",
                       code="previous_response_not_found")
    return stored.conversation


def _earlier_turns_warning(job: AnswerJob, conversation: list[dict[str, Any]]) -> None:
    if job.prepared is not None and len(conversation) > 1 and MESSAGES_INPUT not in job.prepared.values:
        note = (f"earlier turns not seen: workflow {job.model!r} takes the last user message as its input (as on "
                "/v1/chat/completions)")
        job.warn(note)


async def create_response(request: Request, service: StudioService, config: ServeConfig, caller: Caller,
                          body: Any) -> Response:
    req = parse_responses(body)
    target = resolve_model(service, caller.policy, config, req.api)
    if isinstance(target, WorkflowModel) and req.api.sampling.json_schema is not None:
        raise bad_param("text.format", "a workflow answers with text: text.format json_object / json_schema works "
                        "with model files", "unsupported_parameter")
    owner, store = owner_of(request, config), response_store(service, config)
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


class _Output:
    """The output items of a streamed response as they are made: messages opened when text comes (at once on a
    request without tools, as before any tool support), function calls as the model writes them."""

    def __init__(self, turn: _Turn) -> None:
        self.turn = turn
        self.events = ResponseEvents(turn.item_id)
        self.items: list[dict[str, Any]] = []
        self.text: str | None = None
        """The open message's text so far (None: no message open)."""
        self.calls: dict[int, dict[str, Any]] = {}

    def open_message(self) -> list[bytes]:
        item_id = self.turn.item_id if not self.items else new_id("msg")
        self.events.item_id, self.events.output_index, self.text = item_id, len(self.items), ""
        self.items.append(output_message(item_id, None, "in_progress"))
        return [self.events("response.output_item.added", output_index=self.events.output_index,
                            item=self.items[-1]),
                self.events.on_text("response.content_part.added", part=text_part(""))]

    def close_message(self, status: str = "completed") -> list[bytes]:
        if self.text is None:
            return []
        text, self.text = self.text, None
        item = self.items[self.events.output_index] = output_message(self.events.item_id, text, status)
        return [self.events.on_text("response.output_text.done", text=text, logprobs=[]),
                self.events.on_text("response.content_part.done", part=text_part(text)),
                self.events("response.output_item.done", output_index=self.events.output_index, item=item)]

    def on(self, piece: Piece) -> list[bytes]:
        if isinstance(piece, Delta):
            out = self.open_message() if self.text is None else []
            self.text = (self.text or "") + piece.text
            return [*out, self.events.on_text("response.output_text.delta", delta=piece.text, logprobs=[])]
        out = self.close_message()
        if isinstance(piece, CallOpen):
            item = function_call_item(new_id("fc"), None, "in_progress", call_id=piece.id, name=piece.name)
            self.calls[piece.index] = {"at": len(self.items), "args": ""}
            self.items.append(item)
            return [*out, self.events("response.output_item.added", output_index=len(self.items) - 1, item=item)]
        slot = self.calls[piece.index]
        item_id = self.items[slot["at"]]["id"]
        if isinstance(piece, CallArgs):
            slot["args"] += piece.text
            return [*out, self.events("response.function_call_arguments.delta", item_id=item_id,
                                      output_index=slot["at"], delta=piece.text)]
        opened = self.items[slot["at"]]["call_id"]  # the id the client saw first stays the call's id
        done = self.items[slot["at"]] = {**function_call_item(item_id, piece.call), "call_id": opened,
                                         "arguments": _same_json(slot["args"], piece.call.arguments_json())}
        return [*out, self.events("response.function_call_arguments.done", item_id=item_id, output_index=slot["at"],
                                  name=done["name"], arguments=done["arguments"]),
                self.events("response.output_item.done", output_index=slot["at"], item=done)]


def _same_json(streamed: str, whole: str) -> str:
    """The arguments as streamed when they read as the call's (the deltas add up to `.done`), else the call's."""
    try:
        return streamed if json.loads(streamed) == json.loads(whole) else whole
    except ValueError:
        return whole


async def _stream(turn: _Turn) -> AsyncIterator[bytes]:
    output = _Output(turn)
    events = output.events
    opening = turn.response("in_progress", [], metagen=turn.job.opening_metagen())
    yield events("response.created", response=opening)
    yield events("response.in_progress", response=opening)
    if not turn.req.api.tools.active:
        for chunk in output.open_message():
            yield chunk
    answer: Answer | None = None
    try:
        async for piece in turn.job.stream():
            if isinstance(piece, Note):
                yield sse.comment(piece.text)
            elif isinstance(piece, Answer):
                answer = piece
            else:
                for chunk in output.on(piece):
                    yield chunk
    except ClientGoneError:
        return
    except ApiError as exc:
        yield events("error", code=exc.code, message=exc.message, param=exc.param)
        yield events("response.failed", response=turn.response("failed", [], error=failure_error(exc)))
        return
    assert answer is not None  # the stream ends with the answer
    if not output.items:
        for chunk in output.open_message():
            yield chunk
    status = "incomplete" if answer.finish == "length" and not answer.calls else "completed"
    for chunk in output.close_message(status):
        yield chunk
    final = await turn.finish(answer, output.items)
    yield events(f"response.{final['status']}", response=final)


def _not_found(response_id: str) -> ApiError:
    return ApiError(404, f"no stored response {response_id!r} (deleted, made with store: false or another API key, "
                    "or never existed)", param="response_id", code="response_not_found")


async def get_response(request: Request, service: StudioService, config: ServeConfig) -> Response:
    response_id, store = request.path_params["response_id"], response_store(service, config)
    stored = await asyncio.to_thread(store.get, response_id, owner_of(request, config)) if store else None
    if stored is None:
        raise _not_found(response_id)
    return JSONResponse(stored.response)


async def delete_response(request: Request, service: StudioService, config: ServeConfig) -> Response:
    response_id, store = request.path_params["response_id"], response_store(service, config)
    deleted = await asyncio.to_thread(store.delete, response_id, owner_of(request, config)) if store else False
    if not deleted:
        raise _not_found(response_id)
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})
