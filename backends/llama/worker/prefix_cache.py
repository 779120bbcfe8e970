"""Sequence-id bookkeeping for the engine's unified KV cache: free ids, what each sequence holds, and the
prefix cache of finished prompts kept resident (LRU-evicted by id pressure and a token budget)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from backends.base import BackendError


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token lists (binary search over C-speed slice compares)."""
    hi = min(len(a), len(b))
    if hi == 0 or a[0] != b[0]:
        return 0
    if a[:hi] == b[:hi]:
        return hi
    lo = 1  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class PrefixMatch:
    seq_id: int
    length: int


class SequenceTable:
    """Which sequence ids are free, which hold live KV (with the tokens at positions 0..k-1), and which are
    parked prompts kept for reuse. The engine thread is its only user; `remove_seq` drops a sequence's cells.

    Time is counted in tokens decoded (`advance`), not seconds: an idle parked prompt costs attention work on
    every decoded token (without flash attention every token attends over every used cell), so it expires
    once `expire_after` tokens were decoded since its last use, the point where keeping it has cost as much
    as evaluating it again would (ski rental). None keeps parked prompts until the budget or ids push them out."""

    def __init__(
        self, n_seq: int, budget_tokens: int, remove_seq: Callable[[int], None], expire_after: int | None = None
    ) -> None:
        self.n_seq = n_seq
        self.budget_tokens = budget_tokens
        self.expire_after = expire_after
        self.clock = 0
        """Tokens decoded so far (prompt and sampled, all sequences)."""
        self._remove_seq = remove_seq
        self._free = list(range(n_seq - 1, -1, -1))  # pop() hands out low ids first
        self.sources: dict[int, list[int]] = {}
        """seq id -> tokens in its KV: parked prompts and the first sequence of each running request."""
        self._parked: OrderedDict[int, int] = OrderedDict()  # seq id -> clock at last use, oldest first
        self._end_logits: dict[int, tuple[int, Any]] = {}
        """Parked seq id -> (position, logits row) of its prompt's last token: a request with exactly that
        prompt starts sampling at once, from the very numbers the first request saw."""
        self.evictions = 0
        self.expired = 0
        self._parked_tokens = 0

    # -- ids ------------------------------------------------------------------------------------------

    @property
    def n_free(self) -> int:
        return len(self._free)

    @property
    def n_parked(self) -> int:
        return len(self._parked)

    @property
    def parked_tokens(self) -> int:
        return self._parked_tokens

    def can_acquire(self, k: int) -> bool:
        return len(self._free) + len(self._parked) >= k

    def acquire(self, k: int, keep: int | None = None) -> list[int]:
        """k fresh (empty) sequence ids, evicting least-recently-used parked prompts if needed (never `keep`)."""
        while len(self._free) < k:
            if not self.evict_lru(keep):
                raise BackendError(f"No free sequence ids for {k} sequences; lower n or raise n_seq_max.")
        return [self._free.pop() for _ in range(k)]

    def release(self, seq_id: int) -> None:
        """Drop a sequence's cells and return its id."""
        self._remove_seq(seq_id)
        tokens = self.sources.pop(seq_id, None)
        if self._parked.pop(seq_id, None) is not None and tokens is not None:
            self._parked_tokens -= len(tokens)
        self._end_logits.pop(seq_id, None)
        self._free.append(seq_id)

    # -- prefix sources -------------------------------------------------------------------------------

    def track(self, seq_id: int, tokens: list[int]) -> None:
        """Offer a live sequence's KV (its token list, extended as tokens are committed) as a prefix source."""
        self.sources[seq_id] = tokens

    def park(self, seq_id: int, tokens: list[int], end_logits: tuple[int, Any] | None = None) -> None:
        """Keep a finished sequence's KV for later requests (with its prompt's last logits, if given); evict
        LRU parked prompts over the token budget."""
        if not tokens or self.budget_tokens <= 0:
            self.release(seq_id)
            return
        self.sources[seq_id] = tokens
        if end_logits is not None and end_logits[0] < len(tokens):
            self._end_logits[seq_id] = end_logits
        self._parked_tokens += len(tokens)
        self._parked[seq_id] = self.clock
        self._parked.move_to_end(seq_id)
        while self._parked and self.parked_tokens > self.budget_tokens:
            self.evict(next(iter(self._parked)))

    def end_logits(self, seq_id: int, position: int) -> Any:
        """The saved logits of `seq_id` at `position`, if it was parked with exactly those."""
        saved = self._end_logits.get(seq_id)
        return saved[1] if saved is not None and saved[0] == position else None

    def is_parked(self, seq_id: int) -> bool:
        return seq_id in self._parked

    def touch(self, seq_id: int) -> None:
        if seq_id in self._parked:
            self._parked[seq_id] = self.clock
            self._parked.move_to_end(seq_id)

    def advance(self, tokens: int) -> None:
        """Count `tokens` more decoded tokens and expire parked prompts idle for longer than expire_after."""
        self.clock += tokens
        if self.expire_after is None:
            return
        while self._parked:
            seq_id, last_use = next(iter(self._parked.items()))
            if self.clock - last_use <= self.expire_after:
                break
            self.expired += 1
            self.evict(seq_id)

    def evict(self, seq_id: int) -> None:
        self.evictions += 1
        self.release(seq_id)

    def evict_lru(self, keep: int | None = None) -> bool:
        """Evict the least recently used parked prompt other than `keep`; False if there is none."""
        victim = next((s for s in self._parked if s != keep), None)
        if victim is None:
            return False
        self.evict(victim)
        return True

    def evict_all_parked(self) -> int:
        victims = list(self._parked)
        for seq_id in victims:
            self.evict(seq_id)
        return len(victims)

    def longest_prefix(self, tokens: Sequence[int]) -> PrefixMatch | None:
        """The resident sequence sharing the longest prefix with `tokens` (None if nothing is shared)."""
        best: PrefixMatch | None = None
        for seq_id, held in self.sources.items():
            length = common_prefix_len(held, tokens)
            if length and (best is None or length > best.length):
                best = PrefixMatch(seq_id, length)
        return best
