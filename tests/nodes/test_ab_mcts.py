"""AB-MCTS: Thompson sampling over Beta / normal-inverse-gamma posteriors by hand, and the strategy on the fake."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, RunResult, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.algorithms.search_strategies import (
    ScoreSummary,
    beta_posterior,
    gaussian_posterior,
    posterior_for,
    thompson_draw,
    thompson_pick,
)
from nodes.registry import default_registry

REGISTRY = default_registry()


def test_beta_posterior_counts_scores_as_fractional_successes() -> None:
    assert beta_posterior([]) == (1.0, 1.0)
    assert beta_posterior([1.0, 0.5, 0.0]) == (2.5, 2.5)
    assert beta_posterior([1.0, 1.0, 0.25]) == (3.25, 1.75)
    assert beta_posterior([2.0, -1.0]) == (2.0, 2.0)  # clamped to [0, 1]


def test_gaussian_posterior_by_hand() -> None:
    # n = 2, mean 2, SS = 2; kappa = 1 + 2, mu = (1 * 0 + 2 * 2) / 3, alpha = 1 + 1,
    # beta = 0.01 + 2 / 2 + 1 * 2 * (2 - 0)^2 / (2 * 3)
    mu, kappa, alpha, beta = gaussian_posterior([1.0, 3.0], prior_mean=0.0)
    assert (mu, kappa, alpha) == (pytest.approx(4 / 3), 3.0, 2.0)
    assert beta == pytest.approx(0.01 + 1.0 + 8 / 6)
    assert gaussian_posterior([], prior_mean=-2.0) == (-2.0, 1.0, 1.0, 0.01)


def test_thompson_draws_follow_the_seeded_generator() -> None:
    a, b = random.Random(7), random.Random(7)
    assert thompson_draw([1.0, 0.0], a, "beta") == b.betavariate(2.0, 2.0)
    a, b = random.Random(3), random.Random(3)
    mu, kappa, alpha, beta = gaussian_posterior([-1.0, -2.0], prior_mean=-1.5)
    variance = beta / b.gammavariate(alpha, 1.0)
    assert thompson_draw([-1.0, -2.0], a, "gaussian", prior_mean=-1.5) == b.gauss(mu, math.sqrt(variance / kappa))
    with pytest.raises(ValueError):
        thompson_draw([], random.Random(0), "uniform")


def test_thompson_pick_is_the_highest_draw_and_prefers_the_better_posterior() -> None:
    rng, copy = random.Random(11), random.Random(11)
    options = [[0.2, 0.3], [0.9], []]
    draws = [copy.betavariate(*beta_posterior(o)) for o in options]
    assert thompson_pick(options, rng, "beta") == max(range(3), key=lambda i: draws[i])
    rng = random.Random(0)
    picks = [thompson_pick([[0.0] * 30, [1.0] * 30], rng, "beta") for _ in range(50)]
    assert picks == [1] * 50  # Beta(1, 31) against Beta(31, 1): the better option every time
    picks = [thompson_pick([[-5.0] * 10, [-1.0] * 10], rng, "gaussian", prior_mean=-3.0) for _ in range(50)]
    assert picks == [1] * 50
    with pytest.raises(ValueError):
        thompson_pick([], rng, "beta")


@given(st.lists(st.lists(st.floats(-1e300, 1e300, allow_nan=False), max_size=6), min_size=1, max_size=5),
       st.integers(0, 2**32), st.sampled_from(("beta", "gaussian")))
def test_thompson_pick_always_picks_an_option(options: list[list[float]], seed: int, posterior: str) -> None:
    seen = [s for o in options for s in o]
    prior = sum(seen) / len(seen) if seen and posterior == "gaussian" else 0.5
    assert 0 <= thompson_pick(options, random.Random(seed), posterior, prior) < len(options)


def test_auto_posterior_is_beta_while_scores_are_probabilities() -> None:
    assert posterior_for([0.0, 0.4, 1.0], "auto") == "beta"
    assert posterior_for([0.4, -2.3], "auto") == "gaussian"
    assert posterior_for([-2.3], "beta") == "beta"


# ------------------------------------------------------------------ the strategy


def stepper(prompt: str, seed: int) -> str:
    done = prompt.count("step ")
    if done >= 2:
        return f"Answer: {7 + seed % 2}\n"
    return f"step {seed % 5} of {done}\nmore"


def search_wf(**params: Any):
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "x", "kind": "search", "inputs": {"question": "inputs.question"},
                   "params": {"prompt": "{question}", "step_delimiter": "\n", "max_depth": 4,
                              "strategy": "ab_mcts", **params}}],
        "outputs": {"text": "x.text", "tree": "x.tree", "c": "x.candidates"}})


def run(wf, **fake: Any) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(**fake)).run(wf, seed=0, observers=[rec])
    assert result.status == SUCCEEDED, result.error
    return result, rec


def test_ab_mcts_spends_its_budget_marking_each_step_wider_or_deeper() -> None:
    result, rec = run(search_wf(max_expansions=9, expand_k=3, scorer="likelihood"), reply_fn=stepper)
    tree = result.outputs["tree"]
    nodes = {n["id"]: n for n in tree["nodes"]}
    steps = tree["nodes"][1:]
    assert len(steps) == 9 and tree["strategy"] == "ab_mcts"
    assert all(n["branch"] in ("wider", "deeper") and n["score"] is not None for n in steps)
    assert "branch" not in nodes[0]
    for n in steps:  # the root's children are all "wider"; the first step below a partial solution is "deeper"
        first = min(s["id"] for s in steps if s["parent"] == n["parent"])
        if n["parent"] == 0:
            assert n["branch"] == "wider"
        elif n["id"] == first:
            assert n["branch"] == "deeper"
        if n["branch"] == "deeper":
            assert n["parent"] != 0
    assert any(n["branch"] == "deeper" for n in steps)  # the search went into its children
    # every score is backed up the path: a node's visits are its subtree's steps
    for n in tree["nodes"]:
        below = [s for s in steps if s["id"] == n["id"] or _descends(nodes, s["id"], n["id"])]
        assert n["visits"] == len([s for s in below if s["id"] != 0])
        assert n["value"] == pytest.approx(sum(s["score"] for s in below if s["id"] != 0))
    calls = [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "expand"]
    assert sum(c["n"] for c in calls) >= 9 and len({c["start"] for c in calls}) <= len(calls)
    path = tree["chosen_path"]
    assert path[0] == 0 and all(nodes[b]["parent"] == a for a, b in itertools.pairwise(path))
    finished = [n for n in steps if n["terminal"]]
    if finished:  # the answer is the best-scoring finished solution
        assert nodes[path[-1]]["score"] == max(n["score"] for n in finished)
    again, _ = run(search_wf(max_expansions=9, expand_k=3, scorer="likelihood"), reply_fn=stepper)
    assert again.outputs["tree"] == tree  # seeded Thompson draws: reproducible


def _descends(nodes: dict[int, dict[str, Any]], node: int, ancestor: int) -> bool:
    parent = nodes[node]["parent"]
    while parent is not None:
        if parent == ancestor:
            return True
        parent = nodes[parent]["parent"]
    return False


def test_an_unscored_step_is_no_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step the scorer left unscored used to count as 0.0: the best log-likelihood there is. It adds nothing now:
    every node's visits and value are those of the scored steps below it."""
    from nodes.kinds import search

    scored = search._SearchRun._score

    def half_scored(self: Any, nodes: list[Any]) -> None:
        scored(self, nodes)
        for node in nodes[::2]:
            node.score = None

    monkeypatch.setattr(search._SearchRun, "_score", half_scored)
    result, _ = run(search_wf(max_expansions=9, expand_k=3, scorer="likelihood"), reply_fn=stepper)
    tree = result.outputs["tree"]
    nodes = {n["id"]: n for n in tree["nodes"]}
    steps = tree["nodes"][1:]
    assert any(s["score"] is None for s in steps) and any(s["score"] is not None for s in steps)
    for n in tree["nodes"]:
        below = [s for s in steps if (s["id"] == n["id"] or _descends(nodes, s["id"], n["id"]))
                 and s["score"] is not None]
        assert n["visits"] == len(below), n
        assert n["value"] == pytest.approx(sum(s["score"] for s in below))


def test_score_summaries_are_the_posteriors_sufficient_statistics() -> None:
    summary = ScoreSummary.of([1.0, 3.0, -1.0])
    assert (summary.n, summary.total, summary.clamped) == (3, 3.0, 2.0)  # clamped: 1 + 1 + 0
    assert summary.squares == pytest.approx(8.0)  # mean 1: 0 + 4 + 4
    for scores in ([0.2, 0.9, 0.4], [-3.5, -1.25, -2.0, -7.0]):
        assert gaussian_posterior(ScoreSummary.of(scores), prior_mean=-1.0) == pytest.approx(
            gaussian_posterior(list(scores), prior_mean=-1.0))
        assert beta_posterior(ScoreSummary.of(scores)) == pytest.approx(beta_posterior(scores))


def test_ab_mcts_goes_deeper_when_deeper_steps_score_better() -> None:
    """A scorer that passes only partial solutions of two steps or more: the root's "new child" option scores 0 (its
    posterior sinks towards Beta(1, 1 + k)) while the subtree below its first child collects 1s, so the search stays
    below that child instead of starting new solutions at the root."""
    result, _ = run(search_wf(max_expansions=12, expand_k=1, max_depth=6, scorer="regex", regex="(?s)step.*step"),
                    reply_fn=lambda prompt, seed: f"step {seed}\nmore")
    steps = result.outputs["tree"]["nodes"][1:]
    assert len(steps) == 12
    assert len([n for n in steps if n["parent"] == 0]) <= 2 and max(n["depth"] for n in steps) >= 3
    assert sum(n["branch"] == "deeper" for n in steps) >= 3
    wide = run(search_wf(max_expansions=12, expand_k=1, max_depth=6, scorer="regex", regex=r"\Astep [0-9]+\Z"),
               reply_fn=lambda prompt, seed: f"step {seed}\nmore")[0].outputs["tree"]["nodes"][1:]
    # the reverse: only one-step solutions pass, so new children of the root keep winning (wider)
    assert len([n for n in wide if n["parent"] == 0]) > len([n for n in steps if n["parent"] == 0]) + 3


def test_ab_mcts_params_validate_and_show() -> None:
    assert validate(search_wf(max_expansions=0), REGISTRY)[0].code == "bad_param"
    assert validate(search_wf(ab_posterior="poisson"), REGISTRY)[0].code == "bad_param"
    assert validate(search_wf(ab_posterior="gaussian", scorer="likelihood"), REGISTRY) == []
    shown = {p.name: p.show_if for p in REGISTRY.get("search").params}
    assert "ab_mcts" in shown["max_expansions"][1] and shown["ab_posterior"] == ("strategy", ("ab_mcts",))
