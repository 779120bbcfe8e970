"""Evaluation statistics by hand-computed cases: Wilson interval, unbiased pass@k, Pareto front, mean."""

from __future__ import annotations

import itertools
import math

import pytest

from app.eval.stats import mean, pareto_front, pass_at_k, wilson_interval


def test_wilson_8_of_10_matches_the_closed_form() -> None:
    n, x, z = 10, 8, 1.96
    # the textbook form (x + z^2/2 ± z sqrt(x(n-x)/n + z^2/4)) / (n + z^2), written independently of the module
    root = z * math.sqrt(x * (n - x) / n + z * z / 4)
    expected = ((x + z * z / 2 - root) / (n + z * z), (x + z * z / 2 + root) / (n + z * z))
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(expected[0], abs=1e-12) and high == pytest.approx(expected[1], abs=1e-12)
    assert (low, high) == pytest.approx((0.4902, 0.9433), abs=1e-4)  # the published table value


def test_wilson_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)  # no trials: nothing known
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and 0 < high < 0.35
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and 0.65 < low < 1
    assert wilson_interval(5, 10)[0] == pytest.approx(1 - wilson_interval(5, 10)[1])
    for bad in ((11, 10), (-1, 10), (0, -1)):
        with pytest.raises(ValueError):
            wilson_interval(*bad)


def test_pass_at_k_small_cases() -> None:
    assert pass_at_k(2, 1, 1) == pytest.approx(0.5)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(4, 2, 3) == 1.0  # n - c < k: every 3-subset holds a correct sample
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_brute_force_over_all_subsets(n: int) -> None:
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(samples, k))
            brute = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_pareto_front() -> None:
    points = [(10.0, 0.5), (5.0, 0.5), (20.0, 0.9), (1.0, 0.2), (15.0, 0.6), (20.0, 0.7), (3.0, 0.1)]
    # (10, .5) is dominated by (5, .5); (20, .7) by (20, .9); (3, .1) by (1, .2)
    assert pareto_front(points) == [3, 1, 4, 2]
    assert pareto_front([]) == []
    assert pareto_front([(1.0, 1.0)]) == [0]
    assert pareto_front([(2.0, 0.5), (2.0, 0.5)]) == [0, 1]  # equal points dominate neither
    assert pareto_front([(1.0, math.nan), (2.0, 0.5)]) == [1]


def test_mean() -> None:
    assert mean([1, 2, 3]) == 2.0
    assert mean([True, False, True, True]) == 0.75
    assert mean(x / 10 for x in range(1, 4)) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        mean([])
