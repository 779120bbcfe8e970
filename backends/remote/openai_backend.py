"""LLMBackend on a remote OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, metagen serve, hosted APIs)."""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from backends.base import (
    CONFIDENCE_TOP_K,
    BackendError,
    CancelledError,
    CancelToken,
    ChoiceResult,
    Completion,
    ContinuationScore,
    GenerateResult,
    ModelSpec,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    TokenCallback,
    Usage,
    default_seeds,
    validate_params,
)
from backends.remote.openai_caps import (
    DETOKENIZE_ENDPOINTS,
    TOKENIZE_ENDPOINTS,
    Capabilities,
    capabilities,
    grammar_fields,
    prompt_logprobs,
)
from backends.remote.openai_http import DEFAULT_TIMEOUT_S, RemoteHttp
from backends.remote.openai_rank import remote_rank
from backends.remote.openai_request import (
    Answer,
    choice_reasoning,
    choice_text,
    constraint_fields,
    finish_reason,
    gbnf_literal,
    logprob_fields,
    messages_of,
    readable,
    sampling_fields,
    token_logprobs,
    usage_of,
)
from backends.remote.openai_tools import (
    TOOL_CALLS_OPTION,
    add_call_deltas,
    answer_of,
    server_parses_calls,
    tool_body_fields,
    tool_messages,
)
from backends.token_stats import approx_token_stats
from backends.tools.render import render_tool_prompt
from backends.tools.types import SERVER_FAMILY, ToolRequest

log = logging.getLogger(__name__)


class StreamInterruptedError(BackendError):
    """The server ended a stream without finishing the answer (another request arrived, on llama_cpp.server)."""


DEFAULT_MAX_CONCURRENCY = 8
JUDGE_TOP_LOGPROBS = 20
"""Alternatives asked for when a judge reads its choices from one token's top logprobs (OpenAI's maximum)."""
WAIT_POLL_S = 0.05
SCORE_SERVERS = ("vLLM (echo + logprobs), llama.cpp's llama-server and llama_cpp.server (forced decoding under a "
                 "grammar)")
JUDGE_SERVERS = "vLLM, SGLang, llama.cpp (llama-server, llama_cpp.server), Ollama, metagen serve and OpenAI"


class OpenAIBackend:
    """One model on one remote server. Thread-safe: requests run on a pool of `max_concurrency` workers (the cap on
    requests in flight to this server); the calling thread waits, relays streamed tokens and watches for cancel."""

    def __init__(self, spec: ModelSpec, max_attempts: int | None = None) -> None:
        if not spec.base_url or not spec.model:
            raise BackendError("a `source: openai` model needs base_url and model, e.g. {source: openai, base_url: "
                               "http://127.0.0.1:8000/v1, model: NAME}")
        self.spec = spec
        self.base_url = spec.base_url.strip().rstrip("/")
        self.model_name = spec.model
        self.max_concurrency = int(spec.max_concurrency or DEFAULT_MAX_CONCURRENCY)
        self.timeout_s = int(spec.timeout_s or DEFAULT_TIMEOUT_S)
        self.http = RemoteHttp(self.base_url, spec.api_key_env, timeout_s=self.timeout_s,
                               max_connections=self.max_concurrency + 2,
                               **({"max_attempts": max_attempts} if max_attempts else {}))
        self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="remote-llm")
        self._streaming = bool(spec.option("stream", True))
        self._prompt_counts: dict[str, int] = {}
        self._lock = threading.Lock()

    # -- identity ----------------------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return f"openai:{self.base_url}#{self.model_name}"

    @property
    def caps(self) -> Capabilities:
        return capabilities(self.http, self.model_name)

    def caps_for(self, cancel: CancelToken | None) -> Capabilities:
        """`caps`, the probe (when one is due) stopped by the request's cancel."""
        with self.http.bounded(cancel):
            return self.caps

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": "openai", "model_id": self.model_id, "base_url": self.base_url, "model": self.model_name,
            "api_key_env": self.spec.api_key_env, "max_concurrency": self.max_concurrency,
            "timeout_s": self.timeout_s, "context_length": self.spec.context_length,
        }
        try:
            out["capabilities"] = self.caps.to_json()
        except BackendError as exc:
            out["error"] = str(exc)
        return out

    # -- text --------------------------------------------------------------------------------------------

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        return readable(prompt, add_generation_prompt)

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        """Where the server parses tool calls itself (vLLM, SGLang, llama-server, Ollama, metagen serve, OpenAI; the
        entry's `options: {tool_calls: server | prompt}` decides otherwise): the conversation as trace text and the
        family `server`, so the nodes send the messages with the tools (SamplingParams.tools) and read the server's
        calls back. Else the generic JSON form in ChatML turns, sent as a completion prompt (the server's own
        template is not known here)."""
        option = self.spec.option(TOOL_CALLS_OPTION)
        if option != "prompt" and server_parses_calls(self.caps.kind, option) and self.caps.chat:
            return readable(tool_messages([dict(m) for m in messages]), add_generation_prompt), SERVER_FAMILY
        rendered = render_tool_prompt(None, [dict(m) for m in messages], request,
                                      add_generation_prompt=add_generation_prompt)
        return rendered.text, rendered.family

    def tokenize(self, text: str) -> list[int]:
        """The server's tokens where it has a tokenizer endpoint, else an estimate (one token per 4 bytes)."""
        if self.caps.tokenize:
            try:
                return self._token_ids(text)
            except BackendError as exc:
                log.debug("tokenize on %s failed: %s", self.base_url, exc)
        return list(range(math.ceil(len(text.encode("utf-8")) / 4)))

    def _prompt_tokens(self, prompt: Prompt) -> int:
        """Tokens of a prompt, for a server that reports no usage (counted once per text)."""
        text = readable(prompt)
        with self._lock:
            if text in self._prompt_counts:
                return self._prompt_counts[text]
        count = len(self.tokenize(text))
        with self._lock:
            if len(self._prompt_counts) > 256:
                self._prompt_counts.clear()
            self._prompt_counts[text] = count
        return count

    # -- the request machinery ---------------------------------------------------------------------------

    def _endpoint(self, prompt: Prompt, caps: Capabilities, tools: bool = False) -> tuple[str, bool]:
        """(path, is chat) for a prompt: messages go to chat, raw text to completions (or chat where that is all);
        a request with tools to chat."""
        if isinstance(prompt, str) and caps.completions and not tools:
            return "/completions", False
        if not caps.chat:
            raise BackendError(f"{caps.server} at {self.base_url} has no chat endpoint for {self.model_name!r}; give "
                               "raw text prompts (e.g. judge_mode: raw) or use a chat model.")
        return "/chat/completions", True

    def _body(self, prompt: Prompt, chat: bool, extra: dict[str, Any], tools: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model_name}
        if tools is not None:  # a tool conversation: its calls and results kept, the tools beside
            body.update({"messages": tool_messages(prompt), **tool_body_fields(tools)})
        else:
            body.update({"messages": messages_of(prompt)} if chat else {"prompt": prompt})
        body.update(extra)
        return body

    def _request(self, path: str, body: dict[str, Any], stream: bool, index_base: int, cancel: CancelToken | None,
                 abort: threading.Event, events: queue.Queue[tuple[str, int, Any]] | None, started: float) -> Answer:
        """One HTTP request (on a pool worker): its choices, with streamed pieces posted to `events` as they come."""
        answer = Answer()
        if not stream:
            reply = self.http.post_json(path, body, cancel)
            for choice in self._choices(reply, path):
                i = index_base + int(choice.get("index", 0) or 0)
                answer.texts[i] = choice_text(choice)
                add_call_deltas(answer.calls.setdefault(i, {}), choice.get("message"))
                if choice_reasoning(choice):
                    answer.reasoning[i] = choice_reasoning(choice)
                answer.finishes[i] = choice
                answer.logprobs[i] = token_logprobs(choice.get("logprobs"), None)
                answer.done_at[i] = time.perf_counter() - started
                if events is not None and answer.texts[i]:  # progress all at once: the text as one piece
                    events.put(("token", i, answer.texts[i]))
            if isinstance(reply, dict):
                answer.usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else None
                answer.timings = reply.get("timings") if isinstance(reply.get("timings"), dict) else None
            return answer
        with self.http.stream(path, {**body, "stream": True}, cancel) as chunks:
            for chunk in chunks:
                if abort.is_set() or (cancel is not None and cancel.cancelled):
                    return answer  # leaving the block closes the stream: the server stops generating
                if isinstance(chunk.get("usage"), dict):
                    answer.usage = chunk["usage"]
                if isinstance(chunk.get("timings"), dict):
                    answer.timings = chunk["timings"]
                for choice in self._choices({"choices": chunk.get("choices") or []}, path):
                    i = index_base + int(choice.get("index", 0) or 0)
                    piece = choice_text(choice)
                    answer.texts[i] = answer.texts.get(i, "") + piece
                    add_call_deltas(answer.calls.setdefault(i, {}), choice.get("delta"))
                    thought = choice_reasoning(choice)
                    if thought:
                        answer.reasoning[i] = answer.reasoning.get(i, "") + thought
                        answer.reasoning_pieces[i] = answer.reasoning_pieces.get(i, 0) + 1
                    answer.logprobs.setdefault(i, []).extend(token_logprobs(choice.get("logprobs"), None))
                    if piece:
                        answer.pieces[i] = answer.pieces.get(i, 0) + 1
                        if answer.first_token_s is None:
                            answer.first_token_s = time.perf_counter() - started
                        if events is not None:
                            events.put(("token", i, piece))
                    if choice.get("finish_reason"):
                        answer.finishes[i] = choice
                        answer.done_at[i] = time.perf_counter() - started
        unfinished = [i for i in answer.texts if i not in answer.finishes]
        if unfinished and not abort.is_set():
            raise StreamInterruptedError(f"the server at {self.base_url} ended the stream before the answer was "
                                         "finished (no finish_reason); llama_cpp.server does this to a stream whenever "
                                         "another request arrives (unless started with --interrupt_requests False)")
        return answer

    def _choices(self, reply: Any, path: str) -> list[dict[str, Any]]:
        """The choices of a non-streamed answer; a BackendError naming the server where the body is not an
        OpenAI-shaped answer."""
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices) or not all(
                isinstance(c.get("text", ""), str | None) and isinstance(c.get("message") or {}, dict)
                for c in choices):
            raise BackendError(f"the server at {self.base_url} answered {path} with a malformed body, not an "
                               f"OpenAI-shaped answer ({str(reply)[:120]!r}); is base_url an OpenAI-compatible API?")
        return choices

    def _request_retried(self, path: str, body: dict[str, Any], stream: bool, index_base: int,
                         cancel: CancelToken | None, abort: threading.Event,
                         events: queue.Queue[tuple[str, int, Any]] | None, started: float) -> Answer:
        """_request, with a stream the server cut short asked for once more, unstreamed (nothing cuts that short);
        the pieces already relayed stay, the answer is the new one."""
        try:
            return self._request(path, body, stream, index_base, cancel, abort, events, started)
        except StreamInterruptedError as exc:
            log.info("%s; asking once more, unstreamed", exc)
            return self._request(path, body, False, index_base, cancel, abort, None, started)

    def _gather(self, jobs: list[Callable[[], Any]], cancel: CancelToken | None,
                events: queue.Queue[tuple[str, int, Any]] | None = None,
                on_token: TokenCallback | None = None, abort: threading.Event | None = None) -> list[Any]:
        """Run jobs on the pool and wait for all, relaying streamed tokens to `on_token` on this thread. Cancel (or
        a failure) stops the wait at once: the workers see `abort` and close their streams."""
        abort = abort or threading.Event()
        futures: list[Future[Any]] = [self._pool.submit(job) for job in jobs]
        if events is not None:  # wake the wait as each request ends, not at the next poll (50 ms a request)
            for f in futures:
                f.add_done_callback(lambda _: events.put(("done", -1, None)))
        try:
            while True:
                if cancel is not None and cancel.cancelled:
                    raise CancelledError(cancel.reason or "cancelled")
                if events is not None:
                    try:
                        kind, index, value = events.get(timeout=WAIT_POLL_S)
                    except queue.Empty:
                        kind = ""
                    if kind == "token" and on_token is not None:
                        on_token(index, value)
                        continue
                elif not all(f.done() for f in futures):
                    time.sleep(WAIT_POLL_S / 5)
                failed = next((f for f in futures if f.done() and f.exception() is not None), None)
                if failed is not None:
                    raise failed.exception()  # type: ignore[misc]
                if all(f.done() for f in futures) and (events is None or events.empty()):
                    return [f.result() for f in futures]
        except BaseException:
            abort.set()
            for f in futures:
                f.cancel()
            raise

    # -- generate ----------------------------------------------------------------------------------------

    def generate(
        self,
        prompt: Prompt,
        params: SamplingParams,
        n: int = 1,
        seeds: Sequence[int] | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> GenerateResult:
        validate_params(params, server_tools=True)
        if n < 1:
            raise BackendError(f"n (samples per prompt) must be at least 1, got {n}.")
        if params.confidence_stop is not None:  # approximate token statistics could calibrate it, not apply it
            raise BackendError("DeepConf's online confidence stop needs the local engine: a remote server cannot stop "
                               "a sample on its token confidence; use adaptive: majority or off with it.")
        sample_seeds = default_seeds(params, n, seeds)
        if cancel is not None:
            cancel.raise_if_cancelled()
        caps = self.caps_for(cancel)
        path, chat = self._endpoint(prompt, caps, tools=params.tools is not None)
        # token statistics ride on logprobs a sampler asked for: their top alternatives approximate them
        top_k = params.logprobs if params.logprobs is None or not params.token_stats else \
            max(params.logprobs, CONFIDENCE_TOP_K)
        base = {**sampling_fields(params, caps), **constraint_fields(params, caps, self.base_url),
                **logprob_fields(top_k, chat)}
        stream = caps.stream and self._streaming and (on_token is not None or cancel is not None) and \
            (params.logprobs is None or caps.stream_logprobs) and not caps.interrupts_streams
        if stream and caps.stream_usage:
            base["stream_options"] = {"include_usage": True}
        if n > 1 and caps.n:
            requests = [(0, self._body(prompt, chat, {**base, "n": n, "seed": sample_seeds[0]}, params.tools))]
        else:
            requests = [(i, self._body(prompt, chat, {**base, "seed": s}, params.tools))
                        for i, s in enumerate(sample_seeds)]
        started = time.perf_counter()
        events: queue.Queue[tuple[str, int, Any]] = queue.Queue()
        abort = threading.Event()
        jobs = [lambda i=i, body=body: self._request_retried(path, body, stream, i, cancel, abort, events, started)
                for i, body in requests]
        answers: list[Answer] = self._gather(jobs, cancel, events, on_token, abort)
        return self._result(prompt, params, n, sample_seeds, answers, time.perf_counter() - started)

    def _result(self, prompt: Prompt, params: SamplingParams, n: int, seeds: list[int], answers: list[Answer],
                wall_s: float) -> GenerateResult:
        guess = 0 if all(a.usage and a.usage.get("prompt_tokens") for a in answers) else self._prompt_tokens(prompt)
        usage = Usage()
        completions: list[Completion] = []
        timed = all(a.timings for a in answers)
        for answer in answers:
            u = usage_of(answer, guess)
            usage.add_tokens(u)
            if timed:  # the server's own prefill and decode times (llama-server)
                usage.prefill_s += u.prefill_s
                usage.decode_s += u.decode_s
            share = len(answer.texts)
            for i in sorted(answer.texts):
                tokens = len(answer.logprobs.get(i) or []) or answer.pieces.get(i, 0) or \
                    (u.completion_tokens // max(1, share))
                if share == 1:
                    tokens = u.completion_tokens
                logprobs = answer.logprobs.get(i) if params.logprobs is not None else None
                stats = approx_token_stats(logprobs) if logprobs and params.token_stats else None
                if logprobs and params.token_stats and stats is None:
                    log.warning("%s at %s sent no top logprobs, so no token statistics (self-certainty, confidence) "
                                "can be approximated", self.caps.server, self.base_url)
                if logprobs and params.logprobs is not None:  # as many alternatives as were asked for
                    logprobs = [replace(lp, top=lp.top[:params.logprobs]) for lp in logprobs]
                text = answer.texts[i] if params.tools is None else answer_of(answer.texts[i], answer.calls.get(i, {}))
                completions.append(Completion(
                    text=text, finish_reason=finish_reason(answer.finishes.get(i, {}), params),
                    seed=seeds[i] if i < len(seeds) else seeds[-1] + i, logprobs=logprobs, token_stats=stats,
                    completion_tokens=tokens,
                    prompt_tokens=u.prompt_tokens, time_s=answer.done_at.get(i, wall_s),
                    thinking=answer.reasoning.get(i, ""),
                    thinking_tokens=u.thinking_tokens if share == 1 else answer.reasoning_pieces.get(i, 0)))
        if len(completions) != n:
            raise BackendError(f"the server at {self.base_url} returned {len(completions)} answers for n={n}.")
        usage.prompt_tokens = max((a.prompt_tokens for a in completions), default=0)
        if not timed:  # wall time: until the first token arrived, then the rest
            firsts = [a.first_token_s for a in answers if a.first_token_s is not None]
            usage.prefill_s = min(firsts) if firsts else 0.0
            usage.decode_s = max(0.0, wall_s - usage.prefill_s)
        return GenerateResult(prompt_text=readable(prompt), completions=completions, usage=usage)

    # -- judges --------------------------------------------------------------------------------------------

    def choice_logprobs(
        self, prompt: Prompt, choices: Sequence[str], cancel: CancelToken | None = None
    ) -> ChoiceResult:
        caps = self.caps_for(cancel)
        path, chat = self._endpoint(prompt, caps)
        if caps.choice_method(chat) is None:
            raise BackendError(f"the LLM judge needs the top logprobs of the next token, which {caps.server} at "
                               f"{self.base_url} does not return{' for chat prompts' if chat else ''}. Servers that "
                               f"do: {JUDGE_SERVERS}; or use another verifier method.")
        if not choices:
            return ChoiceResult(logprobs={})
        for choice in choices:
            if not str(choice):
                raise BackendError(f"Choice {choice!r} has no tokens; give non-empty choices such as ' yes'.")
        extra = {"max_tokens": 1, "temperature": 0, **logprob_fields(JUDGE_TOP_LOGPROBS, chat)}
        top_answer: Answer = self._gather([lambda: self._request(path, self._body(prompt, chat, extra), False, 0,
                                                                 cancel, threading.Event(), None, 0.0)], cancel)[0]
        first = (top_answer.logprobs.get(0) or [None])[0]
        if first is None:
            raise BackendError(f"{caps.server} at {self.base_url} answered without logprobs; the LLM judge needs "
                               f"them (servers that give them: {JUDGE_SERVERS}).")
        top = dict(first.top) if first.top else {}
        top.setdefault(first.token, first.logprob)
        usage = usage_of(top_answer, 0)
        out: dict[str, float] = {}
        floor = min(top.values())
        for choice in map(str, choices):
            if choice in top:  # a one-token choice: its logprob is among the alternatives, or it is rare
                out[choice] = top[choice]
                continue
            first_token = self._first_token_text(prompt, choice)
            # not among the alternatives: at most the least of them (the bound stands in for the value)
            out[choice] = top.get(first_token, floor) if first_token else floor
        return ChoiceResult(logprobs=out, usage=usage)

    def _first_token_text(self, prompt: Prompt, choice: str) -> str | None:
        """The text of the first token of `choice` as the model reads it after the prompt (joint tokenization, as the
        embedded engine does), where the server has a tokenizer; None otherwise."""
        caps = self.caps
        if not caps.tokenize:
            return None
        try:
            ids = self._token_ids(choice)
            if isinstance(prompt, str):
                base, joint = self._token_ids(prompt), self._token_ids(prompt + choice)
                if joint[: len(base)] == base and len(joint) > len(base):
                    ids = joint[len(base):]
            if not ids:
                return None
            path, key = DETOKENIZE_ENDPOINTS[caps.kind]
            answer = self.http.post_json(path, {"model": self.model_name, "tokens": ids[:1]}, root=True)
            text = answer.get(key) if isinstance(answer, dict) else None
            return text if isinstance(text, str) else None
        except (BackendError, KeyError) as exc:
            log.debug("no first token for %r on %s: %s", choice, self.base_url, exc)
            return None

    def _token_ids(self, text: str) -> list[int]:
        path, key = TOKENIZE_ENDPOINTS[self.caps.kind]
        answer = self.http.post_json(path, {"model": self.model_name, key: text}, root=True)
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list):
            raise BackendError(f"the server at {self.base_url} answered {path} without tokens")
        return [int(t) for t in tokens]

    def _forced(self, path: str, prompt: Prompt, chat: bool, text: str, max_tokens: int,
                cancel: CancelToken | None) -> tuple[list[float], Answer]:
        """The model's own logprobs of `text` after the prompt: decoded under a grammar that allows only `text`
        (the logprobs a server reports are those before the grammar)."""
        caps = self.caps
        extra = {"max_tokens": max_tokens, "temperature": 0, **grammar_fields(caps.grammar or "grammar",
                                                                              gbnf_literal(text)),
                 **logprob_fields(0 if not chat else 1, chat)}
        answer = self._request(path, self._body(prompt, chat, extra), False, 0, cancel, threading.Event(), None, 0.0)
        return [lp.logprob for lp in answer.logprobs.get(0) or []], answer

    # -- score ---------------------------------------------------------------------------------------------

    def score(
        self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None
    ) -> ScoreResult:
        caps = self.caps_for(cancel)
        method = caps.score_method
        if method is None:
            raise BackendError(f"the likelihood verifier (score) needs the logprobs of given text, which {caps.server} "
                               f"at {self.base_url} cannot give. Servers that can: {SCORE_SERVERS}; or use another "
                               "verifier method (llm_judge, regex, python...).")
        if not isinstance(prefix, str):
            raise BackendError("scoring after chat messages needs the model's chat template, which a remote server "
                               "keeps to itself; give the likelihood verifier a raw text prefix.")
        if not continuations:
            return ScoreResult(scores=[])
        conts = [str(c) for c in continuations]
        if method == "echo":
            results = self._gather([lambda c=c: self._echo(prefix, c, cancel) for c in conts], cancel)
        else:
            results = self._gather([lambda c=c: self._forced("/completions", prefix, False, c,
                                                             len(c.encode("utf-8")) + 2, cancel)
                                    for c in conts], cancel)
        scores, usage = [], Usage()
        for cont, (values, answer) in zip(conts, results, strict=True):
            if method == "forced" and answer.texts.get(0, "") != cont:
                raise BackendError(f"the server at {self.base_url} did not follow the grammar that spells the text "
                                   f"to score (got {answer.texts.get(0, '')[:60]!r}); it cannot score text.")
            scores.append(ContinuationScore(logprob=sum(values), n_tokens=len(values), token_logprobs=values))
            usage.add(usage_of(answer, 0))
        return ScoreResult(scores=scores, usage=usage)

    def rank(self, query: str, documents: Sequence[str], cancel: CancelToken | None = None) -> RankResult:
        """Reward / relevance scores through the entry's `api` (rerank or pooling), one request for all."""
        return remote_rank(self.http, self.model_name, self.spec.api, query, documents, cancel)

    def _echo(self, prefix: str, cont: str, cancel: CancelToken | None) -> tuple[list[float], Answer]:
        """Logprobs of the continuation's tokens from an echoed prompt (prefix + continuation)."""
        body = self._body(prefix + cont, False, {"max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1})
        reply = self.http.post_json("/completions", body, cancel)
        choice = (reply.get("choices") or [{}])[0] if isinstance(reply, dict) else {}
        values = prompt_logprobs(choice.get("logprobs") or {}, len(prefix), len(prefix) + len(cont))
        if values is None:
            raise BackendError(f"the server at {self.base_url} gave no logprobs for the echoed text to score.")
        answer = Answer(usage=reply.get("usage") if isinstance(reply, dict) else None)
        return values, answer

    # -- lifecycle -----------------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return False

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()
