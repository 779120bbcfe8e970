"""DeepConf's confidence measures, threshold and filtered vote, and CoT decoding's answer margin: hand-computed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backends.token_stats import ConfidenceWindow, token_statistics
from nodes.algorithms.confidence import (
    lowest_group,
    most_confident,
    online_threshold,
    quantile,
    sample_confidence,
    tail,
    vote_weights,
)
from nodes.algorithms.cot_decoding import answer_margin, answer_span, token_margin
from nodes.algorithms.voting import confidence_filter_vote, majority_vote

STATS = {"logprob": [-1.0, -3.0], "confidence": [3.0, 1.0, 2.0, 5.0], "entropy": [0.5, 1.5]}


def test_lowest_group_is_the_weakest_window() -> None:
    assert lowest_group([3.0, 1.0, 2.0, 5.0], 2) == 1.5  # windows 2.0, 1.5, 3.5
    assert lowest_group([3.0, 1.0, 2.0, 5.0], 1) == 1.0
    assert lowest_group([2.0, 4.0], 3) == 3.0  # shorter than a window: the mean of all


def test_tail_is_the_last_window() -> None:
    assert tail([1.0, 2.0, 3.0, 4.0], 2) == 3.5
    assert tail([1.0, 2.0], 8) == 1.5


@pytest.mark.parametrize(("measure", "expected"), [
    ("mean_logprob", -2.0), ("neg_entropy", -1.0), ("lowest_group", 1.5), ("tail", 3.5)])
def test_sample_confidence_per_measure(measure: str, expected: float) -> None:
    assert sample_confidence(STATS, measure, 2) == expected


def test_sample_confidence_of_an_empty_sample_and_a_bad_measure() -> None:
    assert sample_confidence({"logprob": [], "confidence": [], "entropy": []}, "tail", 2) is None
    with pytest.raises(ValueError, match="unknown confidence measure"):
        sample_confidence(STATS, "median", 2)


def test_quantile_interpolates_and_the_online_threshold_is_the_one_minus_keep_quantile() -> None:
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.1) == pytest.approx(1.3)
    assert online_threshold([1.0, 2.0, 3.0, 4.0], keep=0.9) == pytest.approx(1.3)
    assert online_threshold([1.0, 2.0, 3.0, 4.0], keep=0.1) == pytest.approx(3.7)
    assert online_threshold([5.0], keep=0.5) == 5.0


def test_most_confident_keeps_the_top_fraction_in_sampling_order() -> None:
    scores = [0.5, None, 0.9, 0.1, 0.9]
    assert most_confident(scores, 0.5) == [2, 4]  # ceil(0.5 x 4 scored) = 2
    assert most_confident(scores, 0.1) == [2]  # at least one; equal scores keep the earlier sample
    assert most_confident(scores, 1.0) == [0, 2, 3, 4]
    assert most_confident([None, None], 0.5) == []


def test_vote_weights_are_confidences_or_their_exponential_when_negative() -> None:
    assert vote_weights([1.0, 2.0]) == [1.0, 2.0]
    assert vote_weights([-1.0, 0.0]) == [pytest.approx(math.exp(-1.0)), 1.0]
    assert vote_weights([-3.0, -2.0]) == [pytest.approx(math.exp(-1.0)), 1.0]  # scaled: the best weighs 1
    assert vote_weights([710.0, -1.0]) == [1.0, pytest.approx(0.0, abs=1e-300)]  # no overflow


def test_confidence_filter_vote_overturns_a_low_confidence_majority() -> None:
    answers = ["x", "x", "x", "y", "y"]
    scores = [1.0, 1.0, 1.0, 5.0, 5.0]
    assert majority_vote(answers).answer == "x"
    vote = confidence_filter_vote(answers, scores, 0.4)  # ceil(2) kept: both y
    assert (vote.answer, vote.winner) == ("y", 3)
    assert vote.detail["kept"] == [3, 4] and vote.detail["dropped"] == [0, 1, 2]
    assert vote.detail["cutoff"] == 5.0 and vote.total == 2
    assert vote.clusters[0].weight == 10.0


def test_confidence_filter_vote_weights_and_no_answer() -> None:
    vote = confidence_filter_vote(["a", "b", "b", "a", None], [5.0, 1.0, 2.0, 4.0, 6.0], 0.6)
    assert vote.detail["kept"] == [0, 3, 4]  # ceil(0.6 x 5) = 3 most confident
    assert vote.answer == "a" and vote.clusters[0].weight == 9.0
    assert vote.no_answer == [4] and vote.total == 3
    with pytest.raises(ValueError):
        confidence_filter_vote(["a"], [1.0, 2.0], 0.5)


def test_token_statistics_of_a_known_distribution() -> None:
    logits = np.log(np.array([0.5, 0.25, 0.25], dtype=np.float32)) + np.float32(3.0)  # a shift changes nothing
    logprob, confidence, entropy, certainty = token_statistics(logits, 0, k=1)
    assert logprob == pytest.approx(math.log(0.5), abs=1e-6)
    assert confidence == pytest.approx(-math.log(0.5), abs=1e-6)  # top-1: the chosen token
    assert entropy == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)), abs=1e-6)
    assert certainty == pytest.approx(math.log(32 / 27) / 3, abs=1e-6)  # KL(uniform || p)
    _, confidence2, _, _ = token_statistics(logits, 2, k=2)
    assert confidence2 == pytest.approx(-(math.log(0.5) + math.log(0.25)) / 2, abs=1e-6)


def test_confidence_window_fires_only_on_a_full_window_below_the_threshold() -> None:
    window = ConfidenceWindow(2, 1.0)
    assert window.push(2.0) is False  # not full yet
    assert window.push(0.5) is False  # mean 1.25
    assert window.push(0.5) is True  # mean 0.5


def test_token_margin_is_top1_minus_top2_probability() -> None:
    assert token_margin([("a", math.log(0.6)), ("b", math.log(0.3))]) == pytest.approx(0.3)
    assert token_margin([("b", math.log(0.3)), ("a", math.log(0.6))]) == pytest.approx(0.3)
    assert token_margin([("a", math.log(0.6))]) == pytest.approx(0.6)
    assert token_margin([]) == 0.0


def test_answer_span_covers_the_last_occurrence_of_the_answer() -> None:
    pieces = ["The", " answer", " is", " 1", "9", "."]
    assert answer_span(pieces, "19") == [3, 4]
    assert answer_span(["1", "9", " or", " 19"], "19") == [3]
    assert answer_span(pieces, None) == [0, 1, 2, 3, 4, 5]
    assert answer_span(pieces, "20") == [0, 1, 2, 3, 4, 5]  # not there verbatim: every token


def test_answer_margin_averages_over_the_answer_tokens() -> None:
    pieces = ["is", " 1", "9"]
    tops = [[("is", 0.0)], [(" 1", math.log(0.9)), (" 2", math.log(0.1))], [("9", math.log(0.5)), ("8", math.log(0.5))]]
    margin, span = answer_margin(pieces, tops, "19")
    assert span == [1, 2] and margin == pytest.approx((0.8 + 0.0) / 2)
    assert answer_margin([], [], "1") == (0.0, [])
