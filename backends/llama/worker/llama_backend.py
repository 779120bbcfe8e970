"""The llama.cpp implementation of LLMBackend: renders and tokenizes on the caller's thread, then hands each
request to the model's batched engine and waits for it."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from backends.base import (
    BackendError,
    CancelledError,
    CancelToken,
    ChoiceResult,
    GenerateResult,
    ModelSpec,
    Prompt,
    SamplingParams,
    ScoreResult,
    StepLogprobsResult,
    TokenCallback,
    default_seeds,
    validate_params,
)
from backends.beam_search import BeamResult, BeamSettings, check_beam_settings
from backends.grammar.grammar_constraints import grammar_for
from backends.llama.devices import build_info, resolve_device
from backends.llama.models.bundled import model_path
from backends.llama.models.gguf import content_fingerprint, kv_cache_bytes, model_file_info
from backends.llama.models.tool_prompt import file_tool_prompt
from backends.llama.worker.beam_job import BeamJob
from backends.llama.worker.draft_model import DraftModel
from backends.llama.worker.engine import Engine
from backends.llama.worker.engine_jobs import GenerateRequest, Job, ScoreJob, check_fits
from backends.llama.worker.engine_positions import PositionLogprobsJob, shared_prefix_len
from backends.llama.worker.llama_model import LlamaModel
from backends.llama.worker.sampling_chain import SequenceSampler
from backends.llama.worker.speculative_job import speculative_job
from backends.tools.types import ToolRequest

log = logging.getLogger(__name__)

DEFAULT_N_SEQ_MAX = 64
DEFAULT_N_BATCH = 512
MAX_KV_CELLS_DEFAULT = 16384


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


class LlamaBackend:
    """One GGUF model on llama.cpp, shared by every node and run that asks for it (via the ModelPool).
    Options (ModelSpec.options): kv_size (KV cells shared by all sequences; default 2 × n_ctx, at most
    16384), n_seq_max (parallel sequences, default 64), n_batch (tokens per decode step, default 512),
    prefix_cache_tokens (tokens of finished prompts kept for reuse, default kv_size / 4), prefix_cache_expiry
    (tokens decoded before an idle kept prompt is dropped; default: never with flash attention, else 1/32 of
    the model's attention break-even, see LlamaModel.attention_break_even_tokens; 0 = never)."""

    def __init__(self, path: str | Path, spec: ModelSpec | None = None, device: dict[str, Any] | None = None) -> None:
        self.path = Path(path).expanduser().resolve()
        self.spec = spec or ModelSpec(source="path", path=str(self.path))
        self.device = dict(device or resolve_device(self.spec))
        self.file_info = model_file_info(self.path)  # a clear ModelFileError for missing/corrupt files
        self.fingerprint = content_fingerprint(self.path)
        self.weights: dict[str, Any] | None = None
        """Which weights these are and why (a cpu_weights.WeightsChoice as JSON; set by the model pool)."""
        self.model = LlamaModel(self.path, n_gpu_layers=self.device["n_gpu_layers"])
        self._architecture = self.model.metadata_summary()
        try:
            self.n_ctx = int(self.device["n_ctx"] or self.model.n_ctx_train)
            kv_default = max(self.n_ctx, min(2 * self.n_ctx, MAX_KV_CELLS_DEFAULT))
            kv_size = int(self.spec.option("kv_size", kv_default))
            self.engine = Engine(
                self.model,
                kv_size=kv_size,
                n_ctx_seq=min(self.n_ctx, kv_size),
                threads=self.device["threads"],
                flash_attn=self.device["flash_attn"],
                n_batch=int(self.spec.option("n_batch", DEFAULT_N_BATCH)),
                n_seq_max=int(self.spec.option("n_seq_max", DEFAULT_N_SEQ_MAX)),
                prefix_cache_tokens=int(self.spec.option("prefix_cache_tokens", kv_size // 4)),
                park_expiry_tokens=_optional_int(self.spec.option("prefix_cache_expiry")),
            )
        except BaseException:
            self.model.close()
            raise
        try:
            self.drafter = self._load_drafter()
        except BaseException:
            self.engine.close()
            self.model.close()
            raise
        self.device["n_ctx"] = self.engine.n_ctx_seq
        self.device["flash_attn"] = self.engine.flash_attn
        self._closed = False
        self._calls = 0
        self._calls_done = threading.Condition()

    def _load_drafter(self) -> DraftModel | None:
        """The draft model of `speculative: {method: draft}` (same device, same sequence capacity), or None."""
        speculative = self.spec.speculative
        if speculative is None or speculative.method != "draft" or speculative.draft is None:
            return None
        drafter = DraftModel(model_path(speculative.draft), n_gpu_layers=self.device["n_gpu_layers"],
                             kv_size=self.engine.kv_size, n_seq_max=self.engine.n_seq_max,
                             threads=self.device["threads"], n_batch=self.engine.n_batch)
        if drafter.n_vocab != self.model.n_vocab:
            drafter.close()
            raise BackendError(f"The draft model {drafter.model.path.name} has {drafter.n_vocab} tokens in its "
                               f"vocabulary, the target {self.path.name} {self.model.n_vocab}: a draft model must "
                               "share the target's tokenizer.")
        log.info("speculative draft model %s loaded beside %s", drafter.model.path.name, self.path.name)
        return drafter

    @contextlib.contextmanager
    def _in_use(self) -> Iterator[None]:
        """Mark a call in progress, so close() frees the model only after every caller has left it."""
        with self._calls_done:
            if self._closed:
                raise BackendError("This model was unloaded; get it again from the model pool.")
            self._calls += 1
        try:
            yield
        finally:
            with self._calls_done:
                self._calls -= 1
                self._calls_done.notify_all()

    # -- identity ----------------------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        d = self.device
        fa = "-fa" if d.get("flash_attn") else ""
        return f"{self.path.name}#{self.fingerprint}@{d['device']}-ngl{d['n_gpu_layers']}-ctx{d['n_ctx']}{fa}"

    def memory_bytes(self) -> int:
        """Weights plus the KV cache: what unloading this model frees."""
        kv_bytes = kv_cache_bytes(self.model.header.metadata, self.engine.kv_size)
        draft_bytes = self.drafter.model.size_bytes if self.drafter is not None else 0
        return self.model.size_bytes + kv_bytes + draft_bytes

    def info(self) -> dict[str, Any]:
        file_info = self.file_info.to_json()
        file_info["chat_template"] = (file_info["chat_template"] or "")[:200] or None
        return {
            "backend": "llama.cpp",
            "model_id": self.model_id,
            "model": file_info,
            "architecture": dict(self._architecture),
            "loaded": not self._closed,
            "device": dict(self.device),
            "memory_bytes": self.memory_bytes(),
            "weights": self.weights or {"ran": "original", "path": str(self.path), "fingerprint": self.fingerprint,
                                        "quantization": self.file_info.quantization,
                                        "reason": "loaded directly, not through the model pool"},
            "build": build_info(),
            "engine": self.engine.snapshot(),
            "draft_model": str(self.drafter.model.path) if self.drafter is not None else None,
        }

    # -- text --------------------------------------------------------------------------------------------

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        with self._in_use():
            return self.model.render(prompt, add_generation_prompt)

    def render_tool_prompt(self, messages: Sequence[Mapping[str, Any]], request: ToolRequest,
                           add_generation_prompt: bool = True) -> tuple[str, str]:
        return file_tool_prompt(self.path, messages, request, add_generation_prompt)

    def tokenize(self, text: str) -> list[int]:
        with self._in_use():
            return self.model.tokenize(text)

    def _prompt_tokens(self, text: str, what: str) -> list[int]:
        tokens = self.model.tokenize(text)
        if not tokens:
            if self.model.bos_id < 0:
                raise BackendError(f"The {what} is empty; give the model some text.")
            tokens = [self.model.bos_id]
        return tokens

    def _continuation_tokens(self, prefix_text: str, prefix: list[int], continuation: str) -> list[int]:
        """Tokens of `continuation` as the model would see them after the prefix (tokenized jointly when
        the prefix's tokens survive, so word boundaries merge as in generation)."""
        joint = self.model.tokenize(prefix_text + continuation)
        if joint[: len(prefix)] == prefix:
            return joint[len(prefix) :]
        return self.model.tokenize(continuation, add_special=False)

    # -- requests ----------------------------------------------------------------------------------------

    def generate(
        self,
        prompt: Prompt,
        params: SamplingParams,
        n: int = 1,
        seeds: Sequence[int] | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> GenerateResult:
        with self._in_use():
            return self._generate(prompt, params, n, seeds, on_token, cancel)

    def _generate(
        self,
        prompt: Prompt,
        params: SamplingParams,
        n: int,
        seeds: Sequence[int] | None,
        on_token: TokenCallback | None,
        cancel: CancelToken | None,
    ) -> GenerateResult:
        validate_params(params)
        if n < 1:
            raise BackendError(f"n (samples per prompt) must be at least 1, got {n}.")
        if n > self.engine.n_seq_max:
            raise BackendError(
                f"n={n} samples exceed the engine's {self.engine.n_seq_max} parallel sequences; lower n or "
                "raise the n_seq_max model option."
            )
        sample_seeds = default_seeds(params, n, seeds)
        text = self.model.render(prompt)
        tokens = self._prompt_tokens(text, "prompt")
        check_fits(len(tokens), self.engine.n_ctx_seq, "prompt")
        grammar = grammar_for(params)
        if grammar:  # parse once here so a bad grammar is the caller's error, not the engine's
            SequenceSampler(self.model._lib, self.model.vocab, SamplingParams(), 0, grammar).free()
            self.engine.grammar_pool.prewarm(cancel)  # its grammar process starts here, not on the engine thread
        request = GenerateRequest(prompt_text=text, prompt=tokens, params=params, seeds=sample_seeds, grammar=grammar,
                                  n_ctx_seq=self.engine.n_ctx_seq, stream_tokens=on_token is not None, cancel=cancel)
        job = speculative_job(self.spec.speculative, request, drafter=self.drafter)
        return self._run(job, on_token)

    def beam_search(self, prompt: Prompt, params: SamplingParams, settings: BeamSettings,
                    cancel: CancelToken | None = None) -> BeamResult:
        """Token-level (diverse) beam search: params give max_tokens (settings' max_tokens is replaced by it), stop
        and grammar / json_schema; the sampling settings (temperature, top_k, ...) do not apply."""
        with self._in_use():
            validate_params(params)
            settings = BeamSettings(settings.n, settings.length_penalty, settings.groups,
                                    settings.diversity_penalty, params.max_tokens)
            check_beam_settings(settings)
            if settings.n + 1 > self.engine.n_seq_max:
                raise BackendError(f"beam n={settings.n} needs {settings.n + 1} parallel sequences but the engine has "
                                   f"{self.engine.n_seq_max}; lower n or raise the n_seq_max model option.")
            text = self.model.render(prompt)
            tokens = self._prompt_tokens(text, "prompt")
            check_fits(len(tokens), self.engine.n_ctx_seq, "prompt")
            grammar = grammar_for(params)
            if grammar:  # parse once here so a bad grammar is the caller's error, not the engine's
                SequenceSampler(self.model._lib, self.model.vocab, SamplingParams(), 0, grammar).free()
                self.engine.grammar_pool.prewarm(cancel)
            job = BeamJob(text, tokens, settings, params.stop, grammar, self.engine.n_ctx_seq, cancel)
            return self._run(job, None)  # type: ignore[no-any-return]

    def score(
        self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None
    ) -> ScoreResult:
        with self._in_use():
            return self._score(prefix, continuations, cancel)

    def _score(self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None) -> ScoreResult:
        text = self.model.render(prefix)
        tokens = self._prompt_tokens(text, "prefix")
        conts = [self._continuation_tokens(text, tokens, str(c)) for c in continuations]
        longest = max((len(c) for c in conts), default=0)
        check_fits(len(tokens) + longest - 1, self.engine.n_ctx_seq, "prefix plus the longest continuation")
        if not conts:
            return ScoreResult(scores=[])
        job = ScoreJob(tokens, conts, first_token_only=False, labels=[str(c) for c in continuations], cancel=cancel)
        return self._run(job, None)

    def choice_logprobs(
        self, prompt: Prompt, choices: Sequence[str], cancel: CancelToken | None = None
    ) -> ChoiceResult:
        with self._in_use():
            return self._choice_logprobs(prompt, choices, cancel)

    def _choice_logprobs(self, prompt: Prompt, choices: Sequence[str], cancel: CancelToken | None) -> ChoiceResult:
        text = self.model.render(prompt)
        tokens = self._prompt_tokens(text, "prompt")
        check_fits(len(tokens), self.engine.n_ctx_seq, "prompt")
        firsts = []
        for choice in choices:
            cont = self._continuation_tokens(text, tokens, str(choice))
            if not cont:
                raise BackendError(f"Choice {choice!r} has no tokens; give non-empty choices such as ' yes'.")
            firsts.append(cont[:1])
        if not firsts:
            return ChoiceResult(logprobs={})
        job = ScoreJob(tokens, firsts, first_token_only=True, labels=[str(c) for c in choices], cancel=cancel)
        return self._run(job, None)

    def step_logprobs(self, sequences: Sequence[Sequence[str]], tokens: Sequence[str],
                      cancel: CancelToken | None = None) -> StepLogprobsResult:
        """Log-probabilities of `tokens` (each one token of this vocabulary) as the next token after every
        segment of every sequence (raw text, segments tokenized in turn): one batched pass, the prefix the
        sequences share evaluated once."""
        with self._in_use():
            return self._step_logprobs(sequences, tokens, cancel)

    def single_token(self, text: str) -> int:
        """The one token id that `text` is, or a BackendError saying what it is instead."""
        ids = self.model.tokenize(text, add_special=False, parse_special=False)
        if len(ids) != 1:
            pieces = [self.model.piece_text(t) for t in ids]
            raise BackendError(
                f"{text!r} is {len(ids)} tokens {pieces} in {self.path.name}'s vocabulary, not one; a process "
                "reward model is read at one token: pick a token of its vocabulary (Math-Shepherd: '+' / '-')."
            )
        return ids[0]

    def _segment_tokens(self, segments: Sequence[str], cancel: CancelToken | None) -> tuple[list[int], list[int]]:
        """One sequence's tokens and the index of each segment's last token; stops at the first segment past the
        context (a context overflow) and when `cancel` is set, so a long text costs no more than a context."""
        ids: list[int] = []
        ends: list[int] = []
        for k, segment in enumerate(segments):
            if cancel is not None:
                cancel.raise_if_cancelled()
            ids += self.model.tokenize(str(segment), add_special=k == 0)
            ends.append(len(ids) - 1)
            check_fits(len(ids), self.engine.n_ctx_seq, "text to score (prompt plus steps)")
        return ids, ends

    def _step_logprobs(self, sequences: Sequence[Sequence[str]], tokens: Sequence[str],
                       cancel: CancelToken | None) -> StepLogprobsResult:
        token_ids = [self.single_token(str(t)) for t in tokens]
        fulls: list[list[int]] = []
        reads: list[list[int]] = []
        for segments in sequences:
            ids, ends = self._segment_tokens(segments, cancel)
            if not ends or ends[0] < 0:
                raise BackendError("A sequence to score starts with an empty segment; give it some text.")
            fulls.append(ids)
            reads.append(ends)
        if not fulls:
            return StepLogprobsResult(logprobs=[])
        labels = [str(t) for t in tokens]
        shared = shared_prefix_len(fulls, reads)
        if shared:
            job = PositionLogprobsJob(fulls[0][:shared], [f[shared:] for f in fulls],
                                      [[e - shared for e in r] for r in reads], token_ids, labels, cancel)
            return self._run(job, None)
        jobs = [PositionLogprobsJob(f[:1], [f[1:]], [[e - 1 for e in r]], token_ids, labels, cancel)
                for f, r in zip(fulls, reads, strict=True)]  # nothing shared: one job per sequence, batched
        for job in jobs:
            self.engine.submit(job)
        results = [self._wait(job) for job in jobs]
        usage = results[0].usage
        for result in results[1:]:
            usage.add(result.usage)
        return StepLogprobsResult(logprobs=[r.logprobs[0] for r in results], usage=usage)

    def _wait(self, job: Job) -> Any:
        while True:
            kind, value, _ = job.events.get()
            if kind == "error":
                raise value
            if kind == "done":
                return value

    def _run(self, job: Job, on_token: TokenCallback | None) -> Any:
        if job.cancelled:
            raise CancelledError(job.cancel.reason if job.cancel else "cancelled")
        self.engine.submit(job)
        callback_error: BaseException | None = None
        while True:
            kind, value, extra = job.events.get()
            if kind == "token":
                if on_token is not None and callback_error is None:
                    try:
                        on_token(value, extra)
                    except BaseException as exc:  # stop the request, report the callback's error
                        callback_error = exc
                        job.abort()
                continue
            if callback_error is not None:
                raise callback_error
            if kind == "error":
                raise value
            return value

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return not self._closed and self.engine.busy

    def engine_stats(self) -> dict[str, Any]:
        """The engine's counters (requests, decode calls, tokens, speculative drafts accepted, ...)."""
        return dict(self.engine.stats)

    def close(self) -> None:
        """Stop the engine (running requests fail with a clear error), then free the model once no caller
        is still inside it."""
        with self._calls_done:
            if self._closed:
                return
            self._closed = True
        self.engine.close()
        with self._calls_done:
            while self._calls:
                self._calls_done.wait()
        if self.drafter is not None:
            self.drafter.close()
        self.model.close()

