"""The confidence verifier, the confidence_filter voter, DeepConf online and CoT decoding through the scheduler on
the scripted fake backend (words are tokens; their confidences are scripted)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import FAILED, SUCCEEDED, RunResult, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.algorithms.cot_decoding import token_margin
from nodes.registry import default_registry

REGISTRY = default_registry()
CONF = {"hi": 5.0, "lo": 1.0, "mid": 3.0, "7": 5.0, "3": 5.0}


def make(nodes: list[dict[str, Any]], outputs: dict[str, str]) -> Any:
    return workflow_from_dict({"version": 1, "name": "t", "nodes": nodes, "outputs": outputs,
                               "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}}})


def run(wf: Any, **fake: Any) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    return Scheduler(REGISTRY, fake_provider(**fake)).run(wf, seed=0, observers=[rec]), rec


def events(rec: EventRecorder, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in rec.of_type("node_event") if e.data["kind"] == kind]


def sampler(n: int, **params: Any) -> dict[str, Any]:
    return {"id": "s", "kind": "sampler", "params": {"n": n, "prompt": "{question}", "extract": "last_number",
                                                     **params}, "inputs": {"question": "inputs.question"}}


def confidence(measure: str, group: int = 2) -> dict[str, Any]:
    return {"id": "c", "kind": "verifier", "params": {"method": "confidence", "measure": measure,
                                                      "group_size": group}, "inputs": {"candidates": "s.candidates"}}


@pytest.mark.parametrize(("measure", "expected"), [("lowest_group", [2.0, 1.0]), ("tail", [5.0, 1.0]),
                                                   ("neg_entropy", [-1.0, -3.0])])
def test_confidence_verifier_scores_from_the_samples_token_statistics(measure: str, expected: list[float]) -> None:
    wf = make([sampler(2), confidence(measure)], {"scores": "c.scores"})
    result, rec = run(wf, replies=["lo mid hi 7", "lo lo lo 3"], token_confidence={**CONF, "7": 5.0, "3": 1.0})
    assert result.status == SUCCEEDED, result.error
    # confidences [1, 3, 5, 5] and [1, 1, 1, 1]; the fake's entropy is 4 - confidence
    assert result.outputs["scores"] == pytest.approx(expected)
    stats = result.node_outputs["s"]["candidates"].candidates[0].meta["token_stats"]
    assert stats["confidence"] == [1.0, 3.0, 5.0, 5.0] and len(stats["logprob"]) == 4
    assert not [e for e in rec.of_type("lm_call") if e.node_id == "c"], "confidence makes no model call"


def test_confidence_verifier_refuses_candidates_without_token_statistics() -> None:
    gen = {"id": "s", "kind": "generator", "params": {"prompt": "{question}"},
           "inputs": {"question": "inputs.question"}}
    result, _ = run(make([gen, confidence("tail")], {"scores": "c.scores"}))
    assert result.status == FAILED and "token statistics" in (result.error or "")


def test_confidence_filter_voter_keeps_the_confident_minority() -> None:
    vote = {"id": "v", "kind": "voter", "params": {"method": "confidence_filter", "keep": 0.4,
                                                   "extract": "last_number"}, "inputs": {"candidates": "c.candidates"}}
    wf = make([sampler(5), confidence("lowest_group"), vote], {"answer": "v.answer", "result": "v.result"})
    replies = ["lo lo 3", "lo lo 3", "lo lo 3", "hi hi 7", "hi hi 7"]
    result, _ = run(wf, replies=replies, token_confidence={**CONF, "3": 1.0})
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["answer"] == "7"  # a plain majority would say 3
    assert result.outputs["result"]["detail"]["kept"] == [3, 4]


def test_deepconf_online_stops_low_confidence_samples_and_reports_the_saving() -> None:
    wf = make([sampler(4, adaptive="confidence", min_samples=2, batch_size=2, keep=0.5, group_size=2)],
              {"c": "s.candidates"})
    # warm-up lowest group confidences 5 and 3: threshold = their median, 4
    replies = ["hi hi hi hi 7", "hi hi lo hi 7", "lo lo lo lo 3", "hi hi hi hi 7"]
    result, rec = run(wf, replies=replies, token_confidence=CONF)
    assert result.status == SUCCEEDED, result.error
    (stop,) = events(rec, "adaptive_stop")
    assert stop["mode"] == "confidence" and stop["threshold"] == pytest.approx(4.0)
    assert stop["warmup"] == [5.0, 3.0] and stop["batches"] == [2, 2]
    assert stop["stopped"] == [{"index": 2, "seed": stop["stopped"][0]["seed"], "tokens": 2}]
    assert stop["tokens_generated"] == 5 + 5 + 2 + 5 and stop["tokens_saved_est"] == 3
    cands = result.outputs["c"].candidates
    assert [c.index for c in cands] == [0, 1, 3] and all(c.answer == "7" for c in cands)
    finishes = [e.data["finish_reason"] for e in rec.of_type("lm_call")]
    assert finishes.count("low_confidence") == 1


def test_deepconf_online_stops_drawing_once_the_vote_is_decided() -> None:
    wf = make([sampler(8, adaptive="confidence", min_samples=3, batch_size=2, keep=0.9, group_size=2)],
              {"c": "s.candidates"})
    result, rec = run(wf, replies=["hi hi 7"], token_confidence=CONF)
    (stop,) = events(rec, "adaptive_stop")
    assert result.status == SUCCEEDED and stop["stopped_count"] == 0
    assert stop["drawn"] == 5 and stop["saved"] == 3  # 5 sevens: the 3 samples left cannot change the vote


def test_cot_decoding_branches_on_the_first_tokens_and_picks_the_largest_margin() -> None:
    def reply(prompt: str, seed: int) -> str:
        for branch, text in (("Sure~2", " so 7"), ("Sure~1", " so 8"), ("Sure", " it is 7")):
            if prompt.endswith(branch):
                return text
        return "Sure thing"

    vote = {"id": "v", "kind": "voter", "params": {"method": "weighted", "extract": "last_number"},
            "inputs": {"candidates": "s.candidates"}}
    wf = make([sampler(3, method="cot_decoding"), vote], {"c": "s.candidates", "answer": "v.answer"})
    result, rec = run(wf, reply_fn=reply)
    assert result.status == SUCCEEDED, result.error
    calls = [e.data for e in rec.of_type("lm_call") if e.node_id == "s"]
    assert len(calls) == 4 and calls[0]["completion_tokens"] == 1  # the first tokens, then 3 greedy branches
    cset = result.outputs["c"]
    assert [c.text for c in cset.candidates] == ["Sure it is 7", "Sure~1 so 8", "Sure~2 so 7"]
    assert [c.answer for c in cset.candidates] == ["7", "8", "7"]
    by_first = {c["tag"]["first_token"]: c for c in calls[1:]}
    for cand in cset.candidates:
        first = cand.meta["cot"]["first_token"]
        last = by_first[first]["logprobs"][-1]  # the answer is the branch's last token
        assert cand.score == pytest.approx(token_margin([tuple(t) for t in last["top"]]))
        assert by_first[first]["prompt"].endswith(first)
    assert cset.winner == max(range(3), key=lambda i: cset.candidates[i].score)
    (event,) = events(rec, "cot_decoding")
    assert event["winner"] == cset.winner and len(event["branches"]) == 3
    sevens = sum(c.score for c in cset.candidates if c.answer == "7")
    assert result.outputs["answer"] == ("7" if sevens >= cset.candidates[1].score else "8")
    assert math.isclose(max(sevens, cset.candidates[1].score),
                        result.node_outputs["v"]["result"]["clusters"][0]["weight"])


@pytest.mark.parametrize(("kind", "params", "bad"), [
    ("sampler", {"method": "cot_decoding", "n": 30}, "n"),
    ("sampler", {"method": "cot_decoding", "adaptive": "majority"}, "adaptive"),
    ("sampler", {"adaptive": "confidence", "n": 4, "min_samples": 4}, "min_samples"),
    ("sampler", {"adaptive": "confidence", "keep": 0.05}, "keep"),
    ("sampler", {"adaptive": "confidence", "group_size": 0}, "group_size"),
    ("sampler", {"method": "nucleus"}, "method"),  # (beam became a method of its own)
    ("verifier", {"method": "confidence", "measure": "median"}, "measure"),
    ("verifier", {"method": "confidence", "group_size": -3}, "group_size"),
    ("voter", {"method": "confidence_filter", "keep": 2}, "keep"),
])
def test_bad_params_are_refused_with_a_code_before_anything_runs(kind: str, params: dict[str, Any], bad: str) -> None:
    node: dict[str, Any] = {"id": "x", "kind": kind, "params": params}
    if kind == "sampler":
        node["params"] = {"prompt": "{question}", **params}
        node["inputs"] = {"question": "inputs.question"}
    else:
        node["inputs"] = {"candidates": "s.candidates"}
    nodes = [node] if kind == "sampler" else [sampler(2), node]
    issues = validate(make(nodes, {"o": f"{node['id']}.{'candidates' if kind != 'voter' else 'answer'}"}), REGISTRY)
    assert any(i.code == "bad_param" and bad in i.message for i in issues), [i.format() for i in issues]
