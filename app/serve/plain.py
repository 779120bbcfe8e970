"""/v1/chat/completions and /v1/completions with a model file as the model: answered straight from the engine
(n samples over one prompt evaluation, logprobs, stop strings, seeds, JSON-schema grammars)."""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.run.node_context import without_cache_hits
from app.serve import shapes, sse
from app.serve.access import Caller, gate_for
from app.serve.catalog import FileModel
from app.serve.config import ServeConfig
from app.serve.errors import ApiError, bad_param
from app.serve.failures import backend_error
from app.serve.file_prompt import FilePrompt, file_prompt_for, parse_answer, stream_parser
from app.serve.jobs import Job
from app.serve.params import ApiRequest
from app.serve.workflow_request import WARNING_HEADER, warning_text
from app.service.studio import StudioService
from backends.base import BackendError, GenerateResult, LLMBackend, Prompt, SamplingParams
from backends.tools.types import new_call_id

DEFAULT_CHAT_MAX_TOKENS = 1024
DEFAULT_COMPLETION_MAX_TOKENS = 16
"""OpenAI's default for /v1/completions."""
KEEPALIVE_S = 5.0


def sampling_params(req: ApiRequest, chat: bool) -> SamplingParams:
    s = req.sampling
    default = DEFAULT_CHAT_MAX_TOKENS if chat else DEFAULT_COMPLETION_MAX_TOKENS
    return SamplingParams(
        max_tokens=s.max_tokens or default,
        temperature=1.0 if s.temperature is None else s.temperature,
        top_p=1.0 if s.top_p is None else s.top_p,
        stop=s.stop,
        seed=s.seed if s.seed is not None else secrets.randbelow(2**31),
        json_schema=s.json_schema,
        logprobs=s.logprobs,
    )


def check_caps(caller: Caller, params: SamplingParams, n: int) -> None:
    cap = caller.policy.max_tokens if caller.share_rules else None
    if cap is not None and n * params.max_tokens > cap:
        raise bad_param("max_tokens", f"n × max_tokens = {n * params.max_tokens} is more than this server's "
                        f"per-request cap of {cap} tokens; lower max_tokens or n")


def generate_on_job(job: Job, backend_for: Callable[[], LLMBackend], prompt: Prompt, params: SamplingParams, n: int,
              stream: bool, max_seconds: float | None) -> GenerateResult:
    """Runs on the job's thread: one engine request for the n samples."""
    cancel = job.token()
    timer = None
    if max_seconds is not None:
        reason = f"stopped at this server's cap of {max_seconds:g} s"
        timer = threading.Timer(max_seconds, cancel.cancel, args=(reason,))
        timer.daemon = True
        timer.start()
    try:
        on_token = (lambda i, text: job.post("token", i, text)) if stream else None
        return backend_for().generate(prompt, params, n=n, on_token=on_token, cancel=cancel)
    finally:
        if timer is not None:
            timer.cancel()


async def plain_completion(request: Request, service: StudioService, config: ServeConfig, caller: Caller,
                           model: FileModel, req: ApiRequest, chat: bool) -> Response:
    if chat and not req.messages:
        raise bad_param("messages", "messages must hold at least one message", "missing_required_parameter")
    if req.inputs is not None:
        raise bad_param("inputs", "inputs are for workflows; a model file takes messages or a prompt",
                        "unsupported_parameter")
    params = sampling_params(req, chat)
    n = req.sampling.n
    prompt: Prompt = req.prompt or ""
    fitted: FilePrompt | None = None
    if chat:
        fitted = await file_prompt_for(service, model, req, params)
        prompt, params = fitted.text, fitted.params
    check_caps(caller, params, n)
    job = Job(gate_for(caller, config), f"serve-{model.name}")
    max_seconds = caller.policy.max_seconds if caller.share_rules else None
    job.start(partial(generate_on_job, backend_for=lambda: service.scheduler.provider(model.spec), prompt=prompt,
                      params=params, n=n, stream=req.stream, max_seconds=max_seconds))
    await job.admitted()
    headers = warning_headers([*req.warnings, *(fitted.warnings if fitted is not None else ())])
    cid, created = (f"chatcmpl-{uuid.uuid4().hex[:24]}" if chat else f"cmpl-{uuid.uuid4().hex[:24]}"), shapes.now()
    if req.stream:
        return sse.EventStreamResponse(_stream(job, model.name, req, cid, created, chat,
                                               hide_cache_hits=caller.remote or caller.share_rules, prompt=fitted),
                                       on_close=job.cancel, headers=headers)
    result: GenerateResult = await job.result(request)
    if caller.remote or caller.share_rules:  # the prefix cache is shared: a hit would reveal another's prompt
        result = replace(result, usage=without_cache_hits(result.usage))
    if chat:
        choices = []
        for i, c in enumerate(result.completions):
            tool = parse_answer(fitted, c.text) if fitted is not None else None
            if tool is not None and tool.calls:
                choices.append(shapes.chat_choice(i, tool.content or None, "tool_calls", shapes.chat_logprobs(c),
                                                  calls=tool.calls))
            else:
                choices.append(shapes.chat_choice(i, tool.content if tool is not None else c.text,
                                                  shapes.finish_reason(c), shapes.chat_logprobs(c)))
        return JSONResponse(shapes.chat_completion(cid, model.name, created, choices, result.usage), headers=headers)
    choices = [shapes.text_choice(i, c.text, shapes.finish_reason(c), shapes.text_logprobs(c))
               for i, c in enumerate(result.completions)]
    return JSONResponse(shapes.text_completion(cid, model.name, created, choices, result.usage), headers=headers)


async def _stream(job: Job, model: str, req: ApiRequest, cid: str, created: int, chat: bool, *,
                  hide_cache_hits: bool = False, prompt: FilePrompt | None = None) -> AsyncIterator[bytes]:
    n = req.sampling.n
    parsers = [stream_parser(prompt) for _ in range(n)] if prompt is not None and prompt.family else None
    calls: list[dict[int, Any]] = [{} for _ in range(n)]
    """Each choice's calls as streamed (index -> the call's id, name)."""

    def chunk(choices: list[dict[str, Any]]) -> bytes:
        if chat:
            return sse.data(shapes.chat_chunk(cid, model, created, choices, include_usage=req.include_usage))
        return sse.data(shapes.text_completion(cid, model, created, choices, include_usage=req.include_usage))

    def piece(i: int, text: str | None = None, finish: str | None = None, role: bool = False) -> dict[str, Any]:
        return shapes.delta(i, text, role=role, finish=finish) if chat else shapes.text_choice(i, text or "", finish)

    if chat:
        yield chunk([piece(i, "", role=True) for i in range(n)])
    while True:
        event = await job.next_event(KEEPALIVE_S)
        if event is None:
            yield sse.comment("keepalive")
            continue
        if event[0] == "token" and parsers is not None:
            for out in tool_chunks(event[1], parsers[event[1]].feed(event[2]), calls[event[1]]):
                yield chunk([out])
        elif event[0] == "token":
            yield chunk([piece(event[1], event[2])])
        elif event[0] == "progress":
            yield sse.comment(f"progress {event[1]}")
        elif event[0] == "error":
            exc = event[1]
            error = backend_error(exc) if isinstance(exc, BackendError) else exc if isinstance(exc, ApiError) else \
                ApiError(500, f"the request stopped on an unexpected error: {type(exc).__name__}: {exc}",
                         code="server_error")
            yield sse.data(error.body())
            yield sse.DONE
            return
        elif event[0] == "done":
            break
    result: GenerateResult = event[1]
    if parsers is not None:
        for i, parser in enumerate(parsers):
            for out in tool_chunks(i, parser.close(), calls[i]):
                yield chunk([out])
    yield chunk([piece(i, None if chat else "", "tool_calls" if calls[i] else shapes.finish_reason(c))
                 for i, c in enumerate(result.completions)])
    if req.include_usage:
        usage = shapes.usage(without_cache_hits(result.usage) if hide_cache_hits else result.usage)
        body = shapes.chat_chunk(cid, model, created, []) if chat else \
            shapes.text_completion(cid, model, created, [], include_usage=False)
        yield sse.data({**body, "usage": usage})
    yield sse.DONE


def warning_headers(warnings: list[str]) -> dict[str, str]:
    """The x-metagen-warning header of an answer (none without warnings)."""
    return {WARNING_HEADER: warning_text(warnings)} if warnings else {}


def tool_chunks(index: int, events: list[Any], calls: dict[int, Any]) -> list[dict[str, Any]]:
    """The tool stream parser's events as chat chunk choices: text as `content`, a call's start as
    `tool_calls[i]` with its id, type and name (arguments ""), then its arguments in pieces."""
    out = []
    for event in events:
        kind = type(event).__name__
        if kind == "TextDelta" and event.text:
            out.append(shapes.delta(index, event.text))
        elif kind == "CallStart":
            calls[event.index] = event.id or new_call_id()
            out.append(shapes.delta(index, tool_call=shapes.call_delta(event.index, calls[event.index], event.name)))
        elif kind == "ArgsDelta" and event.text:
            out.append(shapes.delta(index, tool_call=shapes.call_delta(event.index, arguments=event.text)))
    return out
