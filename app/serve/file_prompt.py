"""A model file's prompt for a chat request, made in the studio's process before any decoding: the conversation
rendered (with its tools, through the file's own chat template, when the request has tools or tool turns), counted
with the model's tokenizer, refused when it does not fit the context, and the sampling fitted to it (max_tokens
lowered to what fits, a tool-call grammar when the choice demands a call)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import Any

from app.serve.catalog import FileModel
from app.serve.errors import ApiError
from app.serve.params import ApiRequest
from app.service.studio import StudioService
from backends.base import LLMBackend, ModelSpec, SamplingParams
from backends.llama.models.bundled import model_path
from backends.tools.types import ToolAnswer, ToolRequest

log = logging.getLogger(__name__)

NO_TOOLS = ToolRequest()


class ContextTooLongError(ApiError):
    """The prompt holds more tokens than the model's context (OpenAI's 400 `context_length_exceeded`; the
    Messages door words it as Anthropic does, `anthropic_message`)."""

    def __init__(self, n_tokens: int, n_ctx: int) -> None:
        super().__init__(400, f"This model's maximum context length is {n_ctx} tokens. However, your messages "
                         f"resulted in {n_tokens} tokens. Please reduce the length of the messages.",
                         param="messages", code="context_length_exceeded",
                         extra={"prompt_tokens": n_tokens, "context_tokens": n_ctx})
        self.n_tokens = n_tokens
        self.n_ctx = n_ctx

    @property
    def anthropic_message(self) -> str:
        return f"prompt is too long: {self.n_tokens} tokens > {self.n_ctx} maximum"


@dataclass(frozen=True)
class FilePrompt:
    text: str
    """The rendered prompt the engine gets (a str: it is not rendered again)."""
    n_tokens: int
    n_ctx: int
    tools: ToolRequest
    """The tools in play (inactive: the answer is text only)."""
    family: str | None
    """The tool-call format of the template (None: no tools in play)."""
    params: SamplingParams
    warnings: tuple[str, ...] = ()


def has_tool_turns(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def chat_template(spec: ModelSpec) -> Any:
    """The file's ChatTemplate (template, bos_token, eos_token), read once per version of the file."""
    from backends.llama.models.chat_template import chat_template_of

    return chat_template_of(model_path(spec))


def render(backend: LLMBackend, spec: ModelSpec, messages: list[dict[str, Any]],
           tools: ToolRequest) -> tuple[str, str | None]:
    """The prompt text and, with tools in play, the template's tool-call family."""
    if not tools.active and not has_tool_turns(messages):
        return backend.render_prompt(messages), None
    from backends.tools.render import render_tool_prompt

    template = chat_template(spec)
    rendered = render_tool_prompt(template.template, messages, tools if tools.active else NO_TOOLS,
                                  bos_token=template.bos_token, eos_token=template.eos_token)
    return rendered.text, rendered.family if tools.active else None


def context_of(backend: LLMBackend, spec: ModelSpec) -> int:
    """The tokens one sequence of the loaded model holds (the engine's; the spec's before it reports one)."""
    n_ctx = getattr(backend, "n_ctx", None)
    return int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else int(spec.n_ctx or 4096)


def prepare(backend: LLMBackend, spec: ModelSpec, messages: list[dict[str, Any]], tools: ToolRequest,
            params: SamplingParams, *, max_tokens_given: bool = True) -> FilePrompt:
    """Runs on a worker thread (tokenizing may wait for the model to load): the prompt, checked and fitted."""
    text, family = render(backend, spec, messages, tools)
    n_tokens = len(backend.tokenize(text))
    n_ctx = context_of(backend, spec)
    if n_tokens >= n_ctx:
        raise ContextTooLongError(n_tokens, n_ctx)
    warnings = []
    room = n_ctx - n_tokens
    if params.max_tokens > room:
        if max_tokens_given:
            warnings.append(f"max_tokens {params.max_tokens} lowered to {room}: the prompt's {n_tokens} tokens and "
                            f"the answer must fit the model's context of {n_ctx} tokens")
        params = replace(params, max_tokens=room)
    if family is not None:
        from backends.tools.grammar import tool_call_grammar

        grammar = tool_call_grammar(tools, family)
        if grammar:
            if params.json_schema is not None:
                warnings.append("the response format ignored: the tool choice's grammar constrains the answer")
            params = replace(params, grammar=grammar, json_schema=None)
    return FilePrompt(text, n_tokens, n_ctx, tools if family is not None else NO_TOOLS, family, params,
                      tuple(warnings))


async def file_prompt_for(service: StudioService, model: FileModel, req: ApiRequest,
                          params: SamplingParams) -> FilePrompt:
    """The model file's prompt for a chat request, rendered, counted and checked on a worker thread
    (ContextTooLongError when it does not fit)."""
    backend = await asyncio.to_thread(service.scheduler.provider, model.spec)
    return await asyncio.to_thread(prepare, backend, model.spec, req.messages, req.tools, params,
                                   max_tokens_given=req.sampling.max_tokens is not None)


def count(backend: LLMBackend, spec: ModelSpec, messages: list[dict[str, Any]], tools: ToolRequest) -> int:
    """The prompt's tokens, as `prepare` counts them (for /v1/messages/count_tokens)."""
    text, _ = render(backend, spec, messages, tools)
    return len(backend.tokenize(text))


def parse_answer(prompt: FilePrompt, text: str) -> ToolAnswer:
    """A finished answer's text and calls (text only when no tools are in play)."""
    if prompt.family is None:
        return ToolAnswer(text)
    from backends.tools.parse import parse_tool_calls

    answer = parse_tool_calls(text, prompt.family, prompt.tools)
    return ToolAnswer(answer.content, tuple(c.with_id() for c in answer.calls))


def stream_parser(prompt: FilePrompt) -> Any:
    """A ToolStreamParser for the answer's pieces (None when no tools are in play)."""
    if prompt.family is None:
        return None
    from backends.tools.stream import ToolStreamParser

    return ToolStreamParser(prompt.family, prompt.tools)


def log_prompt(prompt: FilePrompt, model: str) -> None:
    log.debug("model %s: prompt of %d tokens (context %d), tools %s", model, prompt.n_tokens, prompt.n_ctx,
              prompt.family or "none")
