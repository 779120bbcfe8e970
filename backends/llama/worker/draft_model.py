"""Speculative decoding's draft model: a second llama context mirroring each target sequence, drafting greedily."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np

from backends.base import BackendError
from backends.llama.worker.batch import BatchBuilder
from backends.llama.worker.llama_model import LlamaModel, capture_native_log
from backends.llama.worker.prefix_cache import common_prefix_len

log = logging.getLogger(__name__)


class DraftModel:
    """The draft side of `speculative: {method: draft}`: a second model with its own KV cache, one sequence per
    live target sequence (keyed by the caller). Each sequence remembers the tokens its KV holds; `propose` removes
    what no longer matches the target's tokens (rejected drafts), decodes what is missing and then drafts greedily.
    Every method runs on the engine thread."""

    def __init__(self, path: str | Path, n_gpu_layers: int, kv_size: int, n_seq_max: int, threads: int,
                 n_batch: int = 512) -> None:
        self.model = LlamaModel(path, n_gpu_layers=n_gpu_layers)
        self.lib = self.model._lib
        self.n_batch = max(n_batch, n_seq_max)
        params = self.lib.llama_context_default_params()
        params.n_ctx = kv_size
        params.n_batch = self.n_batch
        params.n_ubatch = self.n_batch
        params.n_seq_max = n_seq_max
        params.kv_unified = True
        params.n_threads = threads
        params.n_threads_batch = threads
        params.no_perf = True
        with capture_native_log():
            self.ctx = self.lib.llama_init_from_model(self.model.ptr, params)
        if not self.ctx:
            self.model.close()
            raise BackendError(f"llama.cpp could not create a {kv_size}-cell context for the draft model "
                               f"{self.model.path.name} (out of memory?).")
        self.mem = self.lib.llama_get_memory(self.ctx)
        self.batch = BatchBuilder(self.lib, self.n_batch, n_seq_max, max_outputs=self.n_batch)
        self._free = list(range(n_seq_max))
        self._seqs: dict[Hashable, tuple[int, list[int]]] = {}
        """Caller's key -> (draft sequence id, the tokens its KV cells hold, in order)."""
        self.decode_failures = 0
        self.tokens_shared = 0
        """Prompt tokens a new draft sequence copied from another instead of decoding them."""

    @property
    def n_vocab(self) -> int:
        return self.model.n_vocab

    def propose(self, requests: Sequence[tuple[Hashable, Sequence[int], int]]) -> list[list[int]]:
        """For each (key, the target sequence's tokens so far, k): up to k tokens the draft model predicts greedily
        after those tokens. Sequences whose key is new get a draft sequence (none when all are taken: no draft)."""
        drafts: list[list[int]] = [[] for _ in requests]
        live: list[int] = []
        for i, (key, tokens, k) in enumerate(requests):
            if k <= 0 or not tokens:
                continue
            if key not in self._seqs:
                if not self._free:
                    continue
                self._seqs[key] = (self._free.pop(), [])
            seq_id, have = self._seqs[key]
            keep = min(common_prefix_len(have, tokens), len(tokens) - 1)  # the last token is re-fed for its logits
            if keep < len(have):
                self.lib.llama_memory_seq_rm(self.mem, seq_id, keep, -1)
                del have[keep:]
            live.append(i)
        # catch up, in rounds: a new sequence sharing a prefix with one caught up in an earlier round (the samples of
        # one request share their prompt) copies those cells instead of decoding them again
        todo = live
        while todo:
            this_round, deferred = [], []
            for i in todo:
                key, tokens = requests[i][0], requests[i][1]
                if not self._seqs[key][1] and not self._share_prefix(key, tokens) and any(
                        common_prefix_len(requests[j][1], tokens) > 1 for j in this_round):
                    deferred.append(i)  # after the sequence it shares with, next round
                    continue
                this_round.append(i)
            if not self._catch_up(requests, this_round, drafts):
                return [[] for _ in requests]
            todo = deferred
        # k - 1 greedy steps, one token per still-drafting sequence per decode
        going = [i for i in live if drafts[i] and len(drafts[i]) < requests[i][2]]
        while going:
            self.batch.clear()
            rows: dict[int, int] = {}
            for i in going:
                seq_id, have = self._seqs[requests[i][0]]
                rows[i] = self.batch.add(drafts[i][-1], len(have), (seq_id,), True)
                have.append(drafts[i][-1])
            if not self._decode():
                return drafts  # what was drafted before the failure is still the model's prediction
            for i in going:
                drafts[i].append(self._argmax(rows[i]))
            going = [i for i in going if len(drafts[i]) < requests[i][2]]
        return drafts

    def _share_prefix(self, key: Hashable, tokens: Sequence[int]) -> bool:
        """Give the empty draft sequence of `key` the cells of the longest prefix of `tokens` another draft sequence
        holds (all but the last token: that one is fed for its logits); whether there was any."""
        best, best_len = None, 0
        for other, (other_id, other_have) in self._seqs.items():
            n = min(common_prefix_len(other_have, tokens), len(tokens) - 1)
            if other != key and n > best_len:
                best, best_len = other_id, n
        if best is None:
            return False
        seq_id, have = self._seqs[key]
        self.lib.llama_memory_seq_cp(self.mem, best, seq_id, 0, best_len)
        have.extend(tokens[:best_len])
        self.tokens_shared += best_len
        return True

    def _catch_up(self, requests: Sequence[tuple[Hashable, Sequence[int], int]], indices: list[int],
                  drafts: list[list[int]]) -> bool:
        """Decode the tokens each of `indices` is missing (in batch-sized pieces), the last one with logits, and
        put the greedy next token first in its draft."""
        pending = {i: list(requests[i][1][len(self._seqs[requests[i][0]][1]):]) for i in indices}
        while pending:
            self.batch.clear()
            last_rows: dict[int, int] = {}
            for i in list(pending):
                if self.batch.room() == 0:
                    break
                seq_id, have = self._seqs[requests[i][0]]
                todo = pending[i]
                n = min(len(todo), self.batch.room())
                for j in range(n):
                    row = self.batch.add(todo[j], len(have), (seq_id,), j == len(todo) - 1)
                    have.append(todo[j])
                    if j == len(todo) - 1:
                        last_rows[i] = row
                if n == len(todo):
                    del pending[i]
                else:
                    pending[i] = todo[n:]
            if not self._decode():
                return False
            for i, row in last_rows.items():
                drafts[i].append(self._argmax(row))
        return True

    def _decode(self) -> bool:
        self.batch.batch.n_tokens = self.batch.n
        rc = self.lib.llama_decode(self.ctx, self.batch.batch)
        if rc != 0:
            self.decode_failures += 1
            log.warning("the draft model's decode failed (code %s); dropping its sequences", rc)
            for key in list(self._seqs):
                self.release(key)
            return False
        return True

    def _argmax(self, row: int) -> int:
        ptr = self.lib.llama_get_logits_ith(self.ctx, row)
        if not ptr:
            raise BackendError(f"llama.cpp returned no draft logits for batch row {row}")
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,))))

    def release(self, key: Hashable) -> None:
        """Forget the draft sequence of `key` (its target sequence finished)."""
        entry = self._seqs.pop(key, None)
        if entry is not None:
            self.lib.llama_memory_seq_rm(self.mem, entry[0], -1, -1)
            self._free.append(entry[0])

    def close(self) -> None:
        self.batch.free()
        if self.ctx:
            self.lib.llama_free(self.ctx)
            self.ctx = None
        self.model.close()
