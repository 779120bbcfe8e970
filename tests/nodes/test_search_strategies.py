"""DVTS budget split, particle resampling and UCT arithmetic, by hand-computed cases."""

from __future__ import annotations

import math

import pytest

from nodes.algorithms.search_strategies import (
    robust_pick,
    softmax,
    split_budget,
    systematic_resample,
    uct_pick,
    uct_score,
)


def test_split_budget_spreads_the_remainder_over_the_first_subtrees() -> None:
    assert split_budget(8, 3) == [3, 3, 2]
    assert split_budget(4, 2) == [2, 2]
    assert split_budget(2, 4) == [1, 1, 1, 1]  # every subtree expands at least once
    with pytest.raises(ValueError):
        split_budget(4, 0)


def test_softmax_weights_and_temperature() -> None:
    assert softmax([0.0, math.log(2)], 1.0) == pytest.approx([1 / 3, 2 / 3])
    # halving the temperature squares the odds: 1 : 4
    assert softmax([0.0, math.log(2)], 0.5) == pytest.approx([0.2, 0.8])
    # unscored weighs as the lowest score
    assert softmax([None, 1.0, 1.0], 1.0) == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    assert softmax([1000.0, 0.0], 1.0) == pytest.approx([1.0, 0.0])  # no overflow
    with pytest.raises(ValueError):
        softmax([1.0], 0.0)


def test_systematic_resampling_by_hand() -> None:
    # cumulative 0.5, 0.75, 1.0; pointers 0.125, 0.375, 0.625, 0.875
    assert systematic_resample([0.5, 0.25, 0.25], 4, 0.5) == [0, 0, 1, 2]
    # pointers 0, 0.25, 0.5, 0.75: a pointer on a boundary belongs to the next index
    assert systematic_resample([0.5, 0.25, 0.25], 4, 0.0) == [0, 0, 1, 2]
    assert systematic_resample([0.0, 1.0], 1, 0.0) == [1]  # found by the fuzzer: a zero weight at pointer 0
    assert systematic_resample([0.0, 1.0], 3, 0.9) == [1, 1, 1]  # a zero weight is never drawn
    assert systematic_resample([2.0, 2.0], 2, 0.3) == [0, 1]  # weights need not be normalised
    assert systematic_resample([1.0], 0, 0.3) == []


def test_resampling_with_an_offset_just_under_one_stays_in_range() -> None:
    # found by the fuzzer: (offset + 1) / 2 rounds to exactly 1.0 for offset = 1 - 2**-53, and the pointer ran past
    # the last cumulative weight (IndexError); an unscored particle (None) took part in the failing case
    offset = math.nextafter(1.0, 0.0)
    assert systematic_resample(softmax([None, 1.0], 1.0), 2, offset) == [0, 1]
    assert systematic_resample([1.0, 1.0], 2, offset) == [0, 1]
    # a trailing zero weight is never drawn, even when rounding leaves the last positive cumulative under 1
    assert systematic_resample([0.1, 0.2, 0.3, 0.0], 5, offset) == [1, 1, 2, 2, 2]


def test_uct_by_hand() -> None:
    # mean 1.5 + 1 * sqrt(ln 8 / 2) = 1.5 + 1.0197
    assert uct_score(3.0, 2, 8, 1.0) == pytest.approx(1.5 + math.sqrt(math.log(8) / 2))
    assert uct_score(0.0, 0, 8, 1.0) == math.inf
    # child 0: 0.9 + sqrt(ln 4 / 3) = 1.580; child 1: 0.2 + sqrt(ln 4 / 1) = 1.377
    assert uct_pick([(2.7, 3), (0.2, 1)], 4, 1.0) == 0
    # more exploration: child 0: 0.9 + 2 * 0.680 = 2.260; child 1: 0.2 + 2 * 1.177 = 2.555
    assert uct_pick([(2.7, 3), (0.2, 1)], 4, 2.0) == 1
    assert uct_pick([(5.0, 5), (0.0, 0)], 5, 0.0) == 1  # unvisited first
    assert uct_pick([(1.0, 2), (1.0, 2)], 4, 1.0) == 0  # ties to the lower index


def test_robust_pick_prefers_visits_then_mean() -> None:
    assert robust_pick([(3.0, 3), (0.5, 4)]) == 1
    assert robust_pick([(1.0, 4), (2.0, 4)]) == 1
    assert robust_pick([(0.0, 0), (0.0, 0)]) == 0
