"""The `voter` kind: aggregate a candidate set into one answer (majority, weighted, best-of-N, MBR, threshold).

Trace event "vote" (VoteResult.to_json()):
    {"method", "answer": winning canonical answer | None, "winner": candidate index | None,
     "clusters": [{"answer", "members": [indices], "count", "weight"}] strongest first,
     "no_answer": [indices], "no_answer_count", "total", "ties": [tied answers or indices],
     "tie_break": rule used, "accepted": bool (threshold), "detail": method specifics
     (mbr: {"utility", "on", "expected_utility": [per candidate]}; threshold: {"threshold",
     "passing", "rejected", "fallback"}; confidence_filter: {"keep", "kept", "dropped", "cutoff", "weights"})}
"""

from __future__ import annotations

import copy
from typing import Any

from nodes.algorithms.extract import MATH, AnswerSpec, answer_params
from nodes.algorithms.math_equiv import class_answers
from nodes.algorithms.mbr import UTILITIES, mbr_select, utility
from nodes.algorithms.voting import (
    TIE_BREAK_INDEX,
    VoteResult,
    best_of_n,
    build_clusters,
    confidence_filter_vote,
    majority_vote,
    threshold_vote,
    weighted_vote,
)
from nodes.base import CANDIDATES, JSON, TEXT, CandidateSet, NodeContext, NodeError, NodeKind, Param, Port

METHODS = ("majority", "weighted", "best_of_n", "mbr", "threshold", "confidence_filter")
NEEDS_SCORES = ("weighted", "best_of_n", "threshold", "confidence_filter")


def mbr_vote(texts: list[str], answers: list[str | None], util_name: str,
             weights: list[float] | None) -> VoteResult:
    """MBR over the given texts (answers only label the clusters)."""
    result = mbr_select(texts, utility(util_name), weights)
    clusters = build_clusters(answers)
    clusters.sort(key=lambda c: -c.count)
    winner = result.winner
    return VoteResult("mbr", answers[winner] if winner is not None else None, winner, clusters,
                      [i for i, a in enumerate(answers) if a is None], [str(i) for i in result.ties],
                      TIE_BREAK_INDEX, True, {"utility": util_name, "expected_utility": result.expected_utility})


class Voter(NodeKind):
    """Aggregates candidates into an answer; candidates without an answer are counted apart."""

    kind = "voter"
    title = "Voter"
    category = "aggregate"
    description = ("Aggregate candidates into one answer: majority (self-consistency), weighted (sum of "
                   "scores), best_of_n (argmax score), mbr (minimum Bayes risk), threshold (rejection), "
                   "confidence_filter (DeepConf: keep the most confident fraction, then a confidence-weighted "
                   "majority; score with a confidence verifier).")
    inputs = (Port("candidates", CANDIDATES, "Candidates to aggregate (scored, for weighted/best_of_n/threshold)"),)
    outputs = (
        Port("answer", TEXT, "The winning canonical answer ('' when no candidate has one)"),
        Port("best", TEXT, "Full text of the chosen candidate"),
        Port("candidates", CANDIDATES, "The candidates with answers, clusters and the winner marked"),
        Port("result", JSON, "The vote: clusters, counts, ties, no-answer count"),
    )
    params = (
        Param("method", "choice", "majority", "How to aggregate", choices=METHODS),
        *answer_params("auto"),
        Param("utility", "choice", "token_f1", "MBR utility between two candidates", choices=UTILITIES,
              show_if=("method", ("mbr",))),
        Param("mbr_on", "choice", "text", "MBR compares full texts or extracted answers",
              choices=("text", "answer"), show_if=("method", ("mbr",))),
        Param("mbr_weighted", "bool", False, "Weight the other candidates by their scores in MBR",
              show_if=("method", ("mbr",))),
        Param("threshold", "float", 0.5, "Accept the first candidate whose score is at least this",
              show_if=("method", ("threshold",))),
        Param("fallback", "choice", "best", "When none passes: best-scoring candidate, or no answer",
              choices=("best", "none"), show_if=("method", ("threshold",))),
        Param("keep", "float", 0.9, "Confidence filter: the most confident fraction of candidates that votes "
              "(DeepConf: 0.1 aggressive, 0.9 safe)", min=0.1, max=1.0, show_if=("method", ("confidence_filter",))),
    )

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return AnswerSpec.from_params(params).problems()

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        source = inputs["candidates"]
        if not isinstance(source, CandidateSet):
            raise NodeError(f"voter needs a candidate set, got {type(source).__name__}; "
                            "wire a sampler's or verifier's `candidates` output")
        cset = copy.deepcopy(source)
        spec = AnswerSpec.from_params(params)
        cands = cset.candidates
        answers = [spec.answer(c.text, c.answer) for c in cands]
        if spec.extract == MATH:  # vote over equivalence classes: 1/2 and 0.5 are one answer
            answers = class_answers(answers)
        scores = [c.score for c in cands]
        method = params["method"]
        if method in NEEDS_SCORES and cands and all(s is None for s in scores):
            raise NodeError(f"{method} voting needs scores but no candidate is scored; "
                            "put a verifier between the sampler and the voter")
        if method == "majority":
            vote = majority_vote(answers)
        elif method == "weighted":
            vote = weighted_vote(answers, scores)
        elif method == "best_of_n":
            vote = best_of_n(answers, scores)
        elif method == "threshold":
            vote = threshold_vote(answers, scores, params["threshold"], params["fallback"])
        elif method == "confidence_filter":
            vote = confidence_filter_vote(answers, scores, params["keep"])
        else:
            texts = [(a or "") for a in answers] if params["mbr_on"] == "answer" else [c.text for c in cands]
            weights = None
            if params["mbr_weighted"]:
                weights = [0.0 if s is None else float(s) for s in scores]
            vote = mbr_vote(texts, answers, params["utility"], weights)
            vote.detail["on"] = params["mbr_on"]
        cluster_of = {i: k for k, cl in enumerate(vote.clusters) for i in cl.members}
        for i, c in enumerate(cands):
            c.answer = answers[i]
            c.cluster = cluster_of.get(i)
        cset.winner = vote.winner
        cset.meta = {**cset.meta, "vote": {"method": method, "answer": vote.answer, "ties": vote.ties,
                                           "no_answer_count": len(vote.no_answer)}}
        summary = vote.to_json()
        ctx.event("vote", summary)
        best = cands[vote.winner].text if vote.winner is not None else ""
        return {"answer": vote.answer or "", "best": best, "candidates": cset, "result": summary}
