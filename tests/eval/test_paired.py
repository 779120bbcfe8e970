"""Paired statistics against scipy.stats on known cases (scipy is a dev dependency; the code does not use it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.eval.paired import (
    MCNEMAR,
    SIGN_FLIP,
    compare,
    compare_points,
    item_means,
    mcnemar_exact,
    mcnemar_interval,
    point_interval,
    sign_flip_p,
    t_cdf,
    t_quantile,
)

stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("df", [1, 2, 5, 29, 499])
def test_t_distribution_matches_scipy(df: int) -> None:
    for p in (0.6, 0.9, 0.975, 0.995):
        assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-7)
    for t in (-3.0, -0.5, 0.0, 1.2, 4.0):
        assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-10)


@pytest.mark.parametrize(("a_only", "b_only"), [(0, 0), (1, 0), (7, 2), (3, 12), (25, 25), (40, 11)])
def test_mcnemar_is_the_exact_binomial_test(a_only: int, b_only: int) -> None:
    expected = 1.0 if a_only + b_only == 0 else stats.binomtest(a_only, a_only + b_only, 0.5).pvalue
    assert mcnemar_exact(a_only, b_only) == pytest.approx(expected, rel=1e-9)


def test_exact_sign_flip_matches_scipy_permutation_test() -> None:
    d = np.array([0.5, 1.0, -0.25, 0.75, 1.0, 0.0, 0.5, -1.0, 0.25, 1.0])
    scipy_p = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=math.inf,
                                     alternative="two-sided").pvalue
    assert sign_flip_p(d.tolist()) == pytest.approx(scipy_p, rel=1e-9)


def test_random_sign_flip_is_close_to_the_exact_test_on_many_items() -> None:
    rng = np.random.default_rng(3)
    d = rng.choice([-1.0, -1 / 3, 0.0, 1 / 3, 1.0], size=60, p=[0.15, 0.2, 0.3, 0.2, 0.15]) + 0.1
    scipy_p = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=20_000,
                                     alternative="two-sided", random_state=1).pvalue
    assert sign_flip_p(d.tolist()) == pytest.approx(scipy_p, abs=0.02)


def test_clustered_point_interval_is_the_t_interval_of_item_means() -> None:
    runs = {0: [1, 1, 0], 1: [0, 0, 0], 2: [1, 1, 1], 3: [1, 0, 0], 4: [1, 1, 0], 5: [0, 1, 1]}
    means = list(item_means(runs).values())
    mean, se, (lo, hi) = point_interval(means)
    assert mean == pytest.approx(np.mean(means))
    assert se == pytest.approx(stats.sem(means))
    low, high = stats.t.interval(0.95, len(means) - 1, loc=np.mean(means), scale=stats.sem(means))
    assert (lo, hi) == pytest.approx((max(0.0, low), min(1.0, high)))


def _exact_box(a_only: int, b_only: int, n: int) -> tuple[float, float]:
    """psi * (2 pi - 1) over scipy's Clopper-Pearson intervals of psi (discordant share) and pi (a's share of them)."""
    m = a_only + b_only
    psi = stats.binomtest(m, n).proportion_ci(0.95, method="exact")
    pi = stats.binomtest(a_only, m).proportion_ci(0.95, method="exact")
    ends = [s * (2 * q - 1) for s in (psi.low, psi.high) for q in (pi.low, pi.high)]
    return (min(ends), max(ends))


def test_binary_single_runs_get_mcnemar_and_its_exact_interval() -> None:
    a = [1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1]
    b = [0, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0]
    result = compare("A", "B", {i: [x] for i, x in enumerate(a)}, {i: [x] for i, x in enumerate(b)})
    assert result.method == MCNEMAR and result.n == 20
    assert result.diff == pytest.approx(np.mean(a) - np.mean(b))
    a_only = sum(x > y for x, y in zip(a, b, strict=True))
    b_only = sum(x < y for x, y in zip(a, b, strict=True))
    assert (a_only, b_only) == (7, 0)
    assert result.ci == pytest.approx(_exact_box(a_only, b_only, 20), abs=1e-9)
    assert result.p_value == pytest.approx(stats.binomtest(a_only, a_only + b_only, 0.5).pvalue)
    assert result.significant and result.sentence().startswith("A beats B by 35.0 points [")


def test_repeats_use_item_means_and_the_sign_flip_test() -> None:
    a = {0: [1, 1, 0], 1: [1, 0, 0], 2: [1, 1, 1], 3: [0, 0, 1], 4: [1, 1, 0], 9: [1]}
    b = {0: [1, 0, 0], 1: [1, 0, 0], 2: [0, 1, 1], 3: [0, 0, 0], 4: [0, 1, 0]}
    result = compare("A", "B", a, b)
    d = [np.mean(a[i]) - np.mean(b[i]) for i in range(5)]
    assert result.method == SIGN_FLIP and result.n == 5  # item 9 is not shared
    assert result.diff == pytest.approx(np.mean(d))
    scipy_p = stats.permutation_test((np.array(d),), np.mean, permutation_type="samples", n_resamples=math.inf,
                                     alternative="two-sided").pvalue
    assert result.p_value == pytest.approx(scipy_p)
    assert not result.significant and "not significant by the sign-flip test (p = 0.12)" in result.sentence()


def test_power_sentence_sizes_the_dataset_from_the_agreement() -> None:
    a = {i: [float(i % 3 == 0)] for i in range(30)}
    b = {i: [float(i % 3 == 0) if i % 10 else 1.0 - float(i % 3 == 0)] for i in range(30)}
    result = compare("A", "B", a, b)
    sd = np.std([a[i][0] - b[i][0] for i in range(30)], ddof=1)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert result.items_needed() == math.ceil((z * sd / 0.05) ** 2)
    assert f"about {result.items_needed()} would detect 5 points" in result.sentence()


def test_pairs_are_oriented_and_sorted_and_a_baseline_is_checked() -> None:
    runs = {"greedy": {i: [float(i < 5)] for i in range(10)}, "vote": {i: [float(i < 8)] for i in range(10)},
            "best": {i: [float(i < 6)] for i in range(10)}}
    pairs = compare_points(runs)
    assert [(c.a, c.b) for c in pairs] == [("vote", "greedy"), ("vote", "best"), ("best", "greedy")]
    assert all(c.diff > 0 for c in pairs)
    against = compare_points(runs, baseline="greedy")
    assert {(c.a, c.b) for c in against} == {("vote", "greedy"), ("best", "greedy")}
    with pytest.raises(ValueError, match="no point labelled"):
        compare_points(runs, baseline="nope")


def test_the_interval_never_contradicts_the_exact_test_on_ten_items() -> None:
    """The tune report once printed `no difference detectable with 10 items (-40.0 points [-76.9, -3.1], p = 0.12)`:
    a t interval excluding 0 beside the exact McNemar p. This is that table: b right where a is wrong on 4 items."""
    a = [0, 0, 0, 0, 1, 1, 0, 0, 1, 0]
    b = [1, 1, 1, 1, 1, 1, 0, 0, 1, 0]
    result = compare("A", "B", {i: [x] for i, x in enumerate(a)}, {i: [x] for i, x in enumerate(b)})
    assert result.method == MCNEMAR and result.diff == pytest.approx(-0.4)
    assert result.p_value == pytest.approx(0.125) and not result.significant
    lo, hi = result.ci
    assert lo < result.diff < 0 < hi
    assert (lo, hi) == pytest.approx(_exact_box(0, 4, 10), abs=1e-9)
    assert "no difference detectable with 10 items (-40.0 points [" in result.sentence()


@pytest.mark.parametrize("n", [6, 10, 25])
def test_exact_interval_holds_zero_exactly_when_mcnemar_is_not_significant(n: int) -> None:
    for a_only in range(n + 1):
        for b_only in range(n + 1 - a_only):
            lo, hi = mcnemar_interval(a_only, b_only, n)
            assert lo <= (a_only - b_only) / n <= hi
            assert (lo <= 0 <= hi) == (mcnemar_exact(a_only, b_only) >= 0.05), (a_only, b_only)


def test_a_sign_flip_result_names_its_methods_when_the_t_interval_disagrees() -> None:
    d = [1.0, 1.0, 1.0, 1.0, 0.5]  # a t interval far from 0, but 5 sign flips cannot reach p < 0.05
    result = compare("A", "B", {i: [x, x] for i, x in enumerate(d)}, {i: [0.0, 0.0] for i in range(5)})
    assert result.method == SIGN_FLIP and not result.significant and result.ci[0] > 0
    assert "not significant by the sign-flip test" in result.sentence()
    assert "paired t interval" in result.sentence() and "excludes 0" in result.sentence()
    assert "no difference detectable" not in result.sentence()
