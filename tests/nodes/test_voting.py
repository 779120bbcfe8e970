"""Voting rules with hand-computed outcomes: ties, empty sets, unscored and no-answer candidates."""

from __future__ import annotations

import pytest

from nodes.algorithms.voting import best_of_n, build_clusters, majority_vote, threshold_vote, weighted_vote


def test_majority_counts_and_orders_clusters() -> None:
    vote = majority_vote(["7", "8", "7", None, "7", "8"])
    assert vote.answer == "7"
    assert vote.winner == 0
    assert [(c.answer, c.members) for c in vote.clusters] == [("7", [0, 2, 4]), ("8", [1, 5])]
    assert vote.no_answer == [3]
    assert vote.total == 6
    assert vote.ties == []


def test_majority_tie_goes_to_the_first_seen_answer_and_is_reported() -> None:
    vote = majority_vote(["b", "a", "a", "b"])
    assert vote.answer == "b"
    assert vote.ties == ["b", "a"]
    assert vote.tie_break


def test_no_answer_candidates_never_win() -> None:
    vote = majority_vote([None, None, None, "5"])
    assert vote.answer == "5"
    assert vote.winner == 3
    assert len(vote.no_answer) == 3


def test_empty_and_all_no_answer_sets() -> None:
    empty = majority_vote([])
    assert (empty.answer, empty.winner, empty.total) == (None, None, 0)
    none = majority_vote([None, None])
    assert none.answer is None and none.no_answer == [0, 1] and none.total == 2
    assert best_of_n([], []).winner is None
    assert threshold_vote([], [], 0.5).answer is None


def test_weighted_vote_can_overturn_the_majority() -> None:
    # "7": 0.1 + 0.2 + 0.1 = 0.4; "8": 0.9 -> 8 wins although 7 has more votes
    vote = weighted_vote(["7", "7", "8", "7"], [0.1, 0.2, 0.9, 0.1])
    assert vote.answer == "8"
    assert vote.winner == 2
    assert vote.clusters[0].weight == pytest.approx(0.9)
    assert vote.clusters[1].weight == pytest.approx(0.4)


def test_weighted_tie_on_weight_goes_to_the_larger_cluster() -> None:
    vote = weighted_vote(["x", "y", "y"], [1.0, 0.5, 0.5])
    assert vote.answer == "y"
    assert set(vote.ties) == {"x", "y"}


def test_weighted_vote_treats_unscored_as_zero_and_checks_lengths() -> None:
    vote = weighted_vote(["a", "b"], [None, 0.1])
    assert vote.answer == "b"
    with pytest.raises(ValueError):
        weighted_vote(["a"], [0.1, 0.2])


def test_best_of_n_picks_argmax_with_lowest_index_on_ties() -> None:
    vote = best_of_n(["1", "2", "3"], [0.5, 0.9, 0.9])
    assert vote.winner == 1
    assert vote.answer == "2"
    assert vote.ties == ["1", "2"]
    assert best_of_n(["1", None], [0.1, 0.8]).answer is None  # the best may have no answer
    assert best_of_n(["1", "2"], [None, None]).winner is None


def test_threshold_accepts_first_passing_in_sampling_order() -> None:
    vote = threshold_vote(["1", "2", "3"], [0.2, 0.8, 0.95], 0.7)
    assert (vote.winner, vote.answer, vote.accepted) == (1, "2", True)
    assert vote.detail["passing"] == [1, 2]
    assert vote.detail["rejected"] == 1


def test_threshold_fallbacks() -> None:
    best = threshold_vote(["1", "2"], [0.2, 0.4], 0.9, fallback="best")
    assert (best.winner, best.accepted) == (1, False)
    none = threshold_vote(["1", "2"], [0.2, 0.4], 0.9, fallback="none")
    assert (none.winner, none.answer, none.accepted) == (None, None, False)


def test_clusters_handle_unicode_answers() -> None:
    clusters = build_clusters(["café", "東京", "café"])
    assert [(c.answer, c.count) for c in clusters] == [("café", 2), ("東京", 1)]


def test_vote_json_adds_up() -> None:
    data = majority_vote(["1", None, "1", "2"]).to_json()
    assert sum(c["count"] for c in data["clusters"]) + data["no_answer_count"] == data["total"] == 4
