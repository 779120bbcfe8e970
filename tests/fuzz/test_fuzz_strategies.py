"""Fuzz: the search strategies' arithmetic (softmax, resampling, UCT), thinking-block splitting with hostile tags,
and search / thinking nodes with any strategy params and hostile tags, delimiters and replies on the fake backend:
a sound result, a run status or a coded refusal, never a crash."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.run.status import SUCCEEDED
from app.workflow.problems import WorkflowError
from app.workflow.spec import workflow_from_dict
from nodes.algorithms.search_strategies import softmax, split_budget, systematic_resample, uct_pick, uct_score
from nodes.algorithms.thinking import split_thinking, tags_problem
from nodes.registry import default_registry

REGISTRY = default_registry()
finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False)
HOSTILE = st.one_of(st.text(max_size=12), st.sampled_from((
    "<think>", "</think>", "\n\n", "(", ")*", "[^", "root ::= x", "\\", "{", "}}", "<|im_end|>", "<|im_start|>",
    ".*", "$", "\x00", "é", "\u2028")))


@given(st.lists(st.one_of(st.none(), finite), min_size=1, max_size=40),
       st.floats(min_value=1e-3, max_value=100.0), st.integers(0, 64), st.floats(0, 1, exclude_max=True))
@example([None, 1.0], 1.0, 2, math.nextafter(1.0, 0.0))  # the IndexError found by the fuzzer (issue 32)
def test_resampling_draws_n_valid_indices(scores: list[float | None], temperature: float, n: int,
                                          offset: float) -> None:
    weights = softmax(scores, temperature)
    assert len(weights) == len(scores) and all(0 <= w <= 1 and not math.isnan(w) for w in weights)
    assert math.isclose(sum(weights), 1.0, rel_tol=1e-9)
    drawn = systematic_resample(weights, n, offset)
    assert len(drawn) == n and all(0 <= i < len(scores) for i in drawn) and drawn == sorted(drawn)
    assert all(weights[i] > 0 for i in drawn)


@given(st.lists(st.tuples(finite, st.integers(0, 10**6)), min_size=1, max_size=20), st.integers(0, 10**6),
       st.floats(0, 10))
def test_uct_picks_a_child(children: list[tuple[float, int]], parent: int, c: float) -> None:
    assert 0 <= uct_pick(children, parent, c) < len(children)
    value, visits = children[0]
    assert not math.isnan(uct_score(value, visits, parent, c))


@given(st.integers(0, 10_000), st.integers(1, 64))
def test_the_budget_split_covers_the_budget(total: int, parts: int) -> None:
    split = split_budget(total, parts)
    assert len(split) == parts and min(split) >= 1 and sum(split) == max(total, parts)
    assert max(split) - min(split) <= 1


@given(st.text(max_size=80), HOSTILE, HOSTILE, st.booleans())
def test_splitting_with_hostile_tags_never_loses_or_invents_text(text: str, open_tag: str, close_tag: str,
                                                                 opened: bool) -> None:
    thinking, answer = split_thinking(text, open_tag, close_tag, opened=opened)
    assert thinking in text and answer in text
    if tags_problem([open_tag, close_tag]) is None and not opened and not text.lstrip().startswith(open_tag):
        assert (thinking, answer) == ("", text)


def search_or_thinker(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        params = {"prompt": "{question}",
                  "strategy": draw(st.sampled_from(("dvts", "particles", "mcts", "ab_mcts"))),
                  "max_expansions": draw(st.integers(0, 6)),
                  "ab_posterior": draw(st.sampled_from(("auto", "beta", "gaussian", "x"))),
                  "beam_width": draw(st.integers(1, 3)), "expand_k": draw(st.integers(1, 3)),
                  "subtrees": draw(st.integers(0, 8)), "particles": draw(st.integers(0, 6)),
                  "resample_temperature": draw(st.one_of(st.floats(0, 5), st.just(1e-3))),
                  "simulations": draw(st.integers(0, 5)), "c_explore": draw(st.floats(-1, 3)),
                  "max_depth": draw(st.integers(1, 4)), "step_delimiter": draw(HOSTILE),
                  "end_marker": draw(HOSTILE), "scorer": draw(st.sampled_from(("none", "likelihood", "regex"))),
                  "regex": "\\d"}
        return {"id": "x", "kind": "search", "params": params, "inputs": {"question": "inputs.question"}}
    params = {"prompt": "{question}", "think": draw(st.sampled_from(("off", "auto", "on", True, False, "x"))),
              "think_tags": draw(st.one_of(st.lists(HOSTILE, max_size=3), HOSTILE)),
              "think_budget": draw(st.integers(0, 40)), "think_min": draw(st.integers(0, 50)),
              "think_early_exit": draw(st.booleans()),
              "think_early_exit_confidence": draw(st.one_of(st.floats(-1, 2), st.just(1.0), st.just(1e-6))),
              "think_early_exit_delimiter": draw(HOSTILE)}
    kind = draw(st.sampled_from(("generator", "sampler")))
    if kind == "sampler":
        params["n"] = draw(st.integers(1, 4))
    return {"id": "x", "kind": kind, "params": params, "inputs": {"question": "inputs.question"}}


@settings(max_examples=120)
@given(st.data(), st.lists(st.one_of(HOSTILE, st.text(max_size=30)), min_size=1, max_size=5))
def test_strategy_and_thinking_nodes_end_with_a_status_or_a_coded_refusal(data: st.DataObject,
                                                                         replies: list[str]) -> None:
    node = search_or_thinker(data.draw)
    out = "x.text" if node["kind"] != "sampler" else "x.candidates"
    wf = workflow_from_dict({"version": 1, "name": "f", "inputs": {"question": {"type": "text", "default": "q"}},
                             "nodes": [node], "outputs": {"o": out}})
    try:
        result = Scheduler(REGISTRY, fake_provider(replies=replies)).run(wf, seed=0, budget=None)
    except WorkflowError as err:
        assert err.issues and all(i.code and i.hint for i in err.issues)
        return
    assert result.status == SUCCEEDED, result.error  # valid params on the fake backend: nothing may fail
