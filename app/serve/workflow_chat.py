"""/v1/chat/completions with a workflow as the model: the answer of each run as a chat completion, or streamed
as chunks (the graded node's tokens as they are decoded, earlier nodes' progress as SSE comments)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve import shapes, sse
from app.serve.access import Caller, gate_for
from app.serve.catalog import WorkflowModel
from app.serve.config import ServeConfig
from app.serve.errors import ApiError
from app.serve.jobs import ClientGoneError, Job
from app.serve.params import ApiRequest
from app.serve.sse import AnswerStream
from app.serve.workflow_request import PreparedRun, prepare
from app.serve.workflow_runs import answers, metagen_field, run_choices, total_usage
from app.service.studio import StudioService
from backends.tools.types import ToolAnswer, parse_answer_json

log = logging.getLogger(__name__)

KEEPALIVE_S = 5.0
RUN_ID_HEADER = "x-metagen-run-id"


async def workflow_chat(request: Request, service: StudioService, config: ServeConfig, caller: Caller,
                        model: WorkflowModel, req: ApiRequest) -> Response:
    prepared = prepare(service, caller, model, req)
    job = Job(gate_for(caller, config), f"serve-{prepared.run_ids[0]}")
    job.start(partial(run_choices, service=service, prepared=prepared, stream=req.stream))
    await job.admitted()
    headers = {RUN_ID_HEADER: ",".join(prepared.run_ids), **prepared.headers()}
    cid, created = f"chatcmpl-{prepared.run_ids[0]}", shapes.now()
    if req.stream:
        body = _stream(job, prepared, req, cid, created, config.trace_link)
        return sse.EventStreamResponse(body, on_close=job.cancel, headers=headers)
    results = await job.result(request)
    texts = answers(job, prepared, results)
    return JSONResponse(shapes.chat_completion(
        cid, prepared.model, created, [_choice(i, t) for i, t in enumerate(texts)], total_usage(results),
        metagen=metagen_field(prepared, results, config.trace_link)), headers=headers)


def tool_answer(text: str) -> ToolAnswer | None:
    """A workflow's tool-call answer (each call with an id), or None for a text answer."""
    answer = parse_answer_json(text)
    return None if answer is None else ToolAnswer(answer.content, tuple(c.with_id() for c in answer.calls))


def _choice(index: int, text: str) -> dict[str, Any]:
    tool = tool_answer(text)
    if tool is None:
        return shapes.chat_choice(index, text)
    if not tool.calls:
        return shapes.chat_choice(index, tool.content)
    return shapes.chat_choice(index, tool.content or None, "tool_calls", calls=tool.calls)


async def _stream(job: Job, prepared: PreparedRun, req: ApiRequest, cid: str, created: int,
                  trace_link: bool) -> AsyncIterator[bytes]:
    def chunk(choices: list[dict[str, object]], **extra: object) -> bytes:
        return sse.data(shapes.chat_chunk(cid, prepared.model, created, choices, include_usage=req.include_usage,
                                          **extra))

    n = len(prepared.seeds)
    streams = [AnswerStream() for _ in range(n)]
    yield chunk([shapes.delta(i, "", role=True) for i in range(n)], metagen=metagen_field(prepared, None, trace_link))
    while True:
        event = await job.next_event(KEEPALIVE_S)
        if event is None:
            yield sse.comment("keepalive")
            continue
        kind = event[0]
        if kind == "token":
            piece = streams[event[1]].feed(event[2])
            if piece:
                yield chunk([shapes.delta(event[1], piece)])
        elif kind == "text":
            if parse_answer_json(event[2].strip()) is not None:
                continue  # a tool-call answer: its calls come once the run ends
            rest = streams[event[1]].finish(event[2].strip())
            if rest:
                yield chunk([shapes.delta(event[1], rest)])
        elif kind == "progress":
            yield sse.comment(f"progress {event[1]}")
        elif kind == "error":
            yield sse.data(_error_body(event[1]))
            yield sse.DONE
            return
        elif kind == "done":
            break
    results = event[1]
    try:
        texts = answers(job, prepared, results)
    except ClientGoneError:
        return
    except ApiError as exc:
        yield sse.data(exc.body())
        yield sse.DONE
        return
    finishes = []
    for i, text in enumerate(texts):
        tool = tool_answer(text)
        rest = streams[i].finish(tool.content if tool is not None else text)
        if rest is None:
            log.warning("run %s: the streamed text is not a prefix of the answer", prepared.run_ids[i])
        elif rest:
            yield chunk([shapes.delta(i, rest)])
        for k, call in enumerate(tool.calls if tool is not None else ()):
            yield chunk([shapes.delta(i, tool_call=shapes.call_delta(k, call.id, call.name))])
            yield chunk([shapes.delta(i, tool_call=shapes.call_delta(k, arguments=call.arguments_json()))])
        finishes.append("tool_calls" if tool is not None and tool.calls else "stop")
    yield chunk([shapes.delta(i, finish=finishes[i]) for i in range(n)],
                metagen=metagen_field(prepared, results, trace_link))
    if req.include_usage:
        yield sse.data(shapes.chat_chunk(cid, prepared.model, created, [], include_usage=True,
                                         counts=total_usage(results)))
    yield sse.DONE


def _error_body(exc: BaseException) -> dict[str, object]:
    if isinstance(exc, ApiError):
        return exc.body()
    log.error("a served run crashed", exc_info=exc)
    return ApiError(500, f"the run stopped on an unexpected error: {type(exc).__name__}: {exc}",
                    code="server_error").body()
