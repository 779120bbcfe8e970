"""The drafting side of speculative decoding, by hand-computed cases: n-gram lookup over own output, siblings
and prompt, and the adaptive draft length."""

from __future__ import annotations

from backends.llama.worker.speculative import ADAPTIVE_MIN_RATE, DraftLength, NgramPool


def test_lookup_finds_the_continuation_in_the_prompt() -> None:
    assert NgramPool([1, 2, 3, 4, 5, 6], n=2, n_samples=1).draft(0, [9, 2, 3], k=3) == [4, 5, 6]
    assert NgramPool([1, 2, 3, 4, 5, 6], n=2, n_samples=1).draft(0, [7, 8], k=3) == []


def test_output_after_the_prompt_is_a_source_too() -> None:
    pool = NgramPool([1, 2, 5, 6], n=2, n_samples=1)
    assert pool.draft(0, [9, 7, 5, 6], k=3) == [9, 7, 5]  # (5, 6) ended the prompt and was followed by 9, 7 ...


def test_the_key_reaches_back_into_the_prompt() -> None:
    pool = NgramPool([1, 2, 3, 4, 1, 2], n=3, n_samples=1)
    assert pool.draft(0, [3], k=2) == [4, 1]  # key (1, 2, 3): two prompt tokens and the first output token


def test_own_output_comes_before_siblings_and_prompt() -> None:
    pool = NgramPool([5, 6, 70, 71], n=2, n_samples=2)
    pool.update(1, [5, 6, 80, 81])
    assert pool.draft(0, [5, 6], k=2) == [80, 81]  # the sibling's match beats the prompt's
    assert pool.draft(0, [5, 6, 90, 91, 5, 6], k=2) == [90, 91]  # its own earlier output beats both


def test_the_latest_match_wins_and_k_bounds_the_draft() -> None:
    pool = NgramPool([1, 2, 10, 1, 2, 20, 21, 22], n=2, n_samples=1)
    assert pool.draft(0, [1, 2], k=2) == [20, 21]
    assert pool.draft(0, [1, 2], k=0) == []


def test_fixed_length_never_changes() -> None:
    length = DraftLength(4, adaptive=False)
    length.update(4, 0)
    assert length.next() == 4


def test_adaptive_length_grows_on_success_shrinks_on_failure_and_pauses() -> None:
    length = DraftLength(6, adaptive=True)
    assert length.next() == 1
    length.update(1, 1)
    length.update(2, 2)
    length.update(3, 3)  # rate stays 1.0
    assert length.next() == 4
    length.update(4, 3)  # rate 0.7 + 0.3 * 3/4 = 0.925
    assert length.next() == 4
    length.update(4, 1)  # rate 0.6475 + 0.075 = 0.7225: below the floor
    assert length.rate == ADAPTIVE_MIN_RATE
    assert [length.next() for _ in range(2)] == [0, 0]  # paused for 2 steps
    assert length.next() == 2  # then it drafts again, one past what was accepted
    length.update(2, 0)  # rate 0.56: paused again, longer
    assert [length.next() for _ in range(4)] == [0, 0, 0, 0]
    assert length.next() == 1
