"""One answer for the single-answer doors (/v1/responses, /v1/messages): a workflow run or a model file's
completion started as /v1/chat/completions starts them (same checks, run queue, traces and share-mode rules), its
text as it is decoded, then the answer with its usage."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from starlette.requests import Request

from app.run.node_context import without_cache_hits
from app.serve.access import Caller
from app.serve.catalog import FileModel, WorkflowModel
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, bad_param
from app.serve.jobs import Job
from app.serve.params import ApiRequest
from app.serve.plain import backend_error, check_caps, generate_on_job, sampling_params
from app.serve.rerank import refuse_rank_generation
from app.serve.sse import AnswerStream
from app.serve.workflow_chat import RUN_ID_HEADER
from app.serve.workflow_request import PreparedRun, prepare
from app.serve.workflow_runs import answers, metagen_field, run_choices, total_usage
from app.service.studio import StudioService
from backends.base import BackendError, CancelledError, GenerateResult, TokenCounts

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


@dataclass(frozen=True)
class Delta:
    """A piece of the answer's text; the pieces add up to Answer.text."""

    text: str


@dataclass(frozen=True)
class Note:
    """Something to show the client while the answer is not growing: a node's progress, or a keepalive."""

    text: str


KEEPALIVE = Note("keepalive")


def failure(exc: BaseException) -> ApiError:
    """What a run or engine request that failed tells the client."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BackendError):
        return backend_error(exc)
    if isinstance(exc, CancelledError):
        return ApiError(503, f"the request was stopped: {exc}", code="request_cancelled")
    log.error("a served answer crashed", exc_info=exc)
    return ApiError(500, f"the run stopped on an unexpected error: {type(exc).__name__}: {exc}", code="server_error")


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

    @property
    def run_id(self) -> str | None:
        return self.prepared.run_ids[0] if self.prepared is not None else None

    def opening_metagen(self) -> dict[str, Any] | None:
        """The `metagen` field before the run ends (workflow, run id, seed), for a stream's first event."""
        return metagen_field(self.prepared, None, self.trace_link) if self.prepared is not None else None

    def cancel(self) -> None:
        self.job.cancel()

    def _finish(self, outcome: Any) -> Answer:
        if self.prepared is not None:
            text = answers(self.job, self.prepared, outcome)[0]
            return Answer(text, total_usage(outcome),
                          metagen=metagen_field(self.prepared, outcome, self.trace_link))
        result: GenerateResult = outcome
        usage = without_cache_hits(result.usage) if self.hide_cache_hits else result.usage
        completion = result.completions[0]
        finish = "length" if completion.finish_reason == "length" else "stop"
        return Answer(completion.text, usage, finish, completion.stop if completion.finish_reason == "stop" else "")

    async def result(self, request: Request) -> Answer:
        """The answer (ApiError when the run failed; ClientGoneError when the client left first)."""
        try:
            outcome = await self.job.result(request)
        except (ApiError, BackendError, CancelledError) as exc:
            raise failure(exc) from None
        return self._finish(outcome)

    async def stream(self) -> AsyncIterator[Delta | Note | Answer]:
        """The answer's pieces as they are decoded, notes between them, then the Answer; ApiError on failure."""
        pieces = AnswerStream() if self.prepared is not None else None
        while True:
            event = await self.job.next_event(KEEPALIVE_S)
            if event is None:
                yield KEEPALIVE
                continue
            kind = event[0]
            if kind == "token" and event[1] == 0:
                text = pieces.feed(event[2]) if pieces is not None else event[2]
                if text:
                    yield Delta(text)
            elif kind == "text" and pieces is not None:
                rest = pieces.finish(event[2].strip())
                if rest:
                    yield Delta(rest)
            elif kind == "progress":
                yield Note(str(event[1]))
            elif kind == "error":
                raise failure(event[1])
            elif kind == "done":
                break
        answer = self._finish(event[1])
        rest = pieces.finish(answer.text) if pieces is not None else ""
        if rest is None:
            log.warning("run %s: the streamed text is not a prefix of the answer", self.run_id)
        elif rest:
            yield Delta(rest)
        yield answer


async def start_answer(service: StudioService, config: ServeConfig, caller: Caller, target: WorkflowModel | FileModel,
                       req: ApiRequest, *, max_tokens_cap: bool = False) -> AnswerJob:
    """Starts the answer of `req` (n = 1) once the run queue admits it (ApiError 429 when the queue is full)."""
    if isinstance(target, FileModel):
        return await _start_file(service, config, caller, target, req)
    prepared = prepare(service, caller, target, req, max_tokens_cap=max_tokens_cap)
    job = Job(config.gate, f"serve-{prepared.run_ids[0]}")
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
    params = sampling_params(req, chat=True)
    check_caps(caller, params, 1)
    job = Job(config.gate, f"serve-{model.name}")
    max_seconds = caller.policy.max_seconds if caller.share_rules else None
    job.start(partial(generate_on_job, backend_for=lambda: service.scheduler.provider(model.spec),
                      prompt=req.messages, params=params, n=1, stream=req.stream, max_seconds=max_seconds))
    await job.admitted()
    return AnswerJob(job, model.name, hide_cache_hits=caller.remote or caller.share_rules)
