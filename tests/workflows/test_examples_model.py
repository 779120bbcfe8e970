"""Each example workflow once on the real bundled model (llama.cpp): structure, not the model's wisdom."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import llama_provider
from app.run.scheduler import SUCCEEDED, RunResult, Scheduler
from app.workflow.spec import load_workflow
from nodes.base import CandidateSet
from nodes.registry import default_registry

pytestmark = pytest.mark.model

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Scheduler]:
    """One provider (one loaded model) for the whole module."""
    yield Scheduler(default_registry(), llama_provider())


def run_example(scheduler: Scheduler, name: str) -> tuple[RunResult, EventRecorder]:
    recorder = EventRecorder(skip=("token",))
    result = scheduler.run(load_workflow(WORKFLOWS / f"{name}.yaml"), seed=0, observers=[recorder],
                           use_cache=False)
    assert result.status == SUCCEEDED, result.error
    calls = recorder.of_type("lm_call")
    assert calls, "the example made no model call"
    assert all(c.data["model"] and c.data["prompt"] for c in calls)
    generated = [c.data for c in calls if c.data["finish_reason"] not in ("score", "choice")]
    assert all(c["completion_tokens"] >= 0 and c["finish_reason"] in ("stop", "eog", "length") for c in generated)
    return result, recorder


def events(recorder: EventRecorder, node: str, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in recorder.of_type("node_event") if e.node_id == node and e.data["kind"] == kind]


def check_vote_adds_up(vote: dict[str, Any], n: int) -> None:
    assert sum(c["count"] for c in vote["clusters"]) + vote["no_answer_count"] == vote["total"] == n
    members = sorted(i for c in vote["clusters"] for i in c["members"]) + vote["no_answer"]
    assert sorted(members) == list(range(n))
    if vote["answer"] is not None:
        assert vote["winner"] in next(c["members"] for c in vote["clusters"] if c["answer"] == vote["answer"])


def check_scores(cands: CandidateSet, node: str, low: float = 0.0, high: float = 1.0) -> list[float]:
    scores = [c.scores[node] for c in cands.candidates]
    assert all(low <= s <= high and not math.isnan(s) for s in scores), scores
    assert all(c.meta["reasons"][node] for c in cands.candidates)
    return scores


def test_chain_of_thought(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "chain_of_thought")
    assert isinstance(result.outputs["answer"], str) and isinstance(result.outputs["reasoning"], str)
    think, answer = (next(e.data for e in recorder.of_type("lm_call") if e.node_id == n) for n in ("think", "answer"))
    assert think["completion"].strip() in answer["prompt"]  # the second step reads the first
    assert think["seed"] is not None and answer["completion_tokens"] <= 16


def test_self_consistency(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "self_consistency")
    (adaptive,) = events(recorder, "think", "adaptive_stop")
    cands = result.node_outputs["think"]["candidates"]
    assert len(cands) == adaptive["drawn"] == adaptive["n"] - adaptive["saved"] and 4 <= adaptive["drawn"] <= 8
    assert len({c.seed for c in cands.candidates}) == len(cands)
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, len(cands))
    assert result.outputs["answer"] == (vote["answer"] or "")
    if vote["answer"] is not None:
        assert vote["clusters"][0]["count"] == max(c["count"] for c in vote["clusters"])


def test_best_of_n(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "best_of_n")
    scored = result.node_outputs["judge"]["candidates"]
    assert len(scored) == 6
    scores = check_scores(scored, "judge")
    assert len([e for e in recorder.of_type("lm_call") if e.data["purpose"] == "judge"]) == 6
    (vote,) = events(recorder, "pick", "vote")
    assert scores[vote["winner"]] == max(scores)
    assert result.outputs["answer"] == scored.candidates[vote["winner"]].text


def test_weighted_vote(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "weighted_vote")
    scored = result.node_outputs["judge"]["candidates"]
    scores = check_scores(scored, "judge")
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, 6)
    for cluster in vote["clusters"]:
        assert cluster["weight"] == pytest.approx(sum(scores[i] for i in cluster["members"]))
    if vote["clusters"]:
        assert vote["clusters"][0]["weight"] == pytest.approx(max(c["weight"] for c in vote["clusters"]))


def test_mbr(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "mbr")
    cands = result.node_outputs["sample"]["candidates"]
    (vote,) = events(recorder, "mbr", "vote")
    expected = vote["detail"]["expected_utility"]
    assert len(expected) == len(cands) == 6 and all(0.0 <= u <= 1.0 for u in expected)
    assert expected[vote["winner"]] == max(expected)
    assert result.outputs["answer"] == cands.candidates[vote["winner"]].text


def test_rejection_sampling(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "rejection_sampling")
    checked = result.node_outputs["check"]["candidates"]
    scores = check_scores(checked, "check")
    assert set(scores) <= {0.0, 1.0}
    for c in checked.candidates:  # the oracle agrees with a recomputation: answer == 3 + 4
        assert (c.scores["check"] == 1.0) == (c.answer is not None and float(c.answer) == 7.0)
    (vote,) = events(recorder, "accept", "vote")
    assert vote["accepted"] == (1.0 in scores)
    if vote["accepted"]:
        assert vote["winner"] == scores.index(1.0) and result.outputs["answer"] == "7"


def test_self_refine(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "self_refine")
    iterations = result.outputs["iterations"]
    (event,) = events(recorder, "refine", "refine")
    assert 1 <= len(iterations) <= 3 and event["iterations"] == iterations
    assert event["stopped"] in ("threshold", "no_issues", "unchanged", "max_iters")
    assert all(it["draft"] is not None and it["score"] in (0.0, 1.0) for it in iterations)
    for before, after in itertools.pairwise(iterations):
        assert before["feedback"] and before["revision"] == after["draft"]
        assert before["score"] == 0.0 and before["reason"] in before["feedback"]  # extrinsic feedback
    if event["stopped"] == "threshold":
        assert iterations[-1]["score"] == 1.0
    assert result.outputs["text"] == iterations[event["chosen"]]["draft"]


def test_beam_search(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "beam_search")
    tree = result.outputs["tree"]
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert nodes[0]["parent"] is None and nodes[0]["depth"] == 0
    for n in tree["nodes"][1:]:
        assert nodes[n["parent"]]["depth"] + 1 == n["depth"] <= 3
        if n["finish"] != "empty":
            assert n["score"] is not None and 0.0 <= n["score"] <= 1.0
    for node_id, node in nodes.items():
        kids = [n for n in tree["nodes"] if n["parent"] == node_id]
        assert len(kids) in (0, 2), f"node {node_id} was expanded with {len(kids)} steps, expected expand_k=2"
        if kids:
            assert not node["terminal"] or node["finish"] == "exhausted"
    for depth in range(1, 4):
        expanded = {n["parent"] for n in tree["nodes"] if n["depth"] == depth + 1}
        assert len(expanded) <= 2  # beam_width
    path = tree["chosen_path"]
    assert path[0] == 0 and all(nodes[b]["parent"] == a for a, b in itertools.pairwise(path))
    assert all(nodes[i]["chosen"] for i in path) and sum(n["chosen"] for n in tree["nodes"]) == len(path)
    # the node's answer is the chosen path as the model wrote it (each step after its lead), stripped
    assert result.outputs["solution"] == "\n".join(nodes[i]["lead"] + nodes[i]["text"] for i in path[1:]).strip()
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, len(result.node_outputs["search"]["candidates"]))


def test_universal_self_consistency(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "universal_self_consistency")
    drafts = result.node_outputs["drafts"]["candidates"]
    request = result.node_outputs["ask"]["text"]
    assert len(drafts) == 5
    for i, c in enumerate(drafts.candidates, start=1):
        assert f"[{i}] {c.text.strip()}" in request
    choose = next(e.data for e in recorder.of_type("lm_call") if e.node_id == "choose")
    assert "[5]" in choose["prompt"]
    assert isinstance(result.outputs["answer"], str)


def test_instruction_best_of_n(scheduler: Scheduler) -> None:
    result, _ = run_example(scheduler, "instruction_best_of_n")
    cands = result.node_outputs["check"]["candidates"]
    scores = check_scores(cands, "check")
    assert set(scores) <= {0.0, 1.0} and len(scores) == 8
    for c in cands.candidates:  # the python check's verdict is the rule (default: all in lowercase)
        assert (c.scores["check"] == 1.0) == (any(ch.isalpha() for ch in c.text) and c.text == c.text.lower()), c.text
    top = max(scores)
    assert result.outputs["answer"] in {c.text.strip() for c in cands.candidates if c.scores["check"] == top}


def test_instruction_greedy(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "instruction_greedy")
    (call,) = recorder.of_type("lm_call")
    assert result.outputs["answer"] == call.data["completion"].strip()
