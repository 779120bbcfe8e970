"""Sequence-id bookkeeping and the prefix cache's matching and LRU eviction (no model needed)."""

from __future__ import annotations

import pytest

from backends.base import BackendError
from backends.llama.worker.prefix_cache import SequenceTable, common_prefix_len


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([], [1], 0), ([1, 2, 3], [1, 2, 3], 3), ([1, 2, 3], [1, 2], 2), ([1, 2, 3, 4], [1, 2, 9, 4], 2),
     ([5], [6], 0), (list(range(1000)), [*range(777), -1], 777)],
)
def test_common_prefix_len(a: list[int], b: list[int], expected: int) -> None:
    assert common_prefix_len(a, b) == expected == common_prefix_len(b, a)


def make_table(n_seq: int = 4, budget: int = 100) -> tuple[SequenceTable, list[int]]:
    removed: list[int] = []
    return SequenceTable(n_seq, budget, removed.append), removed


def test_acquire_and_release_ids() -> None:
    table, removed = make_table()
    ids = table.acquire(3)
    assert ids == [0, 1, 2] and table.n_free == 1
    table.release(1)
    assert removed == [1] and table.n_free == 2
    with pytest.raises(BackendError, match="No free sequence ids"):
        table.acquire(3)


def test_longest_prefix_finds_live_and_parked_sequences() -> None:
    table, _ = make_table()
    a, b = table.acquire(2)
    table.track(a, [1, 2, 3, 4])
    table.park(b, [1, 2, 7])
    match = table.longest_prefix([1, 2, 3, 9])
    assert (match.seq_id, match.length) == (a, 3)
    assert table.longest_prefix([8, 8]) is None


def test_parked_prompts_are_evicted_lru_for_ids_and_budget() -> None:
    table, removed = make_table(n_seq=3, budget=10)
    first, second, third = table.acquire(3)
    table.park(first, [1] * 4)
    table.park(second, [2] * 4)
    table.touch(first)  # first is now the most recently used
    table.park(third, [3] * 4)  # 12 tokens > budget 10: the least recently used (second) goes
    assert removed == [second] and table.parked_tokens == 8 and table.n_parked == 2
    assert sorted(table.acquire(2, keep=third)) == sorted([second, first])  # evicts first, never third
    assert table.n_parked == 1 and table.evictions == 2


def test_end_logits_are_kept_only_for_their_position() -> None:
    table, _ = make_table()
    (seq,) = table.acquire(1)
    table.park(seq, [1, 2, 3], end_logits=(2, "row"))
    assert table.end_logits(seq, 2) == "row"
    assert table.end_logits(seq, 1) is None
    table.release(seq)
    assert table.end_logits(seq, 2) is None and table.parked_tokens == 0


def test_parked_prompts_expire_after_the_decoded_token_window() -> None:
    removed: list[int] = []
    table = SequenceTable(4, 1000, removed.append, expire_after=10)
    old, fresh = table.acquire(2)
    table.park(old, [1] * 5)
    table.advance(6)
    table.park(fresh, [2] * 5)
    table.advance(4)  # old: 10 tokens idle (kept), fresh: 4
    assert removed == [] and table.n_parked == 2
    table.advance(1)  # old: 11 > 10
    assert removed == [old] and table.expired == 1 and table.n_parked == 1
    table.touch(fresh)  # a reuse restarts its window
    table.advance(10)
    assert table.n_parked == 1
    table.advance(1)
    assert removed == [old, fresh] and table.expired == 2 and table.parked_tokens == 0


def test_without_a_window_parked_prompts_never_expire() -> None:
    table, removed = make_table()
    (seq,) = table.acquire(1)
    table.park(seq, [1, 2])
    table.advance(10**9)
    assert removed == [] and table.n_parked == 1 and table.clock == 10**9
