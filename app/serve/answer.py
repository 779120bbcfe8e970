"""One answer for the single-answer doors (/v1/responses, /v1/messages): a workflow run or a model file's
completion started as /v1/chat/completions starts them (same checks, run queue, traces and share-mode rules), its
text as it is decoded, then the answer with its usage."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from starlette.requests import Request

from app.run.node_context import without_cache_hits
from app.serve import file_prompt
from app.serve.access import Caller, gate_for
from app.serve.catalog import FileModel, WorkflowModel
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, bad_param
from app.serve.failures import api_error
from app.serve.file_prompt import FilePrompt, file_prompt_for
from app.serve.jobs import Job
from app.serve.params import ApiRequest
from app.serve.plain import check_caps, generate_on_job, sampling_params
from app.serve.rerank import refuse_rank_generation
from app.serve.sse import AnswerStream
from app.serve.workflow_chat import RUN_ID_HEADER
from app.serve.workflow_request import WARNING_HEADER, PreparedRun, prepare, warning_text
from app.serve.workflow_runs import answers, metagen_field, run_choices, total_usage
from app.service.studio import StudioService
from backends.base import BackendError, CancelledError, GenerateResult, TokenCounts
from backends.tools.stream import ArgsDelta, CallEnd, CallStart, StreamEvent, TextDelta
from backends.tools.types import ToolAnswer, ToolCall, new_call_id, parse_answer_json

log = logging.getLogger(__name__)

KEEPALIVE_S = 5.0


@dataclass(frozen=True)
class Answer:
    text: str
    counts: TokenCounts
    finish: str = "stop"
    """"stop" or "length" (the token limit cut it)."""
    stop: str = ""
    """The stop string that ended it, where known (a model file's)."""
    metagen: dict[str, Any] | None = None
    """A workflow's run: the `metagen` field of /v1/chat/completions (run id, seed, outputs, stats)."""
    calls: tuple[ToolCall, ...] = ()
    """The tool calls of the answer (each with its id), in order; `text` is then the text beside them."""


# The pieces an answer streams are the tool stream's own events (backends/tools/stream.py), under the names the doors
# use: a text delta, a call's start (with the id the door gives it), its arguments' JSON text, its end.
Delta, CallOpen, CallArgs, CallClose = TextDelta, CallStart, ArgsDelta, CallEnd
Piece = StreamEvent


def whole_calls(calls: Iterable[ToolCall]) -> list[Piece]:
    """The pieces of calls known at once (a workflow's answer): each opened, its arguments whole, closed."""
    out: list[Piece] = []
    for i, call in enumerate(calls):
        out += [CallOpen(i, call.id, call.name), CallArgs(i, call.arguments_json()), CallClose(i, call)]
    return out


def tool_pieces(events: Iterable[Any], ids: dict[int, str]) -> list[Piece]:
    """The tool stream parser's events (backends.tools.stream) as the doors' pieces; `ids` keeps each call's id
    (one is made for a call the parser gave none)."""
    out: list[Piece] = []
    for event in events:
        kind = type(event).__name__
        if kind == "TextDelta":
            if event.text:
                out.append(Delta(event.text))
        elif kind == "CallStart":
            ids[event.index] = event.id or new_call_id()
            out.append(CallOpen(event.index, ids[event.index], event.name))
        elif kind == "ArgsDelta":
            if event.text:
                out.append(CallArgs(event.index, event.text))
        elif kind == "CallEnd":
            out.append(CallClose(event.index, event.call))
    return out


def with_ids(answer: ToolAnswer, ids: dict[int, str] | None = None) -> ToolAnswer:
    """The answer with an id on every call (those streamed keep the id the stream gave them)."""
    ids = ids or {}
    return ToolAnswer(answer.content, tuple(ToolCall(c.name, c.arguments, ids[i]) if i in ids else c.with_id()
                                            for i, c in enumerate(answer.calls)))


@dataclass(frozen=True)
class Note:
    """Something to show the client while the answer is not growing: a node's progress, or a keepalive."""

    text: str


KEEPALIVE = Note("keepalive")


def failure(exc: BaseException) -> ApiError:
    """What a run or engine request that failed tells the client."""
    return api_error(exc, "a served answer")


@dataclass
class AnswerJob:
    """A started answer: wait for it (`result`) or read it as it grows (`stream`); cancel on a client gone."""

    job: Job
    model: str
    prepared: PreparedRun | None = None
    """A workflow's run (None: a model file's completion)."""
    hide_cache_hits: bool = False
    trace_link: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    prompt: FilePrompt | None = None
    """A model file's prompt (its tools and their format)."""

    def warn(self, *notes: str) -> None:
        """Adds notes to the answer's x-metagen-warning header."""
        joined = warning_text([n for n in [self.headers.get(WARNING_HEADER), *notes] if n])
        if joined:
            self.headers[WARNING_HEADER] = joined

    @property
    def run_id(self) -> str | None:
        return self.prepared.run_ids[0] if self.prepared is not None else None

    def opening_metagen(self) -> dict[str, Any] | None:
        """The `metagen` field before the run ends (workflow, run id, seed), for a stream's first event."""
        return metagen_field(self.prepared, None, self.trace_link) if self.prepared is not None else None

    def cancel(self) -> None:
        self.job.cancel()

    def _finish(self, outcome: Any, streamed: ToolAnswer | None = None) -> Answer:
        """The answer of the finished job (`streamed`: the calls as the stream parser read them)."""
        if self.prepared is not None:
            text = answers(self.job, self.prepared, outcome)[0]
            tool = parse_answer_json(text)
            metagen = metagen_field(self.prepared, outcome, self.trace_link)
            if tool is not None:
                tool = with_ids(tool)
                return Answer(tool.content, total_usage(outcome), metagen=metagen, calls=tool.calls)
            return Answer(text, total_usage(outcome), metagen=metagen)
        result: GenerateResult = outcome
        usage = without_cache_hits(result.usage) if self.hide_cache_hits else result.usage
        completion = result.completions[0]
        finish = "length" if completion.finish_reason == "length" else "stop"
        stop = completion.stop if completion.finish_reason == "stop" else ""
        if self.prompt is None or self.prompt.family is None:
            return Answer(completion.text, usage, finish, stop)
        tool = streamed if streamed is not None else file_prompt.parse_answer(self.prompt, completion.text)
        return Answer(tool.content, usage, finish, stop, calls=tool.calls)

    async def result(self, request: Request) -> Answer:
        """The answer (ApiError when the run failed; ClientGoneError when the client left first)."""
        try:
            outcome = await self.job.result(request)
        except (ApiError, BackendError, CancelledError) as exc:
            raise failure(exc) from None
        return self._finish(outcome)

    async def stream(self) -> AsyncIterator[Piece | Note | Answer]:
        """The answer's pieces as they are decoded (text, and tool calls as they are read), notes between them,
        then the Answer; ApiError on failure."""
        pieces = AnswerStream() if self.prepared is not None else None
        parser = file_prompt.stream_parser(self.prompt) if self.prompt is not None else None
        ids: dict[int, str] = {}
        while True:
            event = await self.job.next_event(KEEPALIVE_S)
            if event is None:
                yield KEEPALIVE
                continue
            kind = event[0]
            if kind == "token" and event[1] == 0:
                if parser is not None:
                    for piece in tool_pieces(parser.feed(event[2]), ids):
                        yield piece
                    continue
                text = pieces.feed(event[2]) if pieces is not None else event[2]
                if text:
                    yield Delta(text)
            elif kind == "text" and pieces is not None:
                if parse_answer_json(event[2].strip()) is not None:
                    continue  # a tool-call answer: its calls come once the run ends
                rest = pieces.finish(event[2].strip())
                if rest:
                    yield Delta(rest)
            elif kind == "progress":
                yield Note(str(event[1]))
            elif kind == "error":
                raise failure(event[1])
            elif kind == "done":
                break
        streamed = None
        if parser is not None:
            for piece in tool_pieces(parser.close(), ids):
                yield piece
            streamed = with_ids(parser.answer(), ids)
        answer = self._finish(event[1], streamed)
        if pieces is not None:
            rest = pieces.finish(answer.text)
            if rest is None:
                log.warning("run %s: the streamed text is not a prefix of the answer", self.run_id)
            elif rest:
                yield Delta(rest)
            for piece in whole_calls(answer.calls):
                yield piece
        yield answer


async def start_answer(service: StudioService, config: ServeConfig, caller: Caller, target: WorkflowModel | FileModel,
                       req: ApiRequest, *, max_tokens_cap: bool = False) -> AnswerJob:
    """Starts the answer of `req` (n = 1) once the run queue admits it (ApiError 429 when the queue is full)."""
    if isinstance(target, FileModel):
        job = await _start_file(service, config, caller, target, req)
        job.warn(*req.warnings)
        return job
    prepared = prepare(service, caller, target, req, max_tokens_cap=max_tokens_cap)
    job = Job(gate_for(caller, config), f"serve-{prepared.run_ids[0]}")
    job.start(partial(run_choices, service=service, prepared=prepared, stream=req.stream))
    await job.admitted()
    return AnswerJob(job, prepared.model, prepared, trace_link=config.trace_link,
                     headers={RUN_ID_HEADER: prepared.run_ids[0], **prepared.headers()})


async def _start_file(service: StudioService, config: ServeConfig, caller: Caller, model: FileModel,
                      req: ApiRequest) -> AnswerJob:
    refuse_rank_generation(model)
    if not any(m["role"] != "system" for m in req.messages):
        raise bad_param("messages", "the conversation has no user message to answer", "missing_required_parameter")
    if req.inputs is not None:
        raise bad_param("inputs", "inputs are for workflows; a model file takes messages", "unsupported_parameter")
    prompt = await file_prompt_for(service, model, req, sampling_params(req, chat=True))
    check_caps(caller, prompt.params, 1)
    job = Job(gate_for(caller, config), f"serve-{model.name}")
    max_seconds = caller.policy.max_seconds if caller.share_rules else None
    job.start(partial(generate_on_job, backend_for=lambda: service.scheduler.provider(model.spec),
                      prompt=prompt.text, params=prompt.params, n=1, stream=req.stream, max_seconds=max_seconds))
    await job.admitted()
    answer_job = AnswerJob(job, model.name, hide_cache_hits=caller.remote or caller.share_rules, prompt=prompt)
    answer_job.warn(*prompt.warnings)
    return answer_job
