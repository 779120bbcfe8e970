"""The LLM backend protocol and the data classes that cross the backend boundary."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from backends.tools.types import ToolRequest

ChatMessage = dict[str, str]
"""One chat turn: {"role": "system" | "user" | "assistant", "content": "..."}."""

Prompt = str | Sequence[ChatMessage]
"""A raw completion prompt (str) or chat messages rendered through the model's chat template."""

TokenCallback = Callable[[int, str], None]
"""Called as on_token(sample_index, text_piece) while decoding, for live progress."""


class BackendError(RuntimeError):
    """A request failed for a reason the user can act on (message says what and how to fix)."""


class ModelFileError(BackendError):
    """A model file is missing, truncated or not GGUF."""


class EngineStoppedError(BackendError):
    """The process running a model's engine stopped (a native crash, an abort, an out-of-memory kill, a hang the
    studio ended): only its requests in flight fail, and the next request starts a new one. A server error, not the
    caller's. `model`: the model's file name; `cause`: "SIGSEGV", "exit code 3", "stopped responding", ..."""

    def __init__(self, message: str, *, model: str = "", cause: str = "") -> None:
        super().__init__(message)
        self.model = model
        self.cause = cause

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_stopped, (type(self), str(self), self.model, self.cause)


class ModelBrokenError(EngineStoppedError):
    """A model whose engine stopped several times in a row: refused with the reason until it is unloaded."""


def _rebuild_stopped(cls: type[EngineStoppedError], message: str, model: str, cause: str) -> EngineStoppedError:
    return cls(message, model=model, cause=cause)


class CancelledError(RuntimeError):
    """The request or run was cancelled. `usage`: what a request cut mid-way had spent by then (prompt tokens
    evaluated, completion tokens drawn), where the backend knows it; None where it does not (or spent nothing)."""

    def __init__(self, *args: object, usage: Usage | None = None) -> None:
        super().__init__(*args)
        self.usage = usage


class CancelToken:
    """Thread-safe cancel flag shared by a run, its nodes and the backend requests they make."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""
        self._callbacks: list[Callable[[], None]] = []
        self._callbacks_lock = threading.Lock()

    def cancel(self, reason: str = "cancelled") -> None:
        self.reason = reason
        self._event.set()
        with self._callbacks_lock:
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` once when this token is cancelled (at once if it already is, on the cancelling thread
        otherwise); returns a function that unregisters it. What relays a cancel to another process uses this."""
        with self._callbacks_lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def remove() -> None:
                    with self._callbacks_lock, contextlib.suppress(ValueError):
                        self._callbacks.remove(callback)

                return remove
        callback()
        return lambda: None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise CancelledError(self.reason or "cancelled")


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings for one request; temperature 0 means greedy."""

    max_tokens: int = 128
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 1.0
    min_p: float = 0.0
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int = 0
    grammar: str | None = None
    """GBNF grammar text constraining the output."""
    json_schema: str | None = None
    """JSON schema (as JSON text) constraining the output; converted to a grammar by the engine."""
    logprobs: int | None = None
    """None: no logprobs; 0: logprob of each chosen token; k > 0: also the top-k alternatives."""
    token_stats: bool = False
    """Record each sample's per-token confidence statistics (Completion.token_stats), read from the logits the
    sampler already has: no extra model call."""
    confidence_stop: tuple[int, float] | None = None
    """(group, threshold): stop a sample once the mean token confidence of its last `group` tokens falls below
    the threshold (DeepConf online; finish_reason "low_confidence"). Implies token_stats."""
    tools: str | None = None
    """Tool calling parsed by the server: its chat-completions fields `tools`, `tool_choice` and
    `parallel_tool_calls` as JSON text (backends.tools.types.request_fields), the prompt chat messages, each
    completion's text the answer JSON of the server's parsed answer (answer_json). Set only for a backend whose
    render_tool_prompt answers the family `server` (a remote OpenAI-compatible server); others refuse it."""

    def with_seed(self, seed: int) -> SamplingParams:
        return replace(self, seed=seed)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


CONFIDENCE_TOP_K = 20
"""Token confidence (DeepConf) is minus the mean log-probability of the top this-many tokens."""


@dataclass
class TokenStats:
    """Per generated token: the chosen token's log-probability, its confidence (minus the mean log-probability of
    the CONFIDENCE_TOP_K most likely tokens: high when the distribution is peaked), its entropy (nats) and its
    self-certainty (KL(uniform || p) in nats, from the whole distribution; empty where the engine cannot see it).
    `approximate` is set when the statistics come from a remote server's top logprobs, not the full distribution."""

    logprob: list[float] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    self_certainty: list[float] = field(default_factory=list)
    approximate: bool = False

    def add(self, logprob: float, confidence: float, entropy: float, self_certainty: float | None = None) -> None:
        self.logprob.append(logprob)
        self.confidence.append(confidence)
        self.entropy.append(entropy)
        if self_certainty is not None:
            self.self_certainty.append(self_certainty)

    def __len__(self) -> int:
        return len(self.confidence)


@dataclass
class TokenLogprob:
    """A chosen token with its log-probability under the model's own (untempered) distribution."""

    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class TokenCounts:
    """The token counters, one type for a request (Usage), a run (RunStats) and an evaluation's totals."""

    prompt_tokens: int = 0
    """Tokens in the prompt(s)."""
    prompt_tokens_evaluated: int = 0
    """Prompt tokens actually run through the model (shared prompts count once)."""
    prompt_tokens_cached: int = 0
    """Prompt tokens reused from the KV cache instead of being evaluated."""
    completion_tokens: int = 0
    thinking_tokens: int = 0
    """Of the completion tokens, those spent thinking (inside a thinking block, or a server's reasoning_content);
    the answer's tokens are completion_tokens - thinking_tokens."""

    def add_tokens(self, other: TokenCounts) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.prompt_tokens_evaluated += other.prompt_tokens_evaluated
        self.prompt_tokens_cached += other.prompt_tokens_cached
        self.completion_tokens += other.completion_tokens
        self.thinking_tokens += other.thinking_tokens

    @property
    def tokens_used(self) -> int:
        """What a token budget counts: prompt tokens evaluated plus completion tokens."""
        return self.prompt_tokens_evaluated + self.completion_tokens


@dataclass
class Usage(TokenCounts):
    """Counters of one request: what was evaluated, what the prefix cache saved, and the time spent."""

    prefill_s: float = 0.0
    decode_s: float = 0.0
    draft_tokens: int = 0
    """Speculative decoding: draft tokens proposed and verified (not counted in completion_tokens)."""
    draft_accepted: int = 0
    """Speculative decoding: draft tokens the target accepted (each is also a completion token)."""

    def add(self, other: Usage) -> None:
        self.add_tokens(other)
        self.prefill_s += other.prefill_s
        self.decode_s += other.decode_s
        self.draft_tokens += other.draft_tokens
        self.draft_accepted += other.draft_accepted

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted tokens, or None when nothing was drafted."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else None


@dataclass
class Completion:
    """One sampled continuation."""

    text: str
    finish_reason: str = "stop"
    """"stop" (stop string), "eog" (end-of-generation token), "length" (max_tokens), "low_confidence" (stopped by
    SamplingParams.confidence_stop), "cancelled"."""
    seed: int = 0
    tokens: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None
    completion_tokens: int = 0
    prompt_tokens: int = 0
    time_s: float = 0.0
    """Wall time from the request's start until this sample finished."""
    thinking: str = ""
    """A remote server's separate reasoning text (reasoning_content), not part of `text`."""
    thinking_tokens: int = 0
    """Tokens of `thinking` where the server reports them (counted in completion_tokens too)."""
    token_stats: TokenStats | None = None
    """Per-token confidence statistics, when the request asked for them (SamplingParams.token_stats)."""
    draft_tokens: int = 0
    """Speculative decoding: draft tokens proposed for this sample."""
    accepted: list[bool] | None = None
    """Speculative decoding: per token of `tokens`, True where it was an accepted draft token."""
    stop: str = ""
    """The stop string that ended it (finish_reason "stop"; cut off the text), where the engine knows it: the local
    engine and the fake do, OpenAI-compatible servers do not say ('')."""


@dataclass
class GenerateResult:
    """N completions of one prompt, plus the request's counters."""

    prompt_text: str
    """The prompt as the model saw it (chat template applied)."""
    completions: list[Completion]
    usage: Usage = field(default_factory=Usage)


@dataclass
class ContinuationScore:
    """Log-likelihood of one continuation after a shared prefix."""

    logprob: float
    n_tokens: int
    token_logprobs: list[float] = field(default_factory=list)

    @property
    def mean_logprob(self) -> float:
        return self.logprob / self.n_tokens if self.n_tokens else 0.0


@dataclass
class ScoreResult:
    scores: list[ContinuationScore]
    usage: Usage = field(default_factory=Usage)


@dataclass
class ChoiceResult:
    """Next-token log-probabilities of the first token of each choice (e.g. " yes" / " no")."""

    logprobs: dict[str, float]
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class SpeculativeSpec:
    """A model entry's `speculative:` option: how its engine drafts tokens and verifies them in one decode
    (backends/llama/worker/speculative.py; docs/speculative.md)."""

    method: str = "ngram"
    """"ngram" (prompt lookup over the sequence, its prompt and its sibling samples) or "draft" (a second model)."""
    k: int = 4
    """Draft tokens proposed per sequence and step (1..16)."""
    ngram: int = 3
    """Tokens matched to find a draft (1..8)."""
    draft: ModelSpec | None = None
    """method "draft": the draft model's spec (resolved from its alias)."""
    draft_alias: str | None = None
    adaptive: bool = True
    """Shrink k per sequence where its drafts fail (and grow it back where they pass)."""


@dataclass
class StepLogprobsResult:
    """Log-probabilities of a few tokens read after each segment of each sequence (process reward models).

    `logprobs[i][j][token]` is log p(token) for the next token after segment j of sequence i."""

    logprobs: list[list[dict[str, float]]]
    usage: Usage = field(default_factory=Usage)


@dataclass
class RankResult:
    """One relevance / reward score per document (rerankers, reward models), in the documents' order."""

    scores: list[float]
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ModelSpec:
    """Where a model comes from and how to run it; the `models:` entries of a workflow."""

    source: str = "bundled"
    """"bundled" (the embedded SmolLM2), "path" (a local GGUF), "openai" (a remote OpenAI-compatible server) or
    "fake" (test double)."""
    path: str | None = None
    device: str = "auto"
    """"auto" | "cpu" | "gpu" | "metal"."""
    n_ctx: int = 4096
    threads: int | None = None
    n_gpu_layers: int | None = None
    flash_attn: bool = False
    cpu_weights: str | None = None
    """"auto" | "original" | "q8_0" | "q4_0": which weights run on CPU (backends/llama/models/cpu_weights.py); None =
    the source's default (cpu_weights.DEFAULT_CPU_WEIGHTS: original)."""
    options: tuple[tuple[str, Any], ...] = ()
    """Extra backend-specific settings as sorted (key, value) pairs (hashable)."""
    base_url: str | None = None
    """source "openai": the server's API root, e.g. http://host:8000/v1 (with replicas: the first server's)."""
    replicas: tuple[tuple[str, int | None], ...] = ()
    """source "openai" with `base_url` a list: (url, max_concurrency or None) of every server serving `model`."""
    model: str | None = None
    """source "openai": the model name the server knows (GET /v1/models lists them)."""
    api_key_env: str | None = None
    """source "openai": the environment variable holding the API key (the key itself is never in a spec)."""
    max_concurrency: int | None = None
    """source "openai": requests in flight at once to this server (default 8)."""
    timeout_s: int | None = None
    """source "openai": seconds to wait for the server's next bytes before giving up (default 300)."""
    context_length: int | None = None
    """source "openai": the server's context size, when known (shown in the model's info)."""
    api: str | None = None
    """source "openai": which API scores with it: "rerank" (/v1/rerank of llama-server, TEI, vLLM) or "pooling"
    (vLLM's /pooling, reward models); None or "chat" = completions only."""
    pooling: str | None = None
    """"rank": a local GGUF with a classification head, run with rank pooling (rerankers, reward models); it scores
    (verifier method reward_model) and never generates."""
    speculative: SpeculativeSpec | None = None
    """Speculative decoding for every request to this model (llama.cpp only), or None."""

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)


@runtime_checkable
class LLMBackend(Protocol):
    """What nodes may ask of a model. Implementations must be safe to call from several threads at
    once: concurrent requests are how the engine gets to batch them."""

    @property
    def model_id(self) -> str:
        """Stable identity of the model (file name + content hash + settings) for cache keys."""
        ...

    def generate(
        self,
        prompt: Prompt,
        params: SamplingParams,
        n: int = 1,
        seeds: Sequence[int] | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> GenerateResult:
        """N completions of one prompt; the prompt is evaluated once and shared by all samples.
        `seeds` gives each sample its own seed (default: params.seed + i)."""
        ...

    def score(
        self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None
    ) -> ScoreResult:
        """Sum log-probability of each continuation after the prefix (prefix evaluated once)."""
        ...

    def choice_logprobs(
        self, prompt: Prompt, choices: Sequence[str], cancel: CancelToken | None = None
    ) -> ChoiceResult:
        """Next-token log-probability of the first token of each choice after the prompt."""
        ...

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        """The text the model sees: chat messages through the model's chat template, str as-is."""
        ...

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        """A tool-calling conversation (OpenAI chat shape) as the text this model sees, and the call format its
        answer comes in (backends.tools.render.render_tool_prompt: the model's own chat template given the tools,
        else the generic JSON form): (text, family). The text is a prompt to pass as it is (a str)."""
        ...

    def tokenize(self, text: str) -> list[int]: ...

    def info(self) -> dict[str, Any]:
        """What this backend is and how it runs (model, device, build capabilities)."""
        ...


def default_seeds(params: SamplingParams, n: int, seeds: Sequence[int] | None) -> list[int]:
    """Per-sample seeds: the given ones, or params.seed + i."""
    if seeds is not None:
        if len(seeds) != n:
            raise ValueError(f"got {len(seeds)} seeds for n={n} samples")
        return list(seeds)
    return [params.seed + i for i in range(n)]


MAX_STOP_STRINGS = 16
"""Stop strings a request may give (a workflow param, /v1's `stop`): each is matched against every new token."""
MAX_STOP_CHARS = 256
"""Longest stop string: sixteen 60 KB stop strings cost about 1.5 s per token and slowed every other request."""
_STOP_STRINGS_ADDED = 4
"""Room for the stops nodes add themselves (a search's step delimiter) beyond a request's own."""


def stop_problem(stop: Sequence[str], *, added: int = 0) -> str | None:
    """What is wrong with a list of stop strings (too many, one too long), else None: the one bound, checked
    where stops enter (workflow validation, /v1) and again at the backend's door."""
    if len(stop) > MAX_STOP_STRINGS + added:
        return f"takes at most {MAX_STOP_STRINGS} stop strings, got {len(stop)}"
    longest = max((len(s) for s in stop), default=0)
    if longest > MAX_STOP_CHARS:
        return f"stop strings may have at most {MAX_STOP_CHARS} characters, one has {longest}"
    return None


def validate_params(params: SamplingParams, *, server_tools: bool = False) -> None:
    """Reject settings llama.cpp would silently misread, with a hint for each; `server_tools`: the backend's
    server parses tool calls itself (SamplingParams.tools)."""
    problems = []
    if params.tools is not None and not server_tools:
        problems.append("tools (tool calls parsed by the server) need a remote OpenAI-compatible server; on this "
                        "model the tools go into the prompt (render_tool_prompt) and the answer is parsed here")
    if params.tools is not None and (params.grammar or params.json_schema):
        problems.append("a server parsing tool calls takes no grammar or json_schema beside the tools")
    if params.max_tokens < 0:
        problems.append(f"max_tokens must be >= 0, got {params.max_tokens}")
    if params.temperature < 0:
        problems.append(f"temperature must be >= 0 (0 = greedy), got {params.temperature}")
    if not 0.0 < params.top_p <= 1.0:
        problems.append(f"top_p must be in (0, 1], got {params.top_p}")
    if not 0.0 <= params.min_p < 1.0:
        problems.append(f"min_p must be in [0, 1), got {params.min_p}")
    if not 0.0 < params.typical_p <= 1.0:
        problems.append(f"typical_p must be in (0, 1], got {params.typical_p}")
    if params.repeat_penalty <= 0:
        problems.append(f"repeat_penalty must be > 0 (1 = off), got {params.repeat_penalty}")
    if params.logprobs is not None and not 0 <= params.logprobs <= 20:
        problems.append(f"logprobs must be between 0 and 20 alternatives, got {params.logprobs}")
    if params.grammar and params.json_schema:
        problems.append("give either grammar or json_schema, not both")
    if params.confidence_stop is not None and (
            params.confidence_stop[0] < 1 or not math.isfinite(params.confidence_stop[1])):
        problems.append(f"confidence_stop must be (group >= 1, a finite threshold), got {params.confidence_stop}")
    stop = stop_problem(params.stop, added=_STOP_STRINGS_ADDED)
    if stop:
        problems.append(f"stop {stop}")
    if problems:
        raise BackendError("Bad sampling settings: " + "; ".join(problems) + ".")
