"""Aggregation rules over extracted answers and scores: majority, weighted, best-of-N, threshold.

Plain functions over lists (answer per candidate, None = no extractable answer; score per candidate,
None = unscored), so they are testable without nodes or models. Every rule returns a `VoteResult`:
- majority (self-consistency): argmax_a sum_i 1{answer_i = a};
- weighted: argmax_a sum_i score_i 1{answer_i = a}; with a Borda `power` p (Kang et al. 2025) the weight is
  (N - rank_i + 1)^p instead of the score, rank 1 the best-scored (p = 0 is majority, large p best-of-N);
- best_of_n: argmax_i score_i (the answer is that candidate's, possibly None);
- threshold (rejection sampling): the first candidate, in sampling order, with score >= threshold;
- confidence_filter (DeepConf offline): keep the most confident fraction, then argmax_a sum_kept w_i 1{answer_i = a}.
Candidates without an answer are counted in `no_answer`, never silently dropped, and never win a
vote over answers. Ties are broken deterministically — for answer votes by the larger count, then
the answer that appeared first; for candidate picks by the lower index — and the tied answers or
indices are reported in `ties`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from nodes.algorithms.confidence import most_confident, vote_weights

TIE_BREAK_ANSWER = "larger count, then first appearance in sampling order"
TIE_BREAK_INDEX = "lowest candidate index"


@dataclass
class Cluster:
    """Candidates sharing one canonical answer."""

    answer: str
    members: list[int]
    weight: float

    @property
    def count(self) -> int:
        return len(self.members)

    def to_json(self) -> dict[str, Any]:
        return {"answer": self.answer, "members": list(self.members), "count": self.count, "weight": self.weight}


@dataclass
class VoteResult:
    """The outcome of one aggregation: the winning answer/candidate and how the vote fell."""

    method: str
    answer: str | None
    """Winning canonical answer (None when nothing could win)."""
    winner: int | None
    """Index of the chosen candidate (for answer votes: the first member of the winning cluster)."""
    clusters: list[Cluster] = field(default_factory=list)
    """All answer clusters, strongest first."""
    no_answer: list[int] = field(default_factory=list)
    """Indices of candidates with no extractable answer."""
    ties: list[str] = field(default_factory=list)
    """Answers (or candidate indices as strings) that tied with the winner before tie-breaking."""
    tie_break: str = ""
    accepted: bool = True
    """False when a threshold vote found no candidate passing and fell back (or gave up)."""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(c.count for c in self.clusters) + len(self.no_answer)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["clusters"] = [c.to_json() for c in self.clusters]
        data["no_answer_count"] = len(self.no_answer)
        data["total"] = self.total
        return data


def build_clusters(answers: Sequence[str | None], weights: Sequence[float] | None = None) -> list[Cluster]:
    """Group candidate indices by answer in order of first appearance (no-answer ones left out)."""
    by_answer: dict[str, Cluster] = {}
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        weight = 1.0 if weights is None else float(weights[i])
        cluster = by_answer.get(answer)
        if cluster is None:
            by_answer[answer] = Cluster(answer, [i], weight)
        else:
            cluster.members.append(i)
            cluster.weight += weight
    return list(by_answer.values())


def _no_answer(answers: Sequence[str | None]) -> list[int]:
    return [i for i, a in enumerate(answers) if a is None]


def _answer_vote(method: str, answers: Sequence[str | None], weights: Sequence[float] | None) -> VoteResult:
    clusters = build_clusters(answers, weights)
    no_answer = _no_answer(answers)
    if not clusters:
        return VoteResult(method, None, None, [], no_answer, [], TIE_BREAK_ANSWER)
    # first appearance order is the list order, so a stable sort on (-weight, -count) breaks ties by it
    ranked = sorted(clusters, key=lambda c: (-c.weight, -c.count))
    top = ranked[0]
    tied = [c.answer for c in ranked if c.weight == top.weight]
    return VoteResult(method, top.answer, top.members[0], ranked, no_answer, tied if len(tied) > 1 else [],
                      TIE_BREAK_ANSWER)


def majority_vote(answers: Sequence[str | None]) -> VoteResult:
    """Self-consistency: the most frequent answer."""
    return _answer_vote("majority", answers, None)


def borda_weights(scores: Sequence[float | None], power: float) -> list[float]:
    """Borda weights of scored candidates: (N - rank + 1) ** power, N the scored count and rank 1 the highest
    score (equal scores share the better rank); unscored candidates weigh 0."""
    if power < 0:
        raise ValueError(f"power must be >= 0, got {power}")
    scored = [float(s) for s in scores if s is not None]
    n = len(scored)
    out = []
    for s in scores:
        if s is None:
            out.append(0.0)
            continue
        rank = 1 + sum(v > float(s) for v in scored)
        out.append(float(n - rank + 1) ** power)
    return out


def weighted_vote(answers: Sequence[str | None], scores: Sequence[float | None],
                  power: float | None = None) -> VoteResult:
    """The answer with the largest sum of scores (unscored candidates weigh 0); with `power`, of Borda weights
    (borda_weights) instead, which only the scores' order decides."""
    if len(scores) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(scores)} scores")
    if power is None:
        return _answer_vote("weighted", answers, [0.0 if s is None else float(s) for s in scores])
    weights = borda_weights(scores, power)
    result = _answer_vote("weighted", answers, weights)
    result.detail = {"weighting": "borda", "power": power, "weights": weights}
    return result


def _argmax_index(scores: Sequence[float | None]) -> tuple[int | None, list[str]]:
    """The best-scoring index (lowest among equals) and the tied indices when there is a tie."""
    scored = [i for i, s in enumerate(scores) if s is not None]
    if not scored:
        return None, []
    best = max(float(scores[i]) for i in scored)  # type: ignore[arg-type]
    tied = [i for i in scored if float(scores[i]) == best]  # type: ignore[arg-type]
    return min(tied), [str(i) for i in tied] if len(tied) > 1 else []


def best_of_n(answers: Sequence[str | None], scores: Sequence[float | None]) -> VoteResult:
    """The candidate with the highest score (verifier reranking); unscored candidates cannot win."""
    if len(scores) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(scores)} scores")
    winner, ties = _argmax_index(scores)
    clusters = build_clusters(answers, [0.0 if s is None else float(s) for s in scores])
    clusters.sort(key=lambda c: -c.weight)
    answer = answers[winner] if winner is not None else None
    return VoteResult("best_of_n", answer, winner, clusters, _no_answer(answers), ties, TIE_BREAK_INDEX)


def threshold_vote(answers: Sequence[str | None], scores: Sequence[float | None], threshold: float,
                   fallback: str = "best") -> VoteResult:
    """Rejection sampling: the first candidate whose score is >= threshold. When none passes,
    `fallback` "best" takes the best-scoring one (accepted=False) and "none" gives no answer."""
    if len(scores) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(scores)} scores")
    passing = [i for i, s in enumerate(scores) if s is not None and float(s) >= threshold]
    clusters = build_clusters(answers, [0.0 if s is None else float(s) for s in scores])
    clusters.sort(key=lambda c: -c.weight)
    detail = {"threshold": threshold, "passing": passing, "rejected": len(answers) - len(passing)}
    if passing:
        winner = passing[0]
        return VoteResult("threshold", answers[winner], winner, clusters, _no_answer(answers), [],
                          "first passing candidate in sampling order", True, detail)
    if fallback == "best":
        fb = best_of_n(answers, scores)
        return VoteResult("threshold", fb.answer, fb.winner, clusters, _no_answer(answers), fb.ties,
                          TIE_BREAK_INDEX, False, {**detail, "fallback": "best"})
    return VoteResult("threshold", None, None, clusters, _no_answer(answers), [], "", False,
                      {**detail, "fallback": "none"})


def confidence_filter_vote(answers: Sequence[str | None], scores: Sequence[float | None], keep: float) -> VoteResult:
    """DeepConf offline: keep the ceil(keep x N) most confident candidates (scores are confidences), then a
    confidence-weighted majority over them (weights from confidence.vote_weights). The clusters, counts and
    no-answer list cover the kept candidates; the dropped ones are listed in detail["dropped"]."""
    if len(scores) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(scores)} scores")
    kept = most_confident(scores, keep)
    kept_set = set(kept)
    weights = dict(zip(kept, vote_weights([float(scores[i]) for i in kept]), strict=True))  # type: ignore[arg-type]
    masked = [a if i in kept_set else None for i, a in enumerate(answers)]
    result = _answer_vote("confidence_filter", masked, [weights.get(i, 0.0) for i in range(len(answers))])
    result.no_answer = [i for i in kept if answers[i] is None]
    result.detail = {"keep": keep, "kept": kept, "dropped": [i for i in range(len(answers)) if i not in kept_set],
                     "cutoff": min((float(scores[i]) for i in kept), default=None),  # type: ignore[arg-type]
                     "weights": [weights.get(i, 0.0) for i in range(len(answers))]}
    return result
