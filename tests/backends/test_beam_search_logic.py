"""Beam search bookkeeping (backends/beam_search.py) on hand-made distributions, and the fake backend's beam."""

from __future__ import annotations

import itertools
import math

import pytest

from backends.base import BackendError, SamplingParams
from backends.beam_search import BeamSearch, BeamSettings, beam_score
from backends.fake import FakeBackend

END = 0
TABLE = {  # prefix -> {token: probability}; tokens 1 (a) and 2 (b)
    (): {1: 0.6, 2: 0.3, END: 0.1},
    (1,): {END: 0.9, 1: 0.05, 2: 0.05},
    (2,): {1: 0.9, 2: 0.05, END: 0.05},
}


def dist(prefix: tuple[int, ...]) -> dict[int, float]:
    return TABLE.get(prefix, {END: 0.5, 1: 0.3, 2: 0.2})


def run(settings: BeamSettings) -> BeamSearch:
    search = BeamSearch(settings, lambda t: t == END)
    while not search.done():
        search.expand({b.id: sorted(((t, math.log(p)) for t, p in dist(tuple(b.tokens)).items()),
                                    key=lambda c: -c[1]) for b in search.live})
    return search


def test_a_step_by_hand() -> None:
    search = BeamSearch(BeamSettings(n=2, length_penalty=0.0, max_tokens=5), lambda t: t == END)
    root = search.live[0]
    first = search.expand({root.id: [(1, math.log(0.6)), (2, math.log(0.3)), (END, math.log(0.1))]})
    assert [b.tokens for b in first] == [[1], [2]]
    a, b = first
    second = search.expand({a.id: [(END, math.log(0.9)), (1, math.log(0.05)), (2, math.log(0.05))],
                            b.id: [(1, math.log(0.9)), (2, math.log(0.05)), (END, math.log(0.05))]})
    # a</s> ranks first (finished), then b a and a a (a a beats a b: equal log-probabilities, a's first)
    assert [h.tokens for h in search.finished[0]] == [[1, END]]
    assert [c.tokens for c in second] == [[2, 1], [1, 1]]
    assert [c.parent for c in second] == [b.id, a.id]
    assert second[0].logprob == pytest.approx(math.log(0.3) + math.log(0.9))


def exhaustive(depth: int, alpha: float) -> list[tuple[float, tuple[int, ...]]]:
    """Every sequence of at most `depth` tokens, ended by END or cut at depth, with its score, best first."""
    out = []
    for length in range(1, depth + 1):
        for seq in itertools.product((END, 1, 2), repeat=length):
            if END in seq[:-1] or (length < depth and seq[-1] != END):
                continue
            lp = sum(math.log(dist(seq[:i])[t]) for i, t in enumerate(seq))
            out.append((beam_score(lp, length, alpha), seq))
    return sorted(out, key=lambda x: -x[0])


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_enough_beam_is_exhaustive(alpha: float) -> None:
    """Width 9 keeps every prefix of 2 tokens, so 3 steps enumerate all sequences of the 3-token vocabulary."""
    search = run(BeamSettings(n=9, length_penalty=alpha, max_tokens=3))
    best = search.best(lambda b: "")
    truth = exhaustive(3, alpha)
    assert best[0].score == pytest.approx(truth[0][0])
    assert tuple(search.beams[best[0].beam_id].tokens) == truth[0][1]


def test_length_penalty_changes_the_winner() -> None:
    short = run(BeamSettings(n=2, length_penalty=0.0, max_tokens=4)).best(lambda b: "")
    assert short[0].tokens == [1] and short[0].finish_reason == "eog"  # a</s>: log 0.54 beats everything
    scores = [h.score for h in short]
    assert scores == sorted(scores, reverse=True)


def test_diverse_groups_open_with_different_tokens() -> None:
    plain = run(BeamSettings(n=2, groups=2, diversity_penalty=0.0, max_tokens=3))
    diverse = run(BeamSettings(n=2, groups=2, diversity_penalty=50.0, max_tokens=3))
    first = [n for n in plain.nodes if n["step"] == 1]
    assert [n["token"] for n in first] == [1, 1]  # without the penalty both groups take the likeliest token
    first = [n for n in diverse.nodes if n["step"] == 1]
    assert [n["token"] for n in first] == [1, 2]


def test_tree_marks_pruned_and_kept_beams() -> None:
    search = run(BeamSettings(n=2, length_penalty=1.0, max_tokens=4))
    kept = search.best(lambda b: "")
    statuses = {n["id"]: n["status"] for n in search.nodes}
    for h in kept:
        node_id = h.beam_id
        while node_id >= 0:
            assert statuses[node_id] == "kept"
            node_id = search.beams[node_id].parent
    assert "pruned" in statuses.values()
    tree = search.tree(str)
    assert all("text" in n for n in tree["nodes"]) and tree["steps"] == search.step


def test_early_stopping_before_max_tokens() -> None:
    """Both kept hypotheses end at step 2 and nothing live can beat them (alpha 0: more tokens only cost)."""
    search = run(BeamSettings(n=1, length_penalty=0.0, max_tokens=50))
    assert search.step == 2


def test_bad_settings_are_refused() -> None:
    with pytest.raises(BackendError, match="must divide n"):
        BeamSearch(BeamSettings(n=4, groups=3), lambda t: False)


def test_fake_backend_beam_is_deterministic_and_sorted() -> None:
    fake = FakeBackend(by_prompt={"q": ["the answer is 4", "it is 5"]})
    settings = BeamSettings(n=4, groups=2, diversity_penalty=2.0)
    first = fake.beam_search("q", SamplingParams(max_tokens=5), settings)
    again = fake.beam_search("q", SamplingParams(max_tokens=5), settings)
    assert [h.text for h in first.hypotheses] == [h.text for h in again.hypotheses]
    assert len(first.hypotheses) == 4
    scores = [h.score for h in first.hypotheses]
    assert scores == sorted(scores, reverse=True)
    assert {h.group for h in first.hypotheses} == {0, 1}
