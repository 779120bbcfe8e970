"""Recursive self-aggregation (the refiner's `method: rsa`): the subsets by hand, the rounds on the fake backend."""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import FAILED, SUCCEEDED, RunResult, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.algorithms.rsa import draw_subsets, numbered_solutions
from nodes.base import CandidateSet
from nodes.registry import default_registry

REGISTRY = default_registry()


def test_subsets_are_distinct_sorted_seeded_and_bounded() -> None:
    rng, copy = random.Random(5), random.Random(5)
    subsets = draw_subsets(5, 4, 3, rng)
    assert subsets == [sorted(copy.sample(range(5), 3)) for _ in range(4)]
    assert all(len(set(s)) == 3 and s == sorted(s) and set(s) <= set(range(5)) for s in subsets)
    assert draw_subsets(3, 2, 3, random.Random(0)) == [[0, 1, 2], [0, 1, 2]]
    with pytest.raises(ValueError, match="population of 2"):
        draw_subsets(2, 1, 3, random.Random(0))
    with pytest.raises(ValueError):
        draw_subsets(2, 1, 0, random.Random(0))


def test_numbered_solutions() -> None:
    assert numbered_solutions([" a ", "b\n"]) == "Solution 1:\na\n\nSolution 2:\nb"


def rsa_wf(extra_nodes: list[dict[str, Any]] | None = None, inputs: dict[str, str] | None = None, **params: Any):
    node = {"id": "r", "kind": "refiner", "inputs": inputs or {"question": "inputs.question"},
            "params": {"prompt": "{question}", "method": "rsa", "temperature": 0.7, **params}}
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [*(extra_nodes or []), node],
        "outputs": {"text": "r.text", "c": "r.candidates", "its": "r.iterations"}})


def run(wf, **fake: Any) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    return Scheduler(REGISTRY, fake_provider(**fake)).run(wf, seed=0, observers=[rec]), rec


def combiner(prompt: str, seed: int) -> str:
    """The first population says 'p<seed>'; an aggregation names what it combined."""
    shown = re.findall(r"Solution \d+:\n(.+)", prompt)
    return f"[{'+'.join(shown)}]" if shown else f"p{seed}"


def test_rsa_makes_n_candidates_per_round_each_from_k_of_the_last_round() -> None:
    result, rec = run(rsa_wf(population=4, subset=2, rounds=2), reply_fn=combiner)
    assert result.status == SUCCEEDED, result.error
    (event,) = [e.data for e in rec.of_type("node_event") if e.data["kind"] == "rsa"]
    generations = event["generations"]
    assert [len(g) for g in generations] == [4, 4, 4] and event["subset"] == 2 and event["rounds"] == 2
    calls = [e.data for e in rec.of_type("lm_call") if e.node_id == "r"]
    base = min(c["seed"] for c in calls)  # the node's derived seed: sample i of the first population has base + i
    assert [c["text"] for c in generations[0]] == [f"p{base + i}" for i in range(4)]
    for before, after in itertools.pairwise(generations):
        text_of = {c["id"]: c["text"] for c in before}
        for c in after:  # the lineage: each candidate combined exactly the texts of its two parents
            assert len(c["parents"]) == 2 and len(set(c["parents"])) == 2
            assert c["text"] == "[" + "+".join(text_of[p] for p in c["parents"]) + "]"
    out: CandidateSet = result.outputs["c"]
    assert out.texts() == [c["text"] for c in generations[-1]] == [c["text"] for c in result.outputs["its"][-1][
        "candidates"]]
    assert [c.meta["rsa"]["parents"] for c in out.candidates] == [c["parents"] for c in generations[-1]]
    assert result.outputs["text"] == out.texts()[0]
    assert [c["tag"]["rsa_round"] for c in calls].count(0) == 4  # the first population: one request of n = 4
    assert len({c["start"] for c in calls if c["tag"]["rsa_round"] == 0}) == 1
    for r in (1, 2):  # each round: N requests, each with its own seed
        round_calls = [c for c in calls if c["tag"]["rsa_round"] == r]
        assert len(round_calls) == 4 and len({c["seed"] for c in round_calls}) == 4
    again, _ = run(rsa_wf(population=4, subset=2, rounds=2), reply_fn=combiner)
    assert again.outputs["its"] == result.outputs["its"]


def test_rsa_starts_from_a_wired_population() -> None:
    sampler = {"id": "s", "kind": "sampler", "params": {"prompt": "{question}", "n": 3},
               "inputs": {"question": "inputs.question"}}
    wf = rsa_wf([sampler], {"question": "inputs.question", "candidates": "s.candidates"},
                population=3, subset=3, rounds=1)
    result, rec = run(wf, reply_fn=combiner)
    assert result.status == SUCCEEDED, result.error
    (event,) = [e.data for e in rec.of_type("node_event") if e.data["kind"] == "rsa"]
    first = [c["text"] for c in event["generations"][0]]
    assert first == [c.text for c in result.node_outputs["s"]["candidates"].candidates] and len(set(first)) == 3
    assert [c["text"] for c in event["generations"][1]] == ["[" + "+".join(first) + "]"] * 3
    assert all(c["tag"]["rsa_round"] == 1 for c in (e.data for e in rec.of_type("lm_call") if e.node_id == "r"))
    too_few = rsa_wf([{**sampler, "params": {**sampler["params"], "n": 2}}],
                     {"question": "inputs.question", "candidates": "s.candidates"}, population=3, subset=3, rounds=1)
    result, _ = run(too_few, reply_fn=combiner)
    assert result.status == FAILED and "fewer than subset" in (result.error or "")


@pytest.mark.parametrize("params,param,words", [
    ({"population": 2, "subset": 3}, "subset", "more than the population"),
    ({"rounds": 0}, "rounds", ">= 1"),
    ({"check": "regex", "regex": "7"}, "check", "verifier node after"),
    ({"method": "aggregate"}, "method", "refine, rsa"),
])
def test_bad_rsa_params_are_refused(params: dict[str, Any], param: str, words: str) -> None:
    issues = validate(rsa_wf(**params), REGISTRY)
    assert [i.code for i in issues] == ["bad_param"]
    assert param in issues[0].message and words in issues[0].message


def test_rsa_needs_no_reference_and_the_default_is_still_refine() -> None:
    assert validate(rsa_wf(population=3, subset=3), REGISTRY) == []
    assert REGISTRY.get("refiner").param("method").default == "refine"
    assert REGISTRY.get("refiner").required_inputs({"method": "rsa", "prompt": "{question}",
                                                    "aggregate_prompt": "{task} {solutions} {style}"}) == [
        "question", "style"]
