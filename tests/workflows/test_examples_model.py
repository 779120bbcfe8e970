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
from nodes.algorithms.thinking import without_stray_tags
from nodes.base import CandidateSet
from nodes.registry import default_registry

pytestmark = pytest.mark.model

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Scheduler]:
    """One provider (one loaded model) for the whole module."""
    provider = llama_provider()
    yield Scheduler(default_registry(), provider)
    provider.close()  # its engine worker ends with the module


def run_example(scheduler: Scheduler, name: str) -> tuple[RunResult, EventRecorder]:
    recorder = EventRecorder(skip=("token",))
    result = scheduler.run(load_workflow(WORKFLOWS / f"{name}.yaml"), seed=0, observers=[recorder],
                           use_cache=False)
    assert result.status == SUCCEEDED, result.error
    calls = recorder.of_type("lm_call")
    assert calls, "the example made no model call"
    assert all(c.data["model"] and c.data["prompt"] for c in calls)
    generated = [c.data for c in calls if c.data["finish_reason"] not in ("score", "choice")]
    assert all(c["completion_tokens"] >= 0 and c["finish_reason"] in ("stop", "eog", "length", "low_confidence")
               for c in generated)
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


def test_deepconf(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "deepconf")
    (stop,) = events(recorder, "think", "adaptive_stop")
    cands = result.node_outputs["think"]["candidates"]
    assert stop["mode"] == "confidence" and len(stop["warmup"]) == 4
    assert stop["threshold"] == pytest.approx(sorted(stop["warmup"])[0] + 0.3 * (sorted(stop["warmup"])[1]
                                                                                  - sorted(stop["warmup"])[0]))
    assert len(cands) + stop["stopped_count"] == stop["drawn"]
    stopped = [e.data for e in recorder.of_type("lm_call") if e.data["finish_reason"] == "low_confidence"]
    assert len(stopped) == stop["stopped_count"]
    assert all(c["completion_tokens"] >= 16 for c in stopped)  # a stop needs one full window
    assert all(c.finish_reason != "low_confidence" and c.meta["token_stats"]["confidence"] for c in cands.candidates)
    scores = [c.scores["confidence"] for c in result.node_outputs["confidence"]["candidates"].candidates]
    assert all(s > 0 for s in scores)  # lowest group confidence: -mean log p of the top 20, positive
    (vote,) = events(recorder, "vote", "vote")
    assert len(vote["detail"]["kept"]) == math.ceil(0.5 * len(cands))
    assert result.outputs["answer"] == (vote["answer"] or "")


def test_cot_decoding(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "cot_decoding")
    calls = [e.data for e in recorder.of_type("lm_call") if e.node_id == "branches"]
    assert len(calls) == 6 and calls[0]["completion_tokens"] == 1
    (event,) = events(recorder, "branches", "cot_decoding")
    firsts = [t["token"] for t in event["first_tokens"]]
    assert len(set(firsts)) == 5 and [t["logprob"] for t in event["first_tokens"]] == sorted(
        (t["logprob"] for t in event["first_tokens"]), reverse=True)
    cands = result.node_outputs["branches"]["candidates"]
    assert [c.text.startswith(f.strip()) for c, f in zip(cands.candidates, firsts, strict=True)] == [True] * 5
    assert all(-1.0 <= c.score <= 1.0 for c in cands.candidates)
    answered = [i for i, c in enumerate(cands.candidates) if c.answer is not None] or list(range(5))
    assert cands.winner == max(answered, key=lambda i: (cands.candidates[i].score, -i))
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, 5)


def check_search_tree(tree: dict[str, Any], strategy: str) -> dict[int, dict[str, Any]]:
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert tree["strategy"] == strategy
    for n in tree["nodes"][1:]:
        assert nodes[n["parent"]]["depth"] + 1 == n["depth"] <= 3
    path = tree["chosen_path"]
    assert path[0] == 0 and all(nodes[b]["parent"] == a for a, b in itertools.pairwise(path))
    assert all(nodes[i]["chosen"] and not nodes[i]["pruned"] for i in path)
    return nodes


def test_dvts(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "dvts")
    nodes = check_search_tree(result.outputs["tree"], "dvts")
    first = [n for n in nodes.values() if n["depth"] == 1]
    assert sorted(n["subtree"] for n in first) == [0, 0, 1, 1]  # 2 x 2 samples over 2 subtrees
    for depth in (2, 3):  # each subtree expands only its own best step
        parents = {nodes[n["parent"]]["subtree"]: n["parent"] for n in nodes.values() if n["depth"] == depth}
        assert all(nodes[p]["subtree"] == s for s, p in parents.items())
        assert len({n["parent"] for n in nodes.values() if n["depth"] == depth}) <= 2
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, len(result.node_outputs["search"]["candidates"]))


def test_particle_filter(scheduler: Scheduler) -> None:
    result, _ = run_example(scheduler, "particle_filter")
    nodes = check_search_tree(result.outputs["tree"], "particles")
    generations = sorted({n["generation"] for n in nodes.values() if "generation" in n})
    assert generations and generations[0] == 1
    for g in generations:
        drawn = [n for n in nodes.values() if n.get("generation") == g]
        assert 0 < len(drawn) <= 4 and sum(n["copies"] for n in drawn) <= 4


def test_mcts(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "mcts")
    nodes = check_search_tree(result.outputs["tree"], "mcts")
    assert 4 <= nodes[0]["visits"] <= 8  # 4 simulations, up to expand_k values backed up each
    path = result.outputs["tree"]["chosen_path"]
    assert nodes[path[-1]]["terminal"] and all(nodes[i]["visits"] >= 1 for i in path)
    assert any(c.data["purpose"] == "score" for c in recorder.of_type("lm_call"))


def test_thinking_budget(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "thinking_budget")
    cands = result.node_outputs["think"]["candidates"].candidates
    assert len(cands) == 3 and len(result.outputs["thinking"]) == 3
    calls = [c.data for c in recorder.of_type("lm_call")]
    think = [c for c in calls if c["purpose"] == "think"]
    assert think and all(c["prompt"].rstrip().endswith("<think>") or "Wait" in c["prompt"] for c in think)
    answers = {c["tag"]["sample"]: c for c in calls if c["tag"].get("phase") == "answer"}
    assert sorted(answers) == [0, 1, 2] and all(c["prompt"].endswith("</think>\n") for c in answers.values())
    for i, (cand, thinking) in enumerate(zip(cands, result.outputs["thinking"], strict=True)):
        # the candidate is the answer call's text alone, without the stray tags an untrained model writes there
        assert cand.meta["thinking"] == thinking
        assert cand.text == without_stray_tags(answers[i]["completion"], "<think>", "</think>").strip()
        assert "<think>" not in cand.text and "</think>" not in cand.text
        assert answers[i]["prompt"].endswith(thinking + "</think>\n") or thinking in answers[i]["prompt"]
        assert 8 <= cand.meta["thinking_tokens"] <= 48 or cand.meta["think_waits"] == 8
    assert sum(c.get("thinking_tokens", 0) for c in think) == sum(c.meta["thinking_tokens"] for c in cands)
    assert result.stats.thinking_tokens == sum(c.meta["thinking_tokens"] for c in cands)


def test_prm_beam(scheduler: Scheduler) -> None:
    """The bundled model as a stand-in PRM: every depth's children scored in one batched step-logprobs request."""
    result, recorder = run_example(scheduler, "prm_beam")
    nodes = {n["id"]: n for n in result.outputs["tree"]["nodes"]}
    scored = [n for n in nodes.values() if n["id"] and n["finish"] != "empty"]
    assert scored and all(0.0 < n["score"] < 1.0 for n in scored)  # P(' Yes') / (P(' Yes') + P(' No'))
    prm_calls = [c.data for c in recorder.of_type("lm_call") if c.data["purpose"] == "prm"]
    assert len(prm_calls) == len(scored)  # one traced call per scored partial solution
    assert all(c["step_logprobs"] and set(c["step_logprobs"][-1]) == {" Yes", " No"} for c in prm_calls)
    for depth in range(1, 4):  # one request per depth: its calls share a start time
        starts = {c["start"] for c, n in zip(prm_calls, scored, strict=False) if n["depth"] == depth}
        assert len(starts) <= 1
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, len(result.node_outputs["search"]["candidates"]))


def check_beam_tree(tree: dict[str, Any], n: int, groups: int) -> None:
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert sum(1 for x in tree["nodes"] if x["step"] == 0) == groups
    for x in tree["nodes"]:
        if x["step"] > 0:
            assert nodes[x["parent"]]["step"] == x["step"] - 1 and x["text"] is not None
    assert {x["status"] for x in tree["nodes"]} <= {"kept", "finished", "pruned"}
    assert sum(1 for x in tree["nodes"] if x["step"] == 1) == n


def test_beam_rerank(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "beam_rerank")
    beams = result.node_outputs["beams"]["candidates"].candidates
    assert len(beams) == 8
    scores = [c.scores["beams"] for c in beams]
    assert scores == sorted(scores, reverse=True) and all(s <= 0 for s in scores)
    (tree,) = events(recorder, "beams", "beam_tree")
    check_beam_tree(tree, 8, 1)
    judged = result.node_outputs["judge"]["candidates"].candidates
    assert result.outputs["answer"] == max(judged, key=lambda c: (c.score, -c.index)).text


def test_diverse_beam(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "diverse_beam")
    beams = result.node_outputs["beams"]["candidates"].candidates
    assert len(beams) == 6 and {c.meta["beam"]["group"] for c in beams} == {0, 1, 2}
    (tree,) = events(recorder, "beams", "beam_tree")
    check_beam_tree(tree, 6, 3)
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, 6)


def test_genselect(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "genselect")
    cands = result.node_outputs["sample"]["candidates"]
    (vote,) = events(recorder, "select", "vote")
    check_vote_adds_up(vote, 4)
    (group,) = vote["detail"]["rounds"][0]  # 4 candidates fit one prompt
    assert group["group"] == [0, 1, 2, 3] and len(group["draws"]) == 3
    picks = [d["pick"] for d in group["draws"]]
    assert all(p is None or 0 <= p < 4 for p in picks) and all(isinstance(d["reasoning"], str) for d in group["draws"])
    assert vote["winner"] == group["winner"] and (group["fallback"] or group["winner"] in picks)
    assert result.outputs["best"] == cands.candidates[vote["winner"]].text  # one of the candidates
    calls = [e.data for e in recorder.of_type("lm_call") if e.node_id == "select"]
    assert len(calls) == 3 and all("Candidate 4:" in c["prompt"] for c in calls)


def test_tournament(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "tournament")
    cands = result.node_outputs["sample"]["candidates"]
    (vote,) = events(recorder, "knockout", "vote")
    rounds = vote["detail"]["rounds"]
    assert [(m["a"], m["b"]) for m in rounds[0]["matches"]] == [(0, 1), (2, 3)]
    assert len(rounds) == 2 and len(rounds[1]["matches"]) == 1
    final = rounds[1]["matches"][0]
    assert {final["a"], final["b"]} == {m["winner"] for m in rounds[0]["matches"]}
    assert vote["winner"] == final["winner"]
    for r in rounds:
        for m in r["matches"]:
            assert [j["order"] for j in m["judgements"]] == ["ab", "ba"] and sum(m["wins"]) <= 2
    assert result.outputs["best"] == cands.candidates[vote["winner"]].text
    calls = [e.data for e in recorder.of_type("lm_call") if e.node_id == "knockout"]
    assert len(calls) == 6 and all("Response A:" in c["prompt"] for c in calls)


def test_self_certainty_bon(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "self_certainty_bon")
    cands = result.node_outputs["sample"]["candidates"].candidates
    scored = result.node_outputs["certainty"]["candidates"].candidates
    for c, s in zip(cands, scored, strict=True):
        per_token = c.meta["token_stats"].get("self_certainty", [])
        assert len(per_token) == c.completion_tokens and all(v >= 0 for v in per_token)
        expected = sum(per_token) / len(per_token) if per_token else -1e9  # an empty sample ranks last
        assert s.scores["certainty"] == pytest.approx(expected)
    assert not [e for e in recorder.of_type("lm_call") if e.node_id == "certainty"], "no second pass"
    scores = [s.scores["certainty"] for s in scored]
    (best,) = events(recorder, "best", "vote")
    assert scores[best["winner"]] == max(scores)
    (borda,) = events(recorder, "borda", "vote")
    assert borda["detail"]["weighting"] == "borda" and borda["detail"]["power"] == 0.5
    check_vote_adds_up(borda, 6)
def test_rsa(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "rsa")
    (event,) = events(recorder, "aggregate", "rsa")
    generations = event["generations"]
    drawn = result.node_outputs["draw"]["candidates"]
    assert [c["text"] for c in generations[0]] == [c.text for c in drawn.candidates]  # the wired population
    assert [len(g) for g in generations] == [3, 3, 3]
    for before, after in itertools.pairwise(generations):
        ids = {c["id"] for c in before}
        assert all(len(set(c["parents"])) == 2 and set(c["parents"]) <= ids for c in after)
    calls = [e.data for e in recorder.of_type("lm_call") if e.node_id == "aggregate"]
    assert len(calls) == 6 and all(c["purpose"] == "rsa" for c in calls)
    for c in calls:  # each aggregation prompt shows exactly the texts of its two parents
        texts = {x["id"]: x["text"] for g in generations for x in g}
        assert all(texts[p].strip() in c["prompt"] for p in c["tag"]["parents"]) and "Solution 2:" in c["prompt"]
    final = result.node_outputs["aggregate"]["candidates"]
    assert final.texts() == [c["text"] for c in generations[-1]]
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, 3)


def test_deer_think(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "deer_think")
    (event,) = events(recorder, "think", "think_early_exit")
    cands = result.node_outputs["think"]["candidates"].candidates
    assert len(cands) == len(event["samples"]) == 3
    calls = [e.data for e in recorder.of_type("lm_call")]
    probes = [c for c in calls if c["purpose"] == "think_probe"]
    assert len(probes) == sum(len(s["probes"]) for s in event["samples"])
    assert all(c["prompt"].endswith("</think>\nFinal answer:") and c["completion_tokens"] <= 16 for c in probes)
    for sample, cand in zip(event["samples"], cands, strict=True):
        assert cand.meta["think_exited"] == sample["exited"]
        assert cand.meta["thinking_tokens"] == sample["thinking_tokens"]
        assert all(0.0 < p["confidence"] <= 1.0 for p in sample["probes"])
        if sample["exited"]:  # the last probe was confident and its trial answer is the candidate
            last = sample["probes"][-1]
            assert last["confidence"] >= 0.7 and cand.text == f"Final answer: {last['answer']}"
        else:
            assert all(p["confidence"] < 0.7 for p in sample["probes"]) and sample["thinking_tokens"] <= 48
    assert event["probe_tokens"] == sum(c["completion_tokens"] for c in probes)
    assert result.stats.thinking_tokens == event["thinking_tokens"]  # probes are not thinking


def test_ab_mcts(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "ab_mcts")
    nodes = check_search_tree(result.outputs["tree"], "ab_mcts")
    steps = [n for i, n in nodes.items() if i != 0]
    assert len(steps) == 6 and all(n["branch"] in ("wider", "deeper") for n in steps)
    assert all(n["branch"] == "wider" for n in steps if n["parent"] == 0)
    assert nodes[0]["visits"] == len([n for n in steps if n["finish"] != "empty"])
    assert any(c.data["purpose"] == "score" for c in recorder.of_type("lm_call"))
    (vote,) = events(recorder, "vote", "vote")
    check_vote_adds_up(vote, len(result.node_outputs["search"]["candidates"]))
