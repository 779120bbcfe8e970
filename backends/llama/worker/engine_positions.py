"""A batched engine job reading the log-probabilities of a few tokens at many positions of many sequences
(process reward models: p(good) / p(bad) after every step of every candidate) in one pass, with the prefix
the sequences share evaluated once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from backends.base import CancelToken, StepLogprobsResult
from backends.engine_protocol import EngineView
from backends.llama.worker.batch import BatchBuilder
from backends.llama.worker.engine_jobs import (
    ForkedContinuationsMixin,
    Job,
    PrefillMixin,
    acquire_with_source,
    log_softmax_at,
)
from backends.llama.worker.prefix_cache import common_prefix_len


def logprobs_of(logits: np.ndarray, tokens: Sequence[int]) -> list[float]:
    """log p(t) of each token t under one untempered logits row."""
    return [log_softmax_at(logits, t) for t in tokens]


class PositionLogprobsJob(ForkedContinuationsMixin, PrefillMixin, Job):
    """Each continuation runs on its own sequence sharing the prefix's KV cells; only the rows at the asked
    positions produce logits (every other token is a plain forward pass), so the whole request costs one
    forward pass over prefix + continuations. `reads[i]` holds indices into continuation i whose next-token
    distribution is read (-1: the prefix's last token)."""

    kind = "positions"

    def __init__(self, prefix: list[int], continuations: list[list[int]], reads: list[list[int]],
                 token_ids: Sequence[int], labels: Sequence[str], cancel: CancelToken | None) -> None:
        super().__init__(cancel)
        self.prompt = prefix
        self.conts = continuations
        self.reads = reads
        self._read_sets = [set(r) for r in reads]
        self.token_ids = list(token_ids)
        self.labels = list(labels)
        self.fed = 0
        self.prompt_row = -1
        self.prompt_logits: np.ndarray | None = None
        self.kv0: list[int] = []
        self._chunk = 0
        self._need = [max(r, default=-1) + 1 for r in reads]
        """Tokens of continuation i that must be fed: up to its last read."""
        self.values: list[dict[int, list[float]]] = [{} for _ in continuations]
        self._next_cont = 0
        self._running: dict[int, list[int]] = {}  # continuation index -> [seq_id, fed]
        self._rows: list[tuple[int, int, int, bool]] = []  # (cont, index in cont, batch row or -1, read)
        self._spare_id = -1
        self._own_free: list[int] = []
        self.usage.prompt_tokens = len(prefix) + sum(self._need)
        self.reserve_cells = len(prefix) + sum(self._need)

    def needed_ids(self) -> int:
        return 2

    def prefix_tokens(self) -> list[int]:
        return self.prompt

    def start(self, core: EngineView) -> None:
        source, self.seq_ids = acquire_with_source(core, self.prompt, 2)
        self._spare_id = self.seq_ids[1]
        self._own_free = [self._spare_id]
        cached_whole = self._start_prefill(core, self.seq_ids[:1], source)
        self.reserve_cells -= self.fed
        if cached_whole:
            self._prefix_done(core)

    def add_prompt_tokens(self, batch: BatchBuilder, budget: int) -> int:
        if budget <= 0 or self.cancelled:  # a cancelled request feeds nothing more; the engine drops it next step
            return 0
        if self.fed < len(self.prompt):
            return self._add_prefill(batch, budget, self.seq_ids[:1])
        added = 0
        self._rows = []
        n_prefix = len(self.prompt)
        for index, (seq_id, fed) in list(self._running.items()):
            cont, reads = self.conts[index], self._read_sets[index]
            for j in range(fed, self._need[index]):
                read = j in reads
                if added >= budget or (read and batch.outputs_left() <= 0):
                    break
                row = batch.add(cont[j], n_prefix + j, (seq_id,), read)
                self._rows.append((index, j, row, read))
                added += 1
            if added >= budget or batch.outputs_left() <= 0:
                break
        return added

    def rollback(self) -> None:
        self._chunk = 0
        self._rows = []

    def commit(self, core: EngineView) -> None:
        if self._commit_prefill(core):
            self._prefix_done(core)
            return
        if not self._rows:
            return
        for index, j, row, read in self._rows:
            if read:
                self.values[index][j] = logprobs_of(core.logits_row(row), self.token_ids)
            self._running[index][1] += 1
        self.usage.prompt_tokens_evaluated += len(self._rows)
        core.stats["prompt_tokens_evaluated"] += len(self._rows)
        self._rows = []
        for index, (seq_id, fed) in list(self._running.items()):
            if fed >= self._feed_len(index):
                del self._running[index]
                self._recycle(core, seq_id)
        self._launch(core)
        self._check_done()

    def _prefix_done(self, core: EngineView) -> None:
        assert self.prompt_logits is not None
        for i, reads in enumerate(self._read_sets):
            if -1 in reads:
                self.values[i][-1] = logprobs_of(self.prompt_logits, self.token_ids)
        self._launch(core)
        self._check_done()

    def _check_done(self) -> None:
        if self.fed == len(self.prompt) and self._next_cont >= len(self.conts) and not self._running:
            self.done = True

    def _feed_len(self, index: int) -> int:
        return self._need[index]

    def result(self) -> StepLogprobsResult:
        out = []
        for values, reads in zip(self.values, self.reads, strict=True):
            out.append([dict(zip(self.labels, values[j], strict=True)) for j in reads])
        return StepLogprobsResult(logprobs=out, usage=self.usage)


def shared_prefix_len(sequences: Sequence[Sequence[int]], reads: Sequence[Sequence[int]]) -> int:
    """Tokens every sequence starts with, kept before each sequence's first read (so every read lands on the
    prefix's last token or after it)."""
    first = sequences[0]
    shared = min(min(r, default=len(s) - 1) + 1 for s, r in zip(sequences, reads, strict=True))
    for seq in sequences[1:]:
        shared = min(shared, common_prefix_len(first[:shared], seq))
    return shared
