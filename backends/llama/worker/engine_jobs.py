"""Request state inside the batched engine: a generate request (N samples sharing one prompt) and a scoring
request (continuations sharing one prefix). The engine thread owns them and they see it only as an EngineView;
request threads only read events."""

from __future__ import annotations

import codecs
import math
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from backends.base import (
    BackendError,
    CancelledError,
    CancelToken,
    ChoiceResult,
    Completion,
    ContinuationScore,
    GenerateResult,
    SamplingParams,
    ScoreResult,
    TokenLogprob,
    TokenStats,
    Usage,
)
from backends.engine_protocol import EngineView
from backends.llama.worker.batch import BatchBuilder
from backends.llama.worker.grammar_worker import GrammarWorker
from backends.llama.worker.sampling_chain import SequenceSampler
from backends.token_stats import ConfidenceWindow, StatsScratch, token_statistics


def log_softmax_at(logits: np.ndarray, token: int) -> float:
    """log p(token) under the untempered distribution of one logits row."""
    peak = float(logits.max())
    lse = peak + math.log(float(np.exp(logits - peak, dtype=np.float64).sum()))
    return float(logits[token]) - lse


def top_logprobs(logits: np.ndarray, k: int) -> list[tuple[int, float]]:
    peak = float(logits.max())
    lse = peak + math.log(float(np.exp(logits - peak, dtype=np.float64).sum()))
    top = np.argpartition(logits, -k)[-k:]
    top = top[np.argsort(-logits[top])]
    return [(int(t), float(logits[t]) - lse) for t in top]


class Job:
    """Common state: events for the waiting request thread, counters, cancel, the sequence ids held."""

    kind = "job"

    def __init__(self, cancel: CancelToken | None) -> None:
        self.cancel = cancel
        self.events: queue.SimpleQueue[tuple[str, Any, Any]] = queue.SimpleQueue()
        self.usage = Usage()
        self.submitted = time.perf_counter()
        self.seq_ids: list[int] = []
        self.reserve_cells = 0
        self.done = False
        self._aborted = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._aborted.is_set() or (self.cancel is not None and self.cancel.cancelled)

    def abort(self) -> None:
        """Stop the request at the next step (its caller gave up, e.g. its token callback failed)."""
        self._aborted.set()

    def resolve(self, result: Any) -> None:
        self.done = True
        self.events.put(("done", result, None))

    def reject(self, error: BaseException) -> None:
        if isinstance(error, CancelledError) and error.usage is None:  # a cut request: what it spent is still spent
            error.usage = replace(self.usage)
        self.done = True
        self.events.put(("error", error, None))

    # The engine drives a job through these; batch additions are only committed after a successful decode.
    def needed_ids(self) -> int:
        raise NotImplementedError

    def needs_grammar(self) -> bool:
        """Whether the job leases a grammar process when it starts (the engine admits it when one is free)."""
        return False

    def prefix_tokens(self) -> list[int]:
        raise NotImplementedError

    def start(self, core: EngineView) -> None:
        raise NotImplementedError

    def add_decode_tokens(self, batch: BatchBuilder) -> None:
        """Tokens that must go into every step (one per live sample)."""

    def add_prompt_tokens(self, batch: BatchBuilder, budget: int) -> int:
        """Up to `budget` prompt/continuation tokens; returns how many were added."""
        return 0

    def add_draft_tokens(self, batch: BatchBuilder, budget: int) -> int:
        """Up to `budget` speculative draft tokens behind this step's decode tokens
        (backends/llama/worker/speculative_job.py); returns how many were added."""
        return 0

    def rollback(self) -> None:
        """Forget what was added to a batch that failed to decode."""

    def commit(self, core: EngineView) -> None:
        """The batch decoded: advance state and read the logits rows this job asked for."""
        raise NotImplementedError

    def release(self, core: EngineView, park: bool) -> None:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError


@dataclass
class Sample:
    """One sequence of a generate request."""

    index: int
    seed: int
    seq_id: int
    sampler: SequenceSampler
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0
    logprobs: list[TokenLogprob] | None = None
    stats: TokenStats | None = None
    window: ConfidenceWindow | None = None
    """DeepConf online: the sliding group confidence that stops the sample when it drops (params.confidence_stop)."""
    finish: str | None = None
    pending: int = -1
    waiting: np.ndarray | None = None
    """The logits it draws from once the grammar process says which tokens may come next (asked, not answered)."""
    row: int = -1
    time_s: float = 0.0
    stop: str = ""
    """The stop string that ended the sample (cut off its text)."""
    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace"))


class PrefillMixin:
    """Feeding a prompt once for a set of sequences, starting after the part found in the prefix cache."""

    prompt: list[int]
    fed: int
    prompt_row: int
    prompt_logits: np.ndarray | None
    kv0: list[int]
    _chunk: int
    usage: Usage

    def _start_prefill(self, core: EngineView, seq_ids: list[int], source: Any) -> bool:
        """Share the cached part of the prompt with `seq_ids`; True when the whole prompt was cached together
        with its last logits, so sampling can start without evaluating anything."""
        n_prompt = len(self.prompt)
        self.prompt_logits = None
        reuse = 0
        if source is not None:
            if source.length >= n_prompt:
                self.prompt_logits = core.table.end_logits(source.seq_id, n_prompt - 1)
            reuse = n_prompt if self.prompt_logits is not None else min(source.length, n_prompt - 1)
        if reuse > 0:
            for seq_id in seq_ids:
                core.copy_prefix(source.seq_id, seq_id, reuse)
            core.table.touch(source.seq_id)
        self.fed = reuse
        self.kv0 = list(self.prompt[:reuse])
        core.table.track(seq_ids[0], self.kv0)
        self.usage.prompt_tokens_cached += reuse
        core.stats["prompt_tokens_cached"] += reuse
        return self.prompt_logits is not None

    def _add_prefill(self, batch: BatchBuilder, budget: int, seq_ids: list[int]) -> int:
        n_prompt = len(self.prompt)
        take = min(budget, n_prompt - self.fed)
        for pos in range(self.fed, self.fed + take):
            row = batch.add(self.prompt[pos], pos, seq_ids, pos == n_prompt - 1)
            if pos == n_prompt - 1:
                self.prompt_row = row
        self._chunk = take
        return take

    def _commit_prefill(self, core: EngineView) -> bool:
        """Returns True when this commit completed the prompt (its last logits are then kept)."""
        if not self._chunk:
            return False
        self.kv0.extend(self.prompt[self.fed : self.fed + self._chunk])
        self.fed += self._chunk
        self.usage.prompt_tokens_evaluated += self._chunk
        core.stats["prompt_tokens_evaluated"] += self._chunk
        self._chunk = 0
        if self.fed < len(self.prompt):
            return False
        self.prompt_logits = core.logits_row(self.prompt_row).copy()
        return True

    def _park_entry(self) -> tuple[int, np.ndarray] | None:
        if self.prompt_logits is None:
            return None
        return (len(self.prompt) - 1, self.prompt_logits)


@dataclass(frozen=True)
class GenerateRequest:
    """What a generate job is asked, one parameter list for GenerateJob and its speculative subclass."""

    prompt_text: str
    prompt: list[int]
    params: SamplingParams
    seeds: Sequence[int]
    grammar: str | None
    n_ctx_seq: int
    stream_tokens: bool
    cancel: CancelToken | None


class GenerateJob(PrefillMixin, Job):
    """N samples of one prompt: the prompt's KV cells are shared; each sample has its own sampler chain."""

    kind = "generate"

    def __init__(self, request: GenerateRequest) -> None:
        super().__init__(request.cancel)
        params, prompt, n_ctx_seq = request.params, request.prompt, request.n_ctx_seq
        self.prompt_text = request.prompt_text
        self.prompt = prompt
        self.params = params
        self.seeds = list(request.seeds)
        self.grammar = request.grammar
        self.n_ctx_seq = n_ctx_seq
        self.stream_tokens = request.stream_tokens
        self.samples: list[Sample] = []
        self._grammars: GrammarWorker | None = None
        """The child process holding each sample's grammar (keyed by sample index), when there is a grammar."""
        self._core: EngineView | None = None
        self._live: list[Sample] = []
        """Samples with a token to decode next step: each step's work is O(live samples), not O(n)."""
        self.fed = 0
        self.prompt_row = -1
        self.prompt_logits: np.ndarray | None = None
        self.kv0: list[int] = []
        self._chunk = 0
        self._max_stop = max((len(s) for s in params.stop if s), default=0)
        self._scratch = StatsScratch()
        self.usage.prompt_tokens = len(prompt)
        gen_room = max(0, min(params.max_tokens, n_ctx_seq - len(prompt)))
        self.reserve_cells = len(prompt) + len(self.seeds) * gen_room

    def needed_ids(self) -> int:
        return len(self.seeds)

    def needs_grammar(self) -> bool:
        return bool(self.grammar)

    def prefix_tokens(self) -> list[int]:
        return self.prompt

    def start(self, core: EngineView) -> None:
        source, self.seq_ids = acquire_with_source(core, self.prompt, len(self.seeds))
        history = self.prompt if self.params.repeat_penalty != 1.0 else ()
        for i, (seed, seq_id) in enumerate(zip(self.seeds, self.seq_ids, strict=True)):
            sampler = SequenceSampler(core.lib, core.model.vocab, self.params, seed, None, history)
            self.samples.append(
                Sample(i, seed, seq_id, sampler, logprobs=[] if self.params.logprobs is not None else None,
                       stats=TokenStats() if self.params.token_stats or self.params.confidence_stop else None,
                       window=ConfidenceWindow(*self.params.confidence_stop) if self.params.confidence_stop
                       else None)
            )
        if self.grammar:
            self._core = core
            self._grammars = core.grammar_pool.lease(self._is_cancelled)
            for sample in self.samples:
                self._grammars.new(sample.index, self.grammar, self._is_cancelled)
        cached_whole = self._start_prefill(core, self.seq_ids, source)
        self.reserve_cells -= self.fed
        if cached_whole:
            self._prompt_done(core)

    def add_decode_tokens(self, batch: BatchBuilder) -> None:
        if self._grammars is not None:
            self._draw_answered()
        n_prompt = len(self.prompt)
        for sample in self._live:
            if sample.pending >= 0:
                sample.row = batch.add(sample.pending, n_prompt + len(sample.tokens) - 1, (sample.seq_id,), True)

    def add_prompt_tokens(self, batch: BatchBuilder, budget: int) -> int:
        if self.fed >= len(self.prompt) or budget <= 0:
            return 0
        return self._add_prefill(batch, budget, self.seq_ids)

    def rollback(self) -> None:
        self._chunk = 0

    def commit(self, core: EngineView) -> None:
        started = time.perf_counter()
        if self._commit_prefill(core):
            self._prompt_done(core)
        else:
            for sample in self._live:
                if sample.pending >= 0:
                    if sample.index == 0:
                        self.kv0.append(sample.pending)
                    sample.pending = -1
                    if self._waits_for_grammar():
                        self._ask_grammar(sample, core.logits_row(sample.row).copy())
                    else:
                        self._sample_next(core, sample, sample.row)
            self._live = [s for s in self._live if s.pending >= 0 or s.waiting is not None]
        self.usage.decode_s += time.perf_counter() - started

    def _prompt_done(self, core: EngineView) -> None:
        """Every sample draws its first token from the prompt's last logits (kept as a copy)."""
        for sample in self.samples:
            if self.params.max_tokens == 0:
                self._finish(core, sample, "length")
            elif self._waits_for_grammar():
                assert self.prompt_logits is not None
                self._ask_grammar(sample, self.prompt_logits)
            else:
                self._sample_next(core, sample, -1)
        self._live = [s for s in self.samples if s.pending >= 0 or s.waiting is not None]

    def _check_done(self) -> None:
        if self.fed == len(self.prompt) and all(s.finish for s in self.samples):
            self.done = True

    def _waits_for_grammar(self) -> bool:
        """Whether grammar answers are awaited across engine steps; a subclass with its own commit (the
        speculative job, which draws its draft rows in order) waits for each one in place."""
        return self._grammars is not None and type(self).commit is GenerateJob.commit

    def _ask_grammar(self, sample: Sample, logits: np.ndarray) -> None:
        """Ask the grammar process which tokens may come next, and go on: the engine decodes other requests while
        it works, and add_decode_tokens draws the sample once it has answered."""
        assert self._grammars is not None
        self._grammars.ask_mask(sample.index)
        sample.waiting = logits

    def _draw_answered(self) -> None:
        """Draw every waiting sample whose grammar answer has come (a BackendError once one is too late)."""
        assert self._grammars is not None and self._core is not None
        for sample in self._live:
            if sample.waiting is None:
                continue
            allowed = self._grammars.poll(sample.index, sample.waiting.shape[0])
            if allowed is not None:
                logits, sample.waiting = sample.waiting, None
                self._sample_next(self._core, sample, -1, drawn=(self._draw_allowed(sample, logits, allowed), logits))
        self._live = [s for s in self._live if s.pending >= 0 or s.waiting is not None]

    def _sample_next(self, core: EngineView, sample: Sample, row: int,
                     drawn: tuple[int, np.ndarray] | None = None) -> None:
        """Sample from batch row `row`, or from the saved prompt logits when row is -1; or take a token already
        `drawn` (with the logits it was drawn from)."""
        if drawn is not None:
            token = drawn[0]
        elif self._grammars is not None:
            token = self._grammar_sample(core, sample, self.prompt_logits if row < 0 else core.logits_row(row))
        elif row < 0:
            assert self.prompt_logits is not None
            token = sample.sampler.sample_logits(self.prompt_logits)
        else:
            token = sample.sampler.sample(core.ctx, row)
        if core.model.is_eog(token):
            self._finish(core, sample, "eog")
            return
        if sample.logprobs is not None:
            logits = drawn[1] if drawn is not None else self.prompt_logits if row < 0 else core.logits_row(row)
            entry = TokenLogprob(core.model.piece_text(token), log_softmax_at(logits, token))
            if self.params.logprobs:
                entry.top = [(core.model.piece_text(t), lp) for t, lp in top_logprobs(logits, self.params.logprobs)]
            sample.logprobs.append(entry)
        if sample.stats is not None:
            logits = drawn[1] if drawn is not None else self.prompt_logits if row < 0 else core.logits_row(row)
            sample.stats.add(*token_statistics(logits, token, scratch=self._scratch))
        sample.tokens.append(token)
        self.usage.completion_tokens += 1
        core.stats["completion_tokens"] += 1
        piece = sample.decoder.decode(core.model.piece(token))
        sample.text += piece
        if self._max_stop and self._check_stop(sample, len(piece)):
            self._finish(core, sample, "stop")
            return
        if sample.window is not None and sample.stats is not None and sample.window.push(sample.stats.confidence[-1]):
            sample.text += sample.decoder.decode(b"", final=True)
            self._finish(core, sample, "low_confidence")
            return
        if len(sample.tokens) >= self.params.max_tokens or len(self.prompt) + len(sample.tokens) >= self.n_ctx_seq:
            sample.text += sample.decoder.decode(b"", final=True)
            self._finish(core, sample, "length")
            return
        if self._grammars is not None:
            self._grammars.accept(sample.index, token)
        sample.pending = token
        self._emit(sample, final=False)

    def _is_cancelled(self) -> str | None:
        """Why the request was cancelled (the grammar child's waits watch it), or None while it goes on."""
        if not self.cancelled:
            return None
        return (self.cancel.reason if self.cancel is not None else "") or "cancelled"

    def _grammar_sample(self, core: EngineView, sample: Sample, logits: np.ndarray | None) -> int:
        """Draw under the grammar: the child process says which tokens may come next (while cancel and the
        per-token time limit are watched), the rest of the chain draws from the logits of those alone."""
        assert self._grammars is not None and logits is not None
        return self._draw_allowed(sample, logits, self._grammars.allowed(sample.index, logits.shape[0],
                                                                          self._is_cancelled))

    @staticmethod
    def _draw_allowed(sample: Sample, logits: np.ndarray, allowed: np.ndarray) -> int:
        """The rest of the chain draws from the logits of the allowed tokens alone."""
        if not allowed.any():
            raise BackendError("The grammar allows no token here (no way forward, and it cannot end yet).")
        return sample.sampler.sample_logits(np.where(allowed, logits, -np.inf).astype(np.float32))

    def _check_stop(self, sample: Sample, new_chars: int) -> bool:
        """Cut the text at the first stop string that the newest piece completed."""
        window_start = max(0, len(sample.text) - new_chars - self._max_stop + 1)
        window = sample.text[window_start:]
        cut = -1
        for stop in self.params.stop:
            if stop:
                at = window.find(stop)
                if at >= 0 and (cut < 0 or at < cut):
                    cut, sample.stop = at, stop
        if cut < 0:
            return False
        sample.text = sample.text[: window_start + cut]
        return True

    def _emit(self, sample: Sample, final: bool) -> None:
        """Stream text that can no longer turn into a stop string."""
        if not self.stream_tokens:
            return
        safe = len(sample.text)
        if not final and self._max_stop:
            for stop in self.params.stop:
                for k in range(min(len(stop) - 1, len(sample.text)), 0, -1):
                    if sample.text.endswith(stop[:k]):
                        safe = min(safe, len(sample.text) - k)
                        break
        if safe > sample.emitted:
            self.events.put(("token", sample.index, sample.text[sample.emitted : safe]))
            sample.emitted = safe

    def _finish(self, core: EngineView, sample: Sample, reason: str) -> None:
        self._finish_sample(core, sample, reason)
        self._check_done()

    def _finish_sample(self, core: EngineView, sample: Sample, reason: str) -> None:
        sample.finish = reason
        sample.pending = -1
        sample.time_s = time.perf_counter() - self.submitted
        self._emit(sample, final=True)
        sample.sampler.free()
        if self._grammars is not None:
            self._grammars.free(sample.index)
        if sample.index != 0:  # free the sample's own cells now; sample 0 keeps the prompt for parking
            core.table.release(sample.seq_id)
            self.seq_ids = [s for s in self.seq_ids if s != sample.seq_id]

    def result(self) -> GenerateResult:
        completions = [
            Completion(
                text=s.text,
                finish_reason=s.finish or "cancelled",
                seed=s.seed,
                tokens=list(s.tokens),
                logprobs=s.logprobs,
                token_stats=s.stats,
                completion_tokens=len(s.tokens),
                prompt_tokens=len(self.prompt),
                time_s=s.time_s,
                stop=s.stop,
            )
            for s in self.samples
        ]
        return GenerateResult(prompt_text=self.prompt_text, completions=completions, usage=self.usage)

    def release(self, core: EngineView, park: bool) -> None:
        for sample in self.samples:
            sample.sampler.free()
        if self._grammars is not None:
            core.grammar_pool.give_back(self._grammars)
            self._grammars = None
        for seq_id in self.seq_ids:
            if park and seq_id == self.samples[0].seq_id:
                core.table.park(seq_id, self.kv0, self._park_entry())
            else:
                core.table.release(seq_id)
        self.seq_ids = []


class ForkedContinuationsMixin:
    """Continuations forked off an evaluated prefix, each on its own sequence sharing the prefix's KV cells:
    started as sequences free up (the job's spare first), recycled once fed, the prefix's sequence parked on
    release. A job says how many tokens of continuation i it feeds (`_feed_len`; 0 or less: none)."""

    prompt: list[int]
    conts: list[list[int]]
    seq_ids: list[int]
    kv0: list[int]
    _next_cont: int
    _running: dict[int, list[int]]  # continuation index -> [seq_id, fed]
    _spare_id: int
    _own_free: list[int]

    def _feed_len(self, index: int) -> int:
        raise NotImplementedError

    def _recycle(self, core: EngineView, seq_id: int) -> None:
        core.remove_seq_cells(seq_id)
        if seq_id == self._spare_id:
            self._own_free.append(seq_id)
        else:
            core.table.release(seq_id)
            self.seq_ids.remove(seq_id)

    def _launch(self, core: EngineView) -> None:
        """Start continuations on free sequences (the job's spare, plus any the table can spare now)."""
        n_prefix = len(self.prompt)
        while self._next_cont < len(self.conts):
            index = self._next_cont
            if self._feed_len(index) <= 0:  # nothing to feed: every read is at the prefix's end
                self._next_cont += 1
                continue
            if self._own_free:
                seq_id = self._own_free.pop()
            elif core.table.n_free > core.reserved_free_ids():
                seq_id = core.table.acquire(1)[0]
                self.seq_ids.append(seq_id)
            else:
                break
            core.copy_prefix(self.seq_ids[0], seq_id, n_prefix)
            self._running[index] = [seq_id, 0]
            self._next_cont += 1

    def release(self, core: EngineView, park: bool) -> None:
        for seq_id in self.seq_ids:
            if park and seq_id == self.seq_ids[0]:
                core.table.park(seq_id, self.kv0, self._park_entry())  # type: ignore[attr-defined]
            else:
                core.table.release(seq_id)
        self.seq_ids = []


class ScoreJob(ForkedContinuationsMixin, PrefillMixin, Job):
    """Log-likelihoods of continuations after one prefix, or the next-token distribution over choices.
    The prefix is evaluated once; each continuation runs on its own sequence that shares the prefix cells."""

    kind = "score"

    def __init__(
        self, prefix: list[int], continuations: list[list[int]], first_token_only: bool, labels: Sequence[str],
        cancel: CancelToken | None,
    ) -> None:
        super().__init__(cancel)
        self.prompt = prefix
        self.conts = continuations
        self.first_token_only = first_token_only
        self.labels = list(labels)
        self.fed = 0
        self.prompt_row = -1
        self.prompt_logits: np.ndarray | None = None
        self.kv0: list[int] = []
        self._chunk = 0
        self.token_lps: list[list[float]] = [[] for _ in continuations]
        self._next_cont = 0
        self._running: dict[int, list[int]] = {}  # continuation index -> [seq_id, fed]
        self._rows: list[tuple[int, int, int]] = []  # (cont index, position in continuation, batch row)
        self._spare_id = -1
        self._own_free: list[int] = []
        self.usage.prompt_tokens = len(prefix) + sum(len(c) for c in continuations)
        self.reserve_cells = len(prefix) + (0 if first_token_only else sum(max(0, len(c) - 1) for c in continuations))

    def needed_ids(self) -> int:
        return 1 if self.first_token_only else 2

    def prefix_tokens(self) -> list[int]:
        return self.prompt

    def start(self, core: EngineView) -> None:
        source, self.seq_ids = acquire_with_source(core, self.prompt, self.needed_ids())
        if not self.first_token_only:
            self._spare_id = self.seq_ids[1]
            self._own_free = [self._spare_id]
        cached_whole = self._start_prefill(core, self.seq_ids[:1], source)
        self.reserve_cells -= self.fed
        if cached_whole:
            self._prefix_done(core)

    def add_prompt_tokens(self, batch: BatchBuilder, budget: int) -> int:
        if budget <= 0:
            return 0
        if self.fed < len(self.prompt):
            return self._add_prefill(batch, budget, self.seq_ids[:1])
        return self._add_continuations(batch, budget)

    def _add_continuations(self, batch: BatchBuilder, budget: int) -> int:
        added = 0
        self._rows = []
        n_prefix = len(self.prompt)
        for index, (seq_id, fed) in list(self._running.items()):
            cont = self.conts[index]
            take = min(budget - added, len(cont) - 1 - fed, batch.outputs_left())
            for j in range(fed, fed + take):
                self._rows.append((index, j + 1, batch.add(cont[j], n_prefix + j, (seq_id,), True)))
            added += max(take, 0)
            if added >= budget or batch.outputs_left() <= 0:
                break
        return added

    def rollback(self) -> None:
        self._chunk = 0
        self._rows = []

    def commit(self, core: EngineView) -> None:
        if self._commit_prefill(core):
            self._prefix_done(core)
        elif self._rows:
            for index, position, row in self._rows:
                self.token_lps[index].append(log_softmax_at(core.logits_row(row), self.conts[index][position]))
                self._running[index][1] += 1
                self.usage.prompt_tokens_evaluated += 1
                core.stats["prompt_tokens_evaluated"] += 1
            self._rows = []
            for index, (seq_id, fed) in list(self._running.items()):
                if fed >= self._feed_len(index):
                    del self._running[index]
                    self._recycle(core, seq_id)
            self._launch(core)
            self._check_done()

    def _prefix_done(self, core: EngineView) -> None:
        assert self.prompt_logits is not None
        for i, cont in enumerate(self.conts):
            if cont:
                self.token_lps[i].append(log_softmax_at(self.prompt_logits, cont[0]))
        if not self.first_token_only:
            self._launch(core)
        self._check_done()

    def _check_done(self) -> None:
        if self.fed == len(self.prompt) and (self.first_token_only or self._all_scored()):
            self.done = True

    def _all_scored(self) -> bool:
        return self._next_cont >= len(self.conts) and not self._running

    def _feed_len(self, index: int) -> int:
        return len(self.conts[index]) - 1  # its first token was scored from the prefix row

    def result(self) -> ScoreResult | ChoiceResult:
        if self.first_token_only:
            return ChoiceResult(
                logprobs={label: lps[0] for label, lps in zip(self.labels, self.token_lps, strict=True)},
                usage=self.usage,
            )
        scores = [ContinuationScore(logprob=float(sum(lps)), n_tokens=len(lps), token_logprobs=lps)
                  for lps in self.token_lps]
        return ScoreResult(scores=scores, usage=self.usage)



def acquire_with_source(core: EngineView, prompt: list[int], n_ids: int) -> tuple[Any, list[int]]:
    """The best cached prefix for `prompt` and `n_ids` fresh sequence ids (giving up the prefix when its
    parked sequence is the only id left to evict)."""
    source = core.table.longest_prefix(prompt)
    try:
        return source, core.table.acquire(n_ids, keep=source.seq_id if source else None)
    except BackendError:
        return None, core.table.acquire(n_ids)


def check_fits(n_tokens: int, n_ctx_seq: int, what: str) -> None:
    if n_tokens >= n_ctx_seq:
        raise BackendError(
            f"Context overflow: the {what} is {n_tokens} tokens but the model's context holds {n_ctx_seq} "
            "(prompt plus at least one generated token). Shorten the input, or raise n_ctx in the model settings."
        )
