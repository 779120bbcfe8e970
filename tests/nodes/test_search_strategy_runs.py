"""The search node's DVTS, particle-filtering and MCTS strategies through the scheduler on the fake backend."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, RunResult, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.registry import default_registry

REGISTRY = default_registry()


def stepper(prompt: str, seed: int) -> str:
    """Each expansion writes one step; the third step answers."""
    done = prompt.count("step ")
    if done >= 2:
        return f"Answer: {7 + seed % 2}\n"
    return f"step {seed % 5} of {done}\nmore"


def search_wf(**params: Any):
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "x", "kind": "search", "inputs": {"question": "inputs.question"},
                   "params": {"prompt": "{question}", "step_delimiter": "\n", "max_depth": 4, **params}}],
        "outputs": {"text": "x.text", "tree": "x.tree", "c": "x.candidates"}})


def run(wf, **fake: Any) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(**fake)).run(wf, seed=0, observers=[rec])
    assert result.status == SUCCEEDED, result.error
    return result, rec


def check_tree(tree: dict[str, Any]) -> dict[int, dict[str, Any]]:
    nodes = {n["id"]: n for n in tree["nodes"]}
    for n in nodes.values():
        if n["parent"] is not None:
            assert nodes[n["parent"]]["depth"] + 1 == n["depth"]
    path = tree["chosen_path"]
    assert path[0] == 0 and all(nodes[b]["parent"] == a for a, b in itertools.pairwise(path))
    assert all(nodes[i]["chosen"] and not nodes[i]["pruned"] for i in path)
    return nodes


def expand_calls(rec: EventRecorder) -> list[dict[str, Any]]:
    return [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "expand"]


def test_dvts_splits_the_step_budget_over_greedy_subtrees() -> None:
    # 2 x 3 = 6 samples per step over 3 subtrees: 2 each; every subtree keeps one step per depth
    result, rec = run(search_wf(strategy="dvts", beam_width=2, expand_k=3, subtrees=3, scorer="likelihood"),
                      reply_fn=stepper)
    tree = result.outputs["tree"]
    nodes = check_tree(tree)
    assert tree["strategy"] == "dvts"
    depth1 = [n for n in nodes.values() if n["depth"] == 1]
    assert sorted(Counter(n["subtree"] for n in depth1).values()) == [2, 2, 2]
    for depth in (1, 2):
        kept = [n for n in nodes.values() if n["depth"] == depth and not n["pruned"]]
        assert sorted(n["subtree"] for n in kept) == [0, 1, 2]  # one per subtree
    for n in nodes.values():  # a step belongs to its parent's subtree
        if n["depth"] > 1:
            assert n["subtree"] == nodes[n["parent"]]["subtree"]
    calls = expand_calls(rec)
    # depth 1: one request of 6 from the root; depths 2 and 3: one request of 2 per subtree
    assert len(calls) == 6 + 6 + 6
    # every finished solution is a candidate; each subtree kept one of its two
    assert len(result.outputs["c"]) == 6
    assert sorted(n["subtree"] for n in nodes.values() if n["terminal"] and not n["pruned"]) == [0, 1, 2]
    assert result.outputs["text"].endswith(nodes[tree["chosen_path"][-1]]["text"])


def test_particles_resample_by_score_and_keep_the_population_size() -> None:
    result, rec = run(search_wf(strategy="particles", particles=4, resample_temperature=0.5, scorer="likelihood"),
                      reply_fn=stepper)
    tree = result.outputs["tree"]
    nodes = check_tree(tree)
    for generation in (1, 2, 3):
        drawn = [n for n in nodes.values() if n.get("generation") == generation]
        assert len(drawn) == 4  # every particle drew one step (all unfinished until the answer)
        assert sum(n["copies"] for n in drawn) == 4  # resampling keeps 4 particles
        assert all(n["pruned"] == (n["copies"] == 0) or n["chosen"] for n in drawn)
    # a request per distinct particle, n = its copies: 4 particles always draw 4 samples per round
    calls = expand_calls(rec)
    assert len(calls) == 12
    by_depth = Counter(c["tag"]["depth"] for c in calls)
    assert by_depth == {1: 4, 2: 4, 3: 4}
    assert nodes[tree["chosen_path"][-1]]["terminal"]


def test_particles_with_a_low_temperature_follow_the_best_score() -> None:
    # the fake's likelihood scores of the first steps differ by >= 0.017: at temperature 0.001 the softmax puts
    # all but e^-17 of the weight on the best, so systematic resampling gives it every particle
    result, _ = run(search_wf(strategy="particles", particles=5, resample_temperature=0.001, scorer="likelihood",
                              max_depth=2), reply_fn=stepper)
    nodes = check_tree(result.outputs["tree"])
    first = [n for n in nodes.values() if n.get("generation") == 1]
    best = max(first, key=lambda n: n["score"])
    assert best["copies"] == 5 and all(n["copies"] == 0 and n["pruned"] for n in first if n is not best)
    assert all(n["parent"] == best["id"] for n in nodes.values() if n.get("generation") == 2)


def test_mcts_backs_up_visits_and_follows_the_most_visited_path() -> None:
    result, rec = run(search_wf(strategy="mcts", simulations=4, expand_k=2, c_explore=1.0, scorer="likelihood"),
                      reply_fn=stepper)
    tree = result.outputs["tree"]
    nodes = check_tree(tree)
    root = nodes[0]
    # every simulation backs up one value per new child (2), or one for a finished node it selected again
    assert 4 <= root["visits"] <= 8
    for n in nodes.values():  # a node's visits are its children's plus its own finished visits
        kids = [c for c in nodes.values() if c["parent"] == n["id"]]
        if kids and "visits" in n:
            assert n["visits"] >= sum(c.get("visits", 0) for c in kids)
    assert any(n.get("rollout") for n in nodes.values())
    path = tree["chosen_path"]
    for parent, child in itertools.pairwise(path):
        siblings = [c for c in nodes.values() if c["parent"] == parent and c.get("visits")]
        assert nodes[child]["visits"] == max(c["visits"] for c in siblings)
    assert nodes[path[-1]]["terminal"]
    scorer_calls = [e for e in rec.of_type("lm_call") if e.data["purpose"] == "score"]
    assert scorer_calls  # rollouts are valued by the scorer


@pytest.mark.parametrize("params,param", [
    ({"strategy": "dvts", "beam_width": 1, "expand_k": 2, "subtrees": 3}, "subtrees"),
    ({"strategy": "particles", "particles": 0}, "particles"),
    ({"strategy": "particles", "resample_temperature": 0}, "resample_temperature"),
    ({"strategy": "mcts", "simulations": 1000}, "simulations"),
    ({"strategy": "mcts", "c_explore": -1}, "c_explore"),
    ({"strategy": "annealing"}, "strategy"),
])
def test_bad_strategy_params_are_refused_with_a_code_and_a_hint(params: dict[str, Any], param: str) -> None:
    issues = validate(search_wf(**params), REGISTRY)
    assert [i.code for i in issues] == ["bad_param"]
    assert param in issues[0].message and issues[0].hint


def test_strategy_params_show_only_for_their_strategy() -> None:
    cls = REGISTRY.get("search")
    shown = {p.name: p.show_if for p in cls.params}
    assert shown["subtrees"] == ("strategy", ("dvts",))
    assert shown["particles"] == ("strategy", ("particles",))
    assert shown["resample_temperature"] == ("strategy", ("particles",))
    assert shown["simulations"] == ("strategy", ("mcts",)) and shown["c_explore"] == ("strategy", ("mcts",))
    assert "dvts" in shown["beam_width"][1] and "mcts" in shown["expand_k"][1]


def test_a_large_dvts_budget_goes_out_in_parts_and_runs_are_reproducible() -> None:
    # 8 x 8 = 64 first steps from the root: two requests of 32 (the engine's parallel sequences are bounded)
    wf = search_wf(strategy="dvts", beam_width=8, expand_k=8, subtrees=4, max_depth=2, scorer="likelihood")
    result, rec = run(wf, reply_fn=stepper)
    first = [e.data for e in rec.of_type("lm_call") if e.data["tag"].get("depth") == 1]
    assert len(first) == 64 and max(c["n"] for c in first) == 32
    assert sorted(c["seed"] for c in first) == sorted(set(c["seed"] for c in first))  # no seed drawn twice
    again, _ = run(wf, reply_fn=stepper)
    assert again.outputs["tree"] == result.outputs["tree"]  # seeds go out in request order, not thread order
