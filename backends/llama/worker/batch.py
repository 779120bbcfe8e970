"""The reusable llama_batch the engine fills each decode step: token, position, sequence ids, logits flag."""

from __future__ import annotations

from typing import Any


class BatchBuilder:
    """A reusable llama_batch: filled token by token each step, never reallocated."""

    def __init__(self, lib: Any, capacity: int, n_seq_max: int, max_outputs: int) -> None:
        self._lib = lib
        self.capacity = capacity
        self.max_outputs = max_outputs
        self.batch = lib.llama_batch_init(capacity, 0, n_seq_max)
        self._token = self.batch.token
        self._pos = self.batch.pos
        self._n_seq_id = self.batch.n_seq_id
        self._seq_id = self.batch.seq_id
        self._logits = self.batch.logits
        self.n = 0
        self.n_outputs = 0

    def clear(self) -> None:
        self.n = 0
        self.n_outputs = 0

    def room(self) -> int:
        return self.capacity - self.n

    def outputs_left(self) -> int:
        return self.max_outputs - self.n_outputs

    def add(self, token: int, pos: int, seq_ids: Any, logits: bool) -> int:
        i = self.n
        self._token[i] = token
        self._pos[i] = pos
        self._n_seq_id[i] = len(seq_ids)
        row = self._seq_id[i]
        for k, seq_id in enumerate(seq_ids):
            row[k] = seq_id
        self._logits[i] = 1 if logits else 0
        self.n = i + 1
        if logits:
            self.n_outputs += 1
        return i

    def free(self) -> None:
        if self.batch is not None:
            self.batch.n_tokens = 0
            self._lib.llama_batch_free(self.batch)
            self.batch = None
