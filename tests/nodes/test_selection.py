"""Hand-computed cases of the selection algorithms (GenSelect picks, tournament brackets), Borda weighting and
self-certainty's arithmetic (exact from a full distribution, approximated from top logprobs)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backends.base import TokenLogprob
from backends.token_stats import approx_self_certainty, approx_token_stats, token_statistics
from nodes.algorithms.confidence import sample_self_certainty
from nodes.algorithms.selection import (
    Match,
    answer_support,
    judgement_orders,
    knockout_pairs,
    league_pairs,
    league_standings,
    majority_pick,
    parse_pair_winner,
    parse_pick,
    pick_from_order,
    split_groups,
)
from nodes.algorithms.voting import borda_weights, weighted_vote

KL_HALF_QUARTERS = math.log(32 / 27) / 3
"""KL(uniform || (1/2, 1/4, 1/4)) = 1/3 (log(2/3) + 2 log(4/3)) = log(32/27) / 3 = 0.05663 nats."""


@pytest.mark.parametrize(("text", "count", "expected"), [
    ("Candidate 2 repeats the sum wrongly.\nBest: 3", 3, 2),
    ("The best candidate is Candidate 1.", 4, 0),
    ("Judgment: 2", 2, 1),
    ("so the answer is \\boxed{4}", 4, 3),
    ("Candidate 3 is the best one here.", 3, 2),
    ("<think>Best: 1 maybe</think>\nBest: 2", 2, 1),  # only what follows the thinking counts
    ("Best: 1 ... on reflection, Best: 2", 2, 1),  # the last statement wins
    ("Best: 7", 3, None),  # out of range
    ("They all look fine to me.", 3, None),
    ("The best approach is 2 steps. Best: 1", 3, 0),
])
def test_parse_pick(text: str, count: int, expected: int | None) -> None:
    assert parse_pick(text, count) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("A is shorter but wrong.\nWinner: B", "B"),
    ("WINNER: A", "A"),
    ("The winner is a response that adds correctly.", None),  # lower-case "a" is an article, not a verdict
    ("**Winner:** Response A", "A"),
    ("Response B is better because it adds correctly.", "B"),
    ("The better response is: A", "A"),
    ("<think>Winner: A</think>Winner: B", "B"),
    ("Both are fine.", None),
])
def test_parse_pair_winner(text: str, expected: str | None) -> None:
    assert parse_pair_winner(text) == expected


def test_majority_pick_counts_picks_and_breaks_ties_by_support_then_index() -> None:
    assert majority_pick([2, 0, 2, None]) == (2, [])
    assert majority_pick([None, None]) == (None, [])
    assert majority_pick([3, 1]) == (1, [1, 3])  # no support given: the lower index
    assert majority_pick([1, 3], support=[0, 1, 0, 4]) == (3, [3, 1])  # #3's answer is shared by 4


def test_split_groups_makes_the_fewest_even_groups() -> None:
    assert split_groups(list(range(10)), 4) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert split_groups([5, 6, 7], 8) == [[5, 6, 7]]
    assert split_groups(list(range(9)), 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert split_groups([], 3) == []
    with pytest.raises(ValueError):
        split_groups([1], 0)


def test_brackets() -> None:
    assert knockout_pairs([0, 1, 2, 3, 4]) == ([(0, 1), (2, 3)], 4)
    assert knockout_pairs([5, 2]) == ([(5, 2)], None)
    assert league_pairs([0, 1, 2]) == [(0, 1), (0, 2), (1, 2)]
    assert judgement_orders(3) == [False, True, False]
    with pytest.raises(ValueError, match="at least 1"):
        judgement_orders(0)
    assert pick_from_order("A", 4, 7, swapped=False) == 4
    assert pick_from_order("A", 4, 7, swapped=True) == 7
    assert pick_from_order(None, 4, 7, swapped=True) is None


def test_match_winner_and_ties() -> None:
    assert Match(0, 1, [1, 1]).winner() == 1
    split = Match(0, 1, [0, 1])  # position bias both ways
    assert split.tied() and split.winner() == 0 and split.winner(support=[1, 3]) == 1
    assert Match(2, 5, [None, None]).winner() == 2


def test_league_standings_rank_by_judgements_won() -> None:
    # 0 beats 1 twice, 2 beats 0 once of two (tie), 2 beats 1 twice: wins 0: 3, 1: 0, 2: 3; matches won 0: 1, 2: 1
    matches = [Match(0, 1, [0, 0]), Match(0, 2, [0, 2]), Match(1, 2, [2, 2])]
    table = league_standings([0, 1, 2], matches)
    assert [(r["index"], r["wins"], r["matches_won"], r["played"]) for r in table] == [
        (0, 3, 1, 2), (2, 3, 1, 2), (1, 0, 0, 2)]
    assert league_standings([0, 1, 2], matches, support=[1, 1, 2])[0]["index"] == 2


def test_answer_support() -> None:
    assert answer_support(["7", None, "7", "3"]) == [2, 0, 2, 1]


def test_borda_weights_and_the_weighted_vote_with_power() -> None:
    scores = [0.9, 0.1, 0.5, None]
    assert borda_weights(scores, 1) == [3.0, 1.0, 2.0, 0.0]
    assert borda_weights(scores, 2) == [9.0, 1.0, 4.0, 0.0]
    assert borda_weights(scores, 0) == [1.0, 1.0, 1.0, 0.0]  # p = 0: majority
    assert borda_weights([0.5, 0.5, 0.1], 1) == [3.0, 3.0, 1.0]  # equal scores share the better rank
    answers = ["a", "b", "b"]
    raw = weighted_vote(answers, [0.9, 0.2, 0.3])
    assert raw.answer == "a" and raw.detail == {}  # 0.9 against 0.5
    borda = weighted_vote(answers, [0.9, 0.2, 0.3], power=1)  # 3 against 1 + 2: a tie, the larger count wins
    assert borda.answer == "b" and borda.detail["weights"] == [3.0, 1.0, 2.0]
    assert weighted_vote(answers, [0.9, 0.2, 0.3], power=2).answer == "a"  # 9 against 1 + 4
    with pytest.raises(ValueError):
        borda_weights(scores, -1)


def test_self_certainty_of_a_known_distribution() -> None:
    logits = np.log(np.array([0.5, 0.25, 0.25], dtype=np.float32)) + 3.0  # any shift: logits, not logprobs
    *_, certainty = token_statistics(logits, 0)
    assert certainty == pytest.approx(KL_HALF_QUARTERS, abs=1e-6)
    *_, flat = token_statistics(np.zeros(5, dtype=np.float32), 1)
    assert flat == pytest.approx(0.0, abs=1e-6)  # the uniform distribution: no certainty at all
    masked = np.array([0.0, -np.inf, 0.0], dtype=np.float32)  # a masked token: the rest is measured, finitely
    with np.errstate(invalid="ignore"):
        assert math.isfinite(token_statistics(masked, 0)[3])


def test_self_certainty_approximated_from_top_logprobs() -> None:
    # top-1 of (1/2, 1/4, 1/4): the rest spread evenly is the true rest, so the approximation is exact
    assert approx_self_certainty([math.log(0.5)], 3) == pytest.approx(KL_HALF_QUARTERS)
    with pytest.raises(ValueError):
        approx_self_certainty([math.log(0.5)], 1)
    stats = approx_token_stats([TokenLogprob("x", math.log(0.5), [("x", math.log(0.5))])], vocab_size=3)
    assert stats is not None and stats.approximate
    assert stats.self_certainty == pytest.approx([KL_HALF_QUARTERS])
    # entropy of (1/2, 1/4, 1/4) = 1.5 log 2; DeepConf's confidence of the top-1 = -log(1/2)
    assert stats.entropy == pytest.approx([1.5 * math.log(2)]) and stats.confidence == pytest.approx([math.log(2)])
    assert approx_token_stats([TokenLogprob("x", -0.1, [])]) is None  # no alternatives, nothing to approximate


def test_sample_self_certainty() -> None:
    assert sample_self_certainty({"self_certainty": [1.0, 2.0, 6.0], "confidence": [1, 1, 1]}) == 3.0
    assert sample_self_certainty({"logprob": [], "confidence": [], "entropy": []}) is None  # no tokens
    with pytest.raises(KeyError):
        sample_self_certainty({"logprob": [-0.1], "confidence": [2.0], "entropy": [0.3]})
    with pytest.raises(ValueError):
        sample_self_certainty({"self_certainty": [float("nan")]})
