"""Fuzz: the confidence measures, DeepConf's filter and threshold, CoT decoding's margin and the confidence
verifier on arbitrary (also damaged) token statistics: a number within bounds or a clean error, never a crash."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.algorithms.confidence import MEASURES, lowest_group, most_confident, online_threshold, tail
from nodes.algorithms.cot_decoding import answer_margin
from nodes.algorithms.voting import confidence_filter_vote
from nodes.base import Candidate, CandidateSet, NodeError
from nodes.kinds.verify import Verifier

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
anything = st.one_of(finite, st.floats(), st.text(max_size=3), st.none(), st.booleans(), st.lists(finite, max_size=2))


@given(st.lists(finite, min_size=1, max_size=60), st.integers(1, 80))
def test_lowest_group_is_never_above_the_tail_nor_outside_the_values(values: list[float], group: int) -> None:
    low, end = lowest_group(values, group), tail(values, group)
    assert low <= end + 1e-6 * (1 + abs(end))
    assert min(values) - 1e-6 * (1 + abs(min(values))) <= low <= max(values) + 1e-6 * (1 + abs(max(values)))


@given(st.lists(st.one_of(st.none(), finite), max_size=30), st.floats(0.1, 1.0))
def test_the_filter_keeps_the_top_fraction_and_votes_among_it(scores: list[float | None], keep: float) -> None:
    kept = most_confident(scores, keep)
    scored = [i for i, s in enumerate(scores) if s is not None]
    assert len(kept) == (max(1, math.ceil(keep * len(scored) - 1e-9)) if scored else 0)
    dropped = [scores[i] for i in scored if i not in kept]
    assert all(scores[k] >= d for k in kept for d in dropped)  # type: ignore[operator]
    answers = [str(i % 3) if i % 4 else None for i in range(len(scores))]
    vote = confidence_filter_vote(answers, scores, keep)
    assert vote.winner is None or vote.winner in kept


@given(st.lists(finite, min_size=1, max_size=20), st.floats(0.1, 1.0))
def test_the_online_threshold_lies_within_the_warmup(warmup: list[float], keep: float) -> None:
    assert min(warmup) <= online_threshold(warmup, keep) <= max(warmup)


@given(st.lists(st.text(max_size=4), max_size=12), st.data())
def test_the_answer_margin_is_a_probability_difference(pieces: list[str], data: st.DataObject) -> None:
    tops = [data.draw(st.lists(st.tuples(st.text(max_size=2), st.floats(-50, 0)), max_size=3)) for _ in pieces]
    answer = data.draw(st.one_of(st.none(), st.text(max_size=3)))
    margin, span = answer_margin(pieces, tops, answer)
    assert -1.0 <= margin <= 1.0 and all(0 <= i < len(pieces) for i in span)


class _Ctx:
    node_id = "c"
    seed = 0

    def event(self, kind: str, data: dict[str, Any]) -> None:
        pass

    def progress(self, done: float, total: float, message: str = "") -> None:
        pass


@given(st.lists(st.one_of(st.none(), anything, st.dictionaries(
    st.sampled_from(("logprob", "confidence", "entropy", "x")), st.one_of(anything, st.lists(anything, max_size=5)),
    max_size=3)), min_size=1, max_size=4), st.sampled_from(MEASURES), st.integers(1, 100))
def test_the_verifier_scores_or_refuses_damaged_statistics(stats: list[Any], measure: str, group: int) -> None:
    cands = CandidateSet([Candidate(f"t{i}", index=i, meta={"token_stats": s}) for i, s in enumerate(stats)])
    params = Verifier.typed_params({"method": "confidence", "measure": measure, "group_size": group})
    try:
        out = Verifier().run({"candidates": cands}, params, _Ctx())  # type: ignore[arg-type]
    except NodeError as exc:
        assert "token statistics" in str(exc)
        return
    assert all(math.isfinite(s) for s in out["scores"])


def test_a_damaged_statistic_is_a_node_error() -> None:
    cands = CandidateSet([Candidate("t", meta={"token_stats": {"confidence": [1.0, "x"]}})])
    params = Verifier.typed_params({"method": "confidence", "measure": "tail"})
    with pytest.raises(NodeError, match="damaged"):
        Verifier().run({"candidates": cands}, params, _Ctx())  # type: ignore[arg-type]
