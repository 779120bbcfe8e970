"""Fuzz: process-reward and reward-model scoring with hostile input — step splitting and layouts with any
delimiter and tag (text, never a grammar), the aggregates on any probabilities, the verifier's prm / reward_model
params through validation and a run on the fake backend, and the remote rerank / pooling replies in any shape:
a sound result, a run status or a coded refusal, never a crash."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.run.status import SUCCEEDED
from app.workflow.problems import WorkflowError
from app.workflow.spec import workflow_from_dict
from backends.base import BackendError
from backends.remote.openai_rank import parse_pooling, parse_rerank
from nodes.algorithms.prm import AGGREGATES, aggregate, good_probability, split_steps, tagged_segments
from nodes.registry import default_registry

REGISTRY = default_registry()
HOSTILE = st.one_of(st.text(max_size=12), st.sampled_from((
    " ки", "\n\n", "\n", "", " ", "+", "-", "root ::= x", "<|im_end|>", "<|im_start|>assistant\n", "{question}",
    "{{", "}", "\\", "(", ".*", "\x00", "\u2028", "é", " Yes", "very good")))
logprob = st.one_of(st.floats(max_value=0.0), st.just(-math.inf), st.floats(-1e6, 0))


@given(st.text(max_size=80), HOSTILE, HOSTILE, st.text(max_size=20))
def test_steps_and_their_tagged_layout_keep_the_text(text: str, delimiter: str, tag: str, question: str) -> None:
    steps = split_steps(text, delimiter)
    assert steps and all(s == s.strip() for s in steps)
    segments = tagged_segments(question, steps, delimiter, tag)
    assert len(segments) == len(steps) and all(s.endswith(tag) for s in segments)
    assert all(step in segment for step, segment in zip(steps, segments, strict=True))


@given(st.lists(st.floats(0, 1), min_size=1, max_size=20), st.sampled_from(AGGREGATES))
def test_aggregates_stay_within_the_step_scores(scores: list[float], how: str) -> None:
    value = aggregate(scores, how)
    assert 0.0 <= value <= 1.0
    if how != "prod":
        assert min(scores) - 1e-12 <= value <= max(scores) + 1e-12


@given(logprob, logprob)
def test_the_good_probability_is_a_probability(good: float, bad: float) -> None:
    p = good_probability({"+": good, "-": bad}, "+", "-")
    assert 0.0 <= p <= 1.0 and not math.isnan(p)


PARAM_VALUES = {
    "method": st.sampled_from(("prm", "reward_model")),
    "good_token": HOSTILE, "bad_token": HOSTILE, "step_tag": HOSTILE, "step_delimiter": HOSTILE,
    "prm_format": st.sampled_from(("tagged", "chat", "xml", "")),
    "aggregate": st.sampled_from(("last", "min", "prod", "mean", "sum", "max")),
    "normalize": st.sampled_from(("auto", "sigmoid", "none", "number", "x")),
    "query": HOSTILE, "model": st.sampled_from(("", "rm", "main", "nope")),
}


@given(st.fixed_dictionaries({}, optional=PARAM_VALUES), st.lists(st.text(max_size=30), min_size=1, max_size=4))
def test_the_verifier_takes_any_prm_or_reward_params(params: dict[str, Any], replies: list[str]) -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "fuzz",
        "models": {"main": {"source": "fake"}, "rm": {"source": "openai", "base_url": "http://127.0.0.1:9/v1",
                                                      "model": "rm", "api": "rerank"}},
        "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "s", "kind": "sampler", "model": "main", "params": {"n": 2, "prompt": "{question}"},
                   "inputs": {"question": "inputs.question"}},
                  {"id": "v", "kind": "verifier", "params": {"method": "prm", **params},
                   "inputs": {"candidates": "s.candidates", "question": "inputs.question"}}],
        "outputs": {"scores": "v.scores"},
    })
    try:
        result = Scheduler(REGISTRY, fake_provider(replies=replies)).run(wf, seed=0)
    except WorkflowError as exc:
        assert exc.issues and all(i.code and i.hint for i in exc.issues)
        return
    if result.status == SUCCEEDED:
        assert all(0.0 <= s <= 1.0 for s in result.outputs["scores"])
    else:
        assert result.error  # e.g. a good_token of two words, a fake that cannot rank


replies = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-3, 5), st.floats(), st.text(max_size=5)),
                       lambda inner: st.one_of(st.lists(inner, max_size=4),
                                               st.dictionaries(st.sampled_from(
                                                   ("results", "data", "index", "relevance_score", "score",
                                                    "usage", "prompt_tokens")), inner, max_size=4)),
                       max_leaves=20)


@given(replies, st.integers(0, 4))
def test_remote_scoring_replies_parse_or_are_refused(reply: Any, n: int) -> None:
    for parse in (parse_rerank, parse_pooling):
        try:
            result = parse(reply, n, "http://server/v1")
        except BackendError:
            continue
        assert len(result.scores) == n and all(math.isfinite(s) for s in result.scores)
