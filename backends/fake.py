"""A deterministic scripted backend: a test double and the engine of `--dry-run`, never the default."""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from backends.base import (
    BackendError,
    CancelledError,
    CancelToken,
    ChoiceResult,
    Completion,
    ContinuationScore,
    GenerateResult,
    Prompt,
    SamplingParams,
    ScoreResult,
    StepLogprobsResult,
    TokenCallback,
    TokenLogprob,
    TokenStats,
    Usage,
    default_seeds,
)
from backends.beam_search import BeamResult, BeamSearch, BeamSettings, check_beam_settings
from backends.token_stats import ConfidenceWindow
from backends.tools.render import render_tool_prompt
from backends.tools.types import ToolRequest

_CHAT_TAG = re.compile(r"<\|[a-z_]+\|>")
"""A chat-template role marker such as <|assistant|>: never the line worth echoing."""

ReplyFn = Callable[[str, int], str]
"""reply_fn(rendered_prompt, seed) -> completion text."""
StepFn = Callable[[str, str], float]
"""step_fn(text_so_far, token) -> log-probability of `token` as the next token (process reward scoring)."""


def _stable_hash(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


class FakeBackend:
    """Scripted replies, chosen in this order:
    1. `by_prompt`: the first key that is a substring of the rendered prompt gives the reply
       (a str, or a list indexed by seed modulo its length);
    2. `replies`: a list used in turn (a shared cursor, thread-safe), cycling;
    3. `reply_fn(prompt, seed)`;
    4. otherwise a seeded echo: "echo[<seed % 3>]: <last line of the prompt>".
    `latency_s` sleeps per request (to test concurrency), `token_delay_s` before each streamed token (a request
    that is still decoding when others run or a cap is reached); `choice_scores` maps a choice to a fixed
    log-probability for `choice_logprobs` (else derived from a hash of prompt and choice); `token_confidence`
    maps a word to its token confidence in `token_stats` (else derived from a hash of the word; its
    self-certainty is twice that). A word is a token: logprobs with top-k list the word, then `word~1`,
    `word~2` ... each 0.5 nats less likely.
    `step_fn(text, token)` gives `step_logprobs` its log-probabilities (else a hash of the text so far and the
    token). `n_ctx` is the context it claims to hold (a word is a token), as an engine reports its own."""

    def __init__(
        self,
        replies: Sequence[str] | None = None,
        by_prompt: Mapping[str, str | Sequence[str]] | None = None,
        reply_fn: ReplyFn | None = None,
        latency_s: float = 0.0,
        token_delay_s: float = 0.0,
        choice_scores: Mapping[str, float] | None = None,
        name: str = "fake",
        token_confidence: Mapping[str, float] | None = None,
        step_fn: StepFn | None = None,
        n_ctx: int | None = None,
    ) -> None:
        self.n_ctx = n_ctx
        """The context it claims, as a loaded engine reports its own (None: the model spec's context counts)."""
        self._token_confidence = dict(token_confidence or {})
        self._replies = list(replies or [])
        self._by_prompt = dict(by_prompt or {})
        self._reply_fn = reply_fn
        self._latency_s = latency_s
        self._token_delay_s = token_delay_s
        self._choice_scores = dict(choice_scores or {})
        self._name = name
        self._step_fn = step_fn
        self._cursor = 0
        self._lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        """Every request, in arrival order (kind, prompt, n, thread start/end times)."""

    @property
    def model_id(self) -> str:
        return f"fake:{self._name}"

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        if isinstance(prompt, str):
            return prompt
        text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in prompt)
        return text + ("<|assistant|>\n" if add_generation_prompt else "")

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        """The generic JSON form in ChatML turns (the fake has no chat template): answers it parses as `generic`."""
        rendered = render_tool_prompt(None, [dict(m) for m in messages], request,
                                      add_generation_prompt=add_generation_prompt)
        return rendered.text, rendered.family

    def tokenize(self, text: str) -> list[int]:
        return [_stable_hash(w) % 50_000 for w in text.split()]

    def info(self) -> dict[str, Any]:
        return {"backend": "fake", "model": self._name, "device": "none", "note": "test double"}

    def _record(self, kind: str, prompt: str, n: int, start: float) -> None:
        with self._lock:
            self.calls.append({"kind": kind, "prompt": prompt, "n": n, "start": start, "end": time.perf_counter()})

    def _reply(self, prompt: str, seed: int) -> str:
        for key, value in self._by_prompt.items():
            if key in prompt:
                if isinstance(value, str):
                    return value
                return list(value)[seed % len(value)]
        if self._replies:
            with self._lock:
                text = self._replies[self._cursor % len(self._replies)]
                self._cursor += 1
            return text
        if self._reply_fn is not None:
            return self._reply_fn(prompt, seed)
        lines = [ln for ln in prompt.strip().splitlines() if ln.strip() and not _CHAT_TAG.fullmatch(ln.strip())]
        return f"echo[{seed % 3}]: {lines[-1] if lines else ''}"

    def _sleep(self, cancel: CancelToken | None) -> None:
        end = time.perf_counter() + self._latency_s
        while time.perf_counter() < end:
            if cancel is not None:
                cancel.raise_if_cancelled()
            time.sleep(min(0.005, max(0.0, end - time.perf_counter())))

    def generate(
        self,
        prompt: Prompt,
        params: SamplingParams,
        n: int = 1,
        seeds: Sequence[int] | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> GenerateResult:
        """Each sample's scripted reply, streamed word by word (a word is a token). A cancel is honoured after
        every token, as the engine honours it after every decode step: the CancelledError carries the usage so far."""
        start = time.perf_counter()
        text = self.render_prompt(prompt)
        if cancel is not None:
            cancel.raise_if_cancelled()
        if self._latency_s:
            self._sleep(cancel)
        n_prompt = len(self.tokenize(text))
        usage = Usage(prompt_tokens=n_prompt, prompt_tokens_evaluated=n_prompt)
        completions = []
        for i, seed in enumerate(default_seeds(params, n, seeds)):
            reply, finish, matched = self._scripted(text, seed, params)
            words = reply.split()
            self._stream(i, words, usage, on_token, cancel)
            completions.append(self._completion(i, reply, finish, matched, seed, params, words, n_prompt, start))
        usage.completion_tokens = sum(c.completion_tokens for c in completions)
        usage.decode_s = time.perf_counter() - start
        self._record("generate", text, n, start)
        return GenerateResult(prompt_text=text, completions=completions, usage=usage)

    def _scripted(self, text: str, seed: int, params: SamplingParams) -> tuple[str, str, str]:
        """The reply for `seed`, cut at the first stop string or max_tokens; its finish reason and stop string."""
        reply = self._reply(text, seed)
        finish, matched = "eog", ""
        for stop in params.stop:
            if stop and stop in reply:
                reply, finish, matched = reply[: reply.index(stop)], "stop", stop
        words = reply.split()
        if len(words) > params.max_tokens:
            reply, finish = " ".join(words[: params.max_tokens]), "length"
        return reply, finish, matched

    def _stream(self, index: int, words: list[str], usage: Usage, on_token: TokenCallback | None,
                cancel: CancelToken | None) -> None:
        """Stream one sample's words; `usage` counts them as they go, so a cancel between two says what was spent."""
        for w in words:
            if cancel is not None and cancel.cancelled:
                raise CancelledError(cancel.reason or "cancelled", usage=replace(usage))
            if self._token_delay_s:
                time.sleep(self._token_delay_s)
            usage.completion_tokens += 1
            if on_token is not None:
                on_token(index, w + " ")

    def _completion(self, index: int, reply: str, finish: str, matched: str, seed: int, params: SamplingParams,
                    words: list[str], n_prompt: int, start: float) -> Completion:
        """Sample `index`'s Completion: its scripted token statistics (a confidence stop cuts it) and logprobs."""
        stats = None
        if params.token_stats or params.confidence_stop:
            stats, kept = self._stats(words, params)
            if kept < len(words):
                reply, finish, words = " ".join(words[:kept]), "low_confidence", words[:kept]
        logprobs = None
        if params.logprobs is not None:
            logprobs = [TokenLogprob(w, -((_stable_hash(w, index) % 1000) / 500.0)) for w in words]
            for lp in logprobs if params.logprobs else ():
                lp.top = [(lp.token, lp.logprob)] + [(f"{lp.token}~{j}", lp.logprob - 0.5 * j)
                                                     for j in range(1, params.logprobs)]
        return Completion(text=reply, finish_reason=finish, seed=seed, tokens=self.tokenize(reply), logprobs=logprobs,
                          token_stats=stats, completion_tokens=len(words), prompt_tokens=n_prompt,
                          time_s=time.perf_counter() - start, stop=matched)

    def _stats(self, words: list[str], params: SamplingParams) -> tuple[TokenStats, int]:
        """Scripted token statistics of the words, and how many words a confidence stop lets through."""
        stats = TokenStats()
        window = ConfidenceWindow(*params.confidence_stop) if params.confidence_stop else None
        for k, w in enumerate(words):
            conf = self._token_confidence.get(w, 1.0 + (_stable_hash("conf", w) % 1000) / 250.0)
            stats.add(-((_stable_hash(w) % 1000) / 500.0), conf, max(0.0, 4.0 - conf), 2.0 * conf)
            if window is not None and window.push(conf):
                return stats, k + 1
        return stats, len(words)

    def score(
        self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None
    ) -> ScoreResult:
        start = time.perf_counter()
        text = self.render_prompt(prefix)
        if self._latency_s:
            self._sleep(cancel)
        scores = []
        for cont in continuations:
            toks = cont.split() or [""]
            per = [-((_stable_hash(text, t) % 1000) / 250.0) - 0.01 for t in toks]
            scores.append(ContinuationScore(logprob=sum(per), n_tokens=len(toks), token_logprobs=per))
        n_prompt = len(self.tokenize(text))
        usage = Usage(prompt_tokens=n_prompt, prompt_tokens_evaluated=n_prompt)
        self._record("score", text, len(continuations), start)
        return ScoreResult(scores=scores, usage=usage)

    def choice_logprobs(
        self, prompt: Prompt, choices: Sequence[str], cancel: CancelToken | None = None
    ) -> ChoiceResult:
        start = time.perf_counter()
        text = self.render_prompt(prompt)
        if self._latency_s:
            self._sleep(cancel)
        out = {}
        for choice in choices:
            if choice in self._choice_scores:
                out[choice] = self._choice_scores[choice]
            else:
                out[choice] = math.log(0.05 + 0.9 * ((_stable_hash(text, choice) % 1000) / 1000.0))
        n_prompt = len(self.tokenize(text))
        self._record("choice", text, len(choices), start)
        return ChoiceResult(logprobs=out, usage=Usage(prompt_tokens=n_prompt, prompt_tokens_evaluated=n_prompt))

    def single_token(self, text: str) -> int:
        """A fake token is a whitespace-separated word: `text` must be exactly one (spaces around it aside)."""
        ids = self.tokenize(text)
        if len(ids) != 1:
            raise BackendError(f"{text!r} is not one token of the fake vocabulary (one word)")
        return ids[0]

    def step_logprobs(self, sequences: Sequence[Sequence[str]], tokens: Sequence[str],
                      cancel: CancelToken | None = None) -> StepLogprobsResult:
        start = time.perf_counter()
        for token in tokens:
            self.single_token(str(token))
        if self._latency_s:
            self._sleep(cancel)
        out: list[list[dict[str, float]]] = []
        n_tokens = 0
        for segments in sequences:
            text, rows = "", []
            for segment in segments:
                text += segment
                rows.append({str(t): self._step_fn(text, str(t)) if self._step_fn is not None
                             else math.log(0.05 + 0.9 * ((_stable_hash(text, t) % 1000) / 1000.0))
                             for t in tokens})
            out.append(rows)
            n_tokens += len(self.tokenize(text))
        self._record("steps", "\x1e".join("".join(s) for s in sequences), len(sequences), start)
        return StepLogprobsResult(logprobs=out, usage=Usage(prompt_tokens=n_tokens, prompt_tokens_evaluated=n_tokens))

    def beam_search(self, prompt: Prompt, params: SamplingParams, settings: BeamSettings,
                    cancel: CancelToken | None = None) -> BeamResult:
        """Beam search over a word vocabulary: the words of the scripted replies for seeds 0..n-1 and an end token
        (id 0); each word's log-probability after a prefix comes from a hash of prompt and prefix (or from
        `step_fn(text so far, word)` when given), normalised over the vocabulary. The search itself is the
        engine's (backends/beam_search.py)."""
        start = time.perf_counter()
        settings = BeamSettings(settings.n, settings.length_penalty, settings.groups, settings.diversity_penalty,
                                params.max_tokens)
        check_beam_settings(settings)
        text = self.render_prompt(prompt)
        vocab = ["</s>", *dict.fromkeys(w for seed in range(settings.n) for w in self._reply(text, seed).split())]
        search = BeamSearch(settings, lambda token: token == 0)
        while not search.done():
            if cancel is not None:
                cancel.raise_if_cancelled()
            search.expand({b.id: self._beam_candidates(text, [vocab[t] for t in b.tokens], vocab, settings)
                           for b in search.live})
        hyps = search.best(lambda b: " ".join(vocab[t] for t in b.tokens if t != 0))
        self._record("beam", text, settings.n, start)
        completion = sum(len(h.tokens) for h in hyps)
        return BeamResult(prompt_text=text, hypotheses=hyps, tree=search.tree(lambda t: vocab[t]),
                          usage=Usage(prompt_tokens=len(self.tokenize(text)), completion_tokens=completion))

    def _beam_candidates(self, prompt: str, words: list[str], vocab: list[str],
                         settings: BeamSettings) -> list[tuple[int, float]]:
        so_far = " ".join(words)
        raw = [self._step_fn(so_far, w) if self._step_fn is not None
               else math.log(0.05 + 0.9 * ((_stable_hash(prompt, so_far, w) % 1000) / 1000.0)) for w in vocab]
        lse = max(raw) + math.log(sum(math.exp(r - max(raw)) for r in raw))
        ranked = sorted(((i, r - lse) for i, r in enumerate(raw)), key=lambda c: (-c[1], c[0]))
        return ranked[: settings.candidates_per_beam()]
