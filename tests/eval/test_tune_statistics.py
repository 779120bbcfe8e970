"""Round 7 §3.2, the race's statistics: the choice is significant on dev only after Holm's correction over the
candidates compared, the "at equal tokens" opponent is picked on dev (not with the test items' figures), and a
mean of partial scores gets an interval of its own spread, not Wilson's of round(mean * n)."""

from __future__ import annotations

from app.eval.tune.race import ItemResult, choose, holm_significant
from app.eval.tune.report import _closest, accuracy_interval
from app.eval.tune.report import test_figures as held_out_figures


def _rows(right: set[int], n: int, tokens: int = 10) -> dict[int, ItemResult]:
    return {i: ItemResult(float(i in right), tokens, 0.1) for i in range(n)}


def test_holm_by_hand() -> None:
    # m = 3: 0.01 < 0.05/3, 0.02 < 0.05/2, 0.04 < 0.05/1: all three
    assert holm_significant({"a": 0.01, "b": 0.02, "c": 0.04}) == {"a", "b", "c"}
    # c: 0.001 < 0.0167; a: 0.03 < 0.025 fails, the step-down stops there (b's 0.04 < 0.05 no longer counts)
    assert holm_significant({"a": 0.03, "b": 0.04, "c": 0.001}) == {"c"}
    assert holm_significant({"a": 0.031, "b": 0.2}) == set()  # 0.031 > 0.025
    assert holm_significant({}) == set()


def test_one_of_many_at_p_0_03_is_not_called_significant() -> None:
    n = 20
    results = {"chain_of_thought": _rows(set(range(6)), n),
               "b": _rows(set(range(12)), n)}  # 6 wins, no loss: exact p = 0.031
    results.update({f"noise{k}": _rows(set(range(6)) | {6 + k}, n) for k in range(4)})  # one win each
    label, why = choose(list(results), results, list(range(n)), baseline="chain_of_thought")
    assert label == "chain_of_thought"  # uncorrected, b (p = 0.031 < 0.05) would have been recommended
    assert "after Holm's correction over 5 candidates" in why
    alone = {k: results[k] for k in ("chain_of_thought", "b")}
    assert choose(list(alone), alone, list(range(n)), baseline="chain_of_thought")[0] == "b"


def test_the_equal_tokens_opponent_is_picked_on_dev() -> None:
    dev, test = list(range(10)), list(range(10, 20))
    results = {"rec": {**_rows(set(), 10, tokens=100), **{i: ItemResult(1.0, 100, 0.1) for i in test}},
               # near in tokens on dev, far on test
               "near_on_dev": {**_rows(set(), 10, tokens=95), **{i: ItemResult(0.0, 400, 0.1) for i in test}},
               # far on dev, near on test (and perfect there): the old pick, made with test's own figures
               "near_on_test": {**_rows(set(), 10, tokens=300), **{i: ItemResult(1.0, 100, 0.1) for i in test}}}
    workflow_of = {"rec": "rsa", "near_on_dev": "self_consistency", "near_on_test": "self_consistency"}
    assert _closest(list(results), workflow_of, ("self_consistency",), results, dev, "rec") == "near_on_dev"


def test_a_partial_score_mean_gets_its_own_interval() -> None:
    assert list(accuracy_interval([1.0, 0.0, 1.0, 1.0])) == held_out_figures(_rows({0, 2, 3}, 4), [0, 1, 2, 3])["ci"]
    half = [0.5] * 40  # every item half right: the mean is known exactly, 0.5
    lo, hi = accuracy_interval(half)
    assert lo == hi == 0.5
    mixed = [0.25, 0.75] * 20
    lo, hi = accuracy_interval(mixed)
    assert lo < 0.5 < hi and hi - lo < 0.2  # 1.96 * 0.253 / sqrt(40) = 0.078 each side
    rows = {i: ItemResult(s, 10, 0.1) for i, s in enumerate(mixed)}
    assert held_out_figures(rows, list(range(40)))["ci"] == [lo, hi]
