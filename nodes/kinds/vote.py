"""The `voter` kind: aggregate a candidate set into one answer (majority, weighted, best-of-N, MBR, threshold).

Trace event "vote" (VoteResult.to_json()):
    {"method", "answer": winning canonical answer | None, "winner": candidate index | None,
     "clusters": [{"answer", "members": [indices], "count", "weight"}] strongest first,
     "no_answer": [indices], "no_answer_count", "total", "ties": [tied answers or indices],
     "tie_break": rule used, "accepted": bool (threshold), "detail": method specifics
     (mbr: {"utility", "on", "expected_utility": [per candidate]}; threshold: {"threshold",
     "passing", "rejected", "fallback"}; confidence_filter: {"keep", "kept", "dropped", "cutoff", "weights"};
     behaviour: {"inputs": the generated inputs clustered on, "unusable_inputs": [{"input", "error"}],
     "unusable_count", "note": the sentence saying which were left out ('' when none), "error_clusters":
     [indices of clusters whose outputs are all errors], "filtered_out", "runs"};
     weighted with power: {"weighting": "borda", "power", "weights"}; tool_calls: {"calls": [each candidate's
     calls as name(args) lines], "rejected": [indices a tool_schema check failed]}; genselect / tournament: see
     nodes.kinds.vote_select)}

`method: tool_calls` votes over tool-call candidates (answer_json texts): each candidate's calls in canonical form
(nodes.algorithms.tool_calls: names, arguments as BFCL's AST checker compares them, defaults left out, parallel
calls order-free), clusters labelled `name(args)`; a candidate a tool_schema check failed does not vote. Its
`answer` output is the winning candidate's answer_json, what a door returns as tool calls.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from backends.tools.types import ToolAnswer, parse_answer_json
from nodes.algorithms.behaviour import (
    behaviour_vote,
    errors_only,
    failing_everywhere,
    inputs_note,
    parse_inputs,
    usable_inputs,
)
from nodes.algorithms.code_tests import TestReport, extract_code, run_many
from nodes.algorithms.extract import MATH, AnswerSpec, answer_params
from nodes.algorithms.math_equiv import class_answers
from nodes.algorithms.mbr import UTILITIES, mbr_select, utility
from nodes.algorithms.tool_calls import answer_text, canonical_answer, canonical_label
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
from nodes.base import (
    CANDIDATES,
    JSON,
    TEXT,
    Candidate,
    CandidateSet,
    NodeContext,
    NodeError,
    NodeKind,
    Param,
    Port,
)
from nodes.kinds.vote_select import genselect_vote, question_of, select_params, select_problems, tournament_vote
from nodes.scoring import code_limits, code_test_params, code_tests_source, test_detail
from nodes.tool_inputs import request_for

log = logging.getLogger(__name__)

METHODS = ("majority", "weighted", "best_of_n", "mbr", "threshold", "confidence_filter", "behaviour", "genselect",
           "tournament", "tool_calls")
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


def behaviour_of(cands: list[Candidate], params: dict[str, Any], inputs: dict[str, Any],
                 ctx: NodeContext) -> VoteResult:
    """AlphaCode: run every candidate on the tests and inputs, cluster identical behaviour (see algorithms).
    Generated inputs that cannot make a call, and those every program raised the same error on, are left out of
    the signatures and named in the vote's `detail` (`unusable_inputs`, `note`); clusters of errors alone are
    listed in `detail["error_clusters"]`."""
    if not ctx.allow_code_execution():
        raise NodeError("running candidates' code (method: behaviour) is disabled here (shared mode); the owner "
                        "can start the app with --allow-code-execution, or use another voting method")
    entry = str(params.get("entry_point") or "")
    wired = {k: v for k, v in inputs.items() if k not in ("candidates", "generated_inputs", "question")}
    tests, pairs = code_tests_source({**params, "tests": params.get("tests") or ("{tests}" if "tests" in wired
                                                                                  else "")}, wired)
    generated = parse_inputs(params.get("generated_inputs") or [], entry) + parse_inputs(
        inputs.get("generated_inputs"), entry)
    probes, unusable = usable_inputs(generated, entry)
    has_tests = bool(tests.strip() or pairs)
    if not has_tests and not probes:
        if unusable:
            raise NodeError(f"behaviour voting has nothing to run the candidates on: {inputs_note(unusable, 0, False)}"
                            f"; wire the example `tests`, or ask for inputs as argument lists of {entry}() "
                            "(a JSON list such as [[1, 2], [3]])")
        raise NodeError("behaviour voting needs inputs to run the candidates on: wire `tests` or "
                        "`generated_inputs`, or set the tests / io_tests / generated_inputs params")
    scores = [c.score for c in cands]
    pool = list(range(len(cands)))
    if params["filter_passing"] and any(s is not None and s >= 1.0 for s in scores):
        pool = [i for i, s in enumerate(scores) if s is not None and s >= 1.0]
    reports = run_many([cands[i].text for i in pool], tests=tests, entry_point=entry, io_tests=pairs, probes=probes,
                       limits=code_limits(params, ctx))
    ctx.cancel.raise_if_cancelled()  # programs killed by the stop are no behaviour
    ran = [r for r in reports if _ran(r)]
    useless = failing_everywhere([r.outputs for r in ran], len(probes)) if len(ran) > 1 else {}
    unusable += [{"input": probes[k], "error": f"every program raised {err}"} for k, err in useless.items()]
    kept = [k for k in range(len(probes)) if k not in useless]
    if not has_tests and not kept:
        raise NodeError(f"behaviour voting has nothing to cluster on: {inputs_note(unusable, 0, False)}; wire the "
                        "example `tests`, or ask for inputs the programs can run")
    signatures: list[str | None] = [None] * len(cands)
    labels = [""] * len(cands)
    errors = [False] * len(cands)
    for i, report in zip(pool, reports, strict=True):
        cands[i].meta.setdefault("tests", {})[ctx.node_id] = {**test_detail(report), "outputs": report.outputs}
        if _ran(report):
            outputs = [report.outputs[k] for k in kept]
            signatures[i] = json.dumps([*((t.get("output"), t.get("passed")) for t in report.tests), *outputs],
                                       default=str)
            errors[i] = errors_only(report.tests, outputs)
            labels[i] = ("errors only: " if errors[i] else "outputs ") + json.dumps(
                outputs or [t.get("output") for t in report.tests], default=str)[:160]
    vote = behaviour_vote(signatures, scores, labels)
    note = inputs_note(unusable, len(kept), has_tests)
    vote.detail.update({"inputs": [probes[k] for k in kept][:50], "unusable_inputs": unusable[:50],
                        "unusable_count": len(unusable), "note": note,
                        "error_clusters": [k for k, cl in enumerate(vote.clusters) if errors[cl.members[0]]],
                        "filtered_out": [i for i in range(len(cands)) if i not in pool],
                        "runs": {str(i): r.reason for i, r in zip(pool, reports, strict=True)}})
    if note:
        log.info("%s: %s", ctx.node_id, note)
    return vote


def tool_calls_vote(cands: list[Candidate], inputs: dict[str, Any],
                    cset: CandidateSet) -> tuple[VoteResult, list[str | None]]:
    """Majority over the candidates' canonical calls (see the module doc); the canonical keys per candidate (None:
    rejected by a tool_schema check)."""
    request = request_for(inputs, cset)
    parsed = [parse_answer_json(c.text) or ToolAnswer(c.text) for c in cands]
    rejected = [i for i, c in enumerate(cands) if (c.meta.get("tool_schema") or {}).get("ok") is False]
    keys: list[str | None] = [None if i in rejected else canonical_answer(a, request) for i, a in enumerate(parsed)]
    vote = majority_vote(keys)
    vote.method = "tool_calls"
    for cl in vote.clusters:
        cl.answer = canonical_label(cl.answer)
    vote.ties = [canonical_label(t) for t in vote.ties]
    vote.answer = cands[vote.winner].text if vote.winner is not None else None
    vote.detail.update({"calls": [answer_text(a) for a in parsed], "rejected": rejected})
    return vote, keys


def _ran(report: TestReport) -> bool:
    """Whether the program ran at all (a syntax error or a crash on loading has no behaviour to compare)."""
    return any(o is not None for o in report.outputs) or any(t.get("output") is not None for t in report.tests)


class Voter(NodeKind):
    """Aggregates candidates into an answer; candidates without an answer are counted apart."""

    kind = "voter"
    title = "Voter"
    category = "aggregate"
    description = ("Aggregate candidates into one answer: majority (self-consistency), weighted (sum of "
                   "scores), best_of_n (argmax score), mbr (minimum Bayes risk), threshold (rejection), "
                   "confidence_filter (DeepConf: keep the most confident fraction, then a confidence-weighted "
                   "majority; score with a confidence verifier), behaviour (AlphaCode: run the candidates' code on "
                   "test inputs, cluster identical outputs, pick from the largest cluster), genselect (the model "
                   "reads the numbered candidates and names the best), tournament (the model judges pairs in "
                   "both orders; knockout or league), tool_calls (the majority over tool calls compared as BFCL "
                   "compares them).")
    inputs = (
        Port("candidates", CANDIDATES, "Candidates to aggregate (scored, for weighted/best_of_n/threshold)"),
        Port("tests", TEXT, "Behaviour: the item's tests, run on every candidate", required=False),
        Port("generated_inputs", TEXT, "Behaviour: test inputs from an LLM node (a JSON list or one per line)",
             required=False),
        Port("question", TEXT, "GenSelect / tournament: the problem the candidates answer (else the prompt they "
             "were sampled from)", required=False),
        Port("tools", JSON, "Tool calls: the tools, whose schema defaults count as left out (else those the "
             "candidates were drawn with)", required=False),
    )
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
        Param("power", "float", None, "Weighted: Borda weights (N - rank + 1)^power by score rank instead of the "
              "scores themselves (Kang et al.: 0 is majority, large is best-of-N); empty: the scores",
              min=0.0, max=100.0, show_if=("method", ("weighted",))),
        Param("keep", "float", 0.9, "Confidence filter: the most confident fraction of candidates that votes "
              "(DeepConf: 0.1 aggressive, 0.9 safe)", min=0.1, max=1.0, show_if=("method", ("confidence_filter",))),
        *code_test_params(("method", ("behaviour",)), tests_default=""),
        Param("generated_inputs", "json", [], "Behaviour: test inputs (argument lists with entry_point, else "
              "stdin texts); a wired generated_inputs adds to them", show_if=("method", ("behaviour",))),
        Param("filter_passing", "bool", True, "Behaviour: cluster only the candidates scoring 1 (all tests "
              "passed) when there are any", show_if=("method", ("behaviour",))),
        Param("timeout_s", "float", 5.0, "Behaviour: time limit per candidate (seconds)", min=0.1, max=120,
              show_if=("method", ("behaviour",))),
        Param("memory_mb", "int", 512, "Behaviour: memory limit per candidate (MB)", min=32, max=8192,
              show_if=("method", ("behaviour",))),
        *select_params(),
    )
    uses_model = True
    """genselect and tournament ask the model; the other methods make no model call."""

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        return AnswerSpec.from_params(params).problems() + select_problems(params)

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
            vote = weighted_vote(answers, scores, params.get("power"))
        elif method == "best_of_n":
            vote = best_of_n(answers, scores)
        elif method == "threshold":
            vote = threshold_vote(answers, scores, params["threshold"], params["fallback"])
        elif method == "confidence_filter":
            vote = confidence_filter_vote(answers, scores, params["keep"])
        elif method == "genselect":
            vote = genselect_vote(cands, answers, question_of(inputs, cset.prompt), params, ctx)
        elif method == "tournament":
            vote = tournament_vote(cands, answers, question_of(inputs, cset.prompt), params, ctx)
        elif method == "tool_calls":
            vote, answers = tool_calls_vote(cands, inputs, cset)
        elif method == "behaviour":
            vote = behaviour_of(cands, params, inputs, ctx)
            answers = [extract_code(c.text) for c in cands]  # a program's answer is its code
            vote.answer = answers[vote.winner] if vote.winner is not None else None
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
