"""Thinking budgets: splitting thinking off answers, budget forcing, s1's Wait, the ports and the token counts."""

from __future__ import annotations

from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, RunResult, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.algorithms.thinking import split_thinking, tags_problem, with_wait, without_stray_tags
from nodes.registry import default_registry

REGISTRY = default_registry()


def test_split_thinking() -> None:
    assert split_thinking("<think>hmm</think> 7", "<think>", "</think>") == ("hmm", "7")
    assert split_thinking("  <think>\nhmm\n</think>\n\nAnswer: 7", "<think>", "</think>") == ("hmm", "Answer: 7")
    assert split_thinking("Answer: 7", "<think>", "</think>") == ("", "Answer: 7")  # no block: all answer
    assert split_thinking("hmm</think>7", "<think>", "</think>", opened=True) == ("hmm", "7")
    assert split_thinking("<think>never closed", "<think>", "</think>") == ("never closed", "")
    # tags are text: regex or grammar characters mean nothing
    assert split_thinking("[(a|b)*]x.*y", "[(a|b)*]", ".*") == ("x", "y")


def test_wait_and_tags() -> None:
    assert with_wait("so 3") == "so 3\nWait"
    assert with_wait("so 3\n") == "so 3\nWait"
    assert tags_problem(["<think>", "</think>"]) is None
    assert tags_problem(["<think>"]) and tags_problem("<think>") and tags_problem(["x", "x"])
    assert tags_problem(["", "</think>"]) and tags_problem(["a", "b" * 65])


def node(kind: str, **params: Any) -> dict[str, Any]:
    base = {"prompt": "{question}", "think": "on"}
    if kind == "sampler":
        base["n"] = 3
    return {"id": "g", "kind": kind, "params": {**base, **params}, "inputs": {"question": "inputs.question"}}


def make(kind: str, **params: Any):
    outputs = {"text": "g.text"} if kind == "generator" else {}
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [node(kind, **params)], "outputs": {**outputs, "thinking": "g.thinking", "c": "g.candidates"}})


def run(wf, **fake: Any) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(**fake)).run(wf, seed=0, observers=[rec])
    assert result.status == SUCCEEDED, result.error
    return result, rec


def thinker(thought: str, answer: str = "Answer: 7", after_wait: str = " more thoughts here</think>"):
    def reply(prompt: str, seed: int) -> str:
        if prompt.endswith("<think>"):
            return thought
        if prompt.endswith("Wait"):
            return after_wait
        return answer
    return reply


def test_generator_thinks_then_answers_and_keeps_thinking_out_of_the_answer() -> None:
    result, rec = run(make("generator"), reply_fn=thinker("I guess 5 hmm no</think>ignored"))
    assert result.outputs["text"] == "Answer: 7"
    assert result.outputs["thinking"] == "I guess 5 hmm no"
    (cand,) = result.outputs["c"].candidates
    assert cand.text == "Answer: 7" and cand.meta["thinking_tokens"] == 5 and not cand.meta["think_forced"]
    calls = [e.data for e in rec.of_type("lm_call")]
    assert [c["purpose"] for c in calls] == ["think", "generate"]
    assert calls[0]["prompt"].endswith("<|assistant|>\n<think>")
    assert calls[1]["prompt"].endswith("<think>I guess 5 hmm no</think>\n")
    assert [c.get("thinking_tokens", 0) for c in calls] == [5, 0]  # a call that did not think says nothing
    # the run counts thinking apart from the answer: 5 thinking of 7 completion tokens
    assert (result.stats.thinking_tokens, result.stats.completion_tokens) == (5, 7)


def test_the_budget_forces_the_close_tag() -> None:
    result, rec = run(make("generator", think_budget=4), reply_fn=thinker("one two three four five six seven"))
    (cand,) = result.outputs["c"].candidates
    assert cand.meta["thinking_tokens"] == 4 and cand.meta["think_forced"]
    assert result.outputs["thinking"] == "one two three four"
    answer_call = [e.data for e in rec.of_type("lm_call")][-1]
    assert answer_call["prompt"].endswith("<think>one two three four</think>\n")
    assert result.outputs["text"] == "Answer: 7"


def test_an_early_close_becomes_wait_until_think_min() -> None:
    result, rec = run(make("generator", think_budget=20, think_min=3), reply_fn=thinker("short</think>"))
    (cand,) = result.outputs["c"].candidates
    assert cand.meta["think_waits"] == 1
    assert result.outputs["thinking"] == "short\nWait more thoughts here"
    assert cand.meta["thinking_tokens"] == 1 + 3
    calls = [e.data for e in rec.of_type("lm_call")]
    assert [c["purpose"] for c in calls] == ["think", "think", "generate"]
    assert calls[1]["prompt"].endswith("<think>short\nWait")
    assert calls[1]["tag"]["wait"] == 1


def test_an_end_of_turn_before_think_min_becomes_wait_too() -> None:
    result, _ = run(make("generator", think_budget=20, think_min=3), reply_fn=thinker("hmm"))
    (cand,) = result.outputs["c"].candidates
    assert cand.meta["think_waits"] == 1 and not cand.meta["think_forced"]
    assert result.outputs["thinking"] == "hmm\nWait more thoughts here"
    # enough thinking: an end of turn is a forced close, no Wait
    result, _ = run(make("generator", think_budget=20, think_min=1), reply_fn=thinker("hmm"))
    (cand,) = result.outputs["c"].candidates
    assert cand.meta["think_waits"] == 0 and cand.meta["think_forced"]


def test_sampler_thinks_per_sample_and_extracts_answers_from_the_answer_only() -> None:
    result, rec = run(make("sampler", extract="last_number"), reply_fn=thinker("maybe 5</think>"))
    cands = result.outputs["c"].candidates
    assert [c.answer for c in cands] == ["7", "7", "7"]
    assert result.outputs["thinking"] == ["maybe 5"] * 3
    think = [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "think"]
    assert len(think) == 3 and {c["n"] for c in think} == {3}  # one request of 3 samples
    assert result.stats.thinking_tokens == 6


def test_auto_splits_a_thinking_block_the_model_opens_itself() -> None:
    result, rec = run(make("generator", think="auto"), replies=["<think>hmm 5</think>\nAnswer: 7"])
    assert result.outputs["text"] == "Answer: 7" and result.outputs["thinking"] == "hmm 5"
    assert [e.data["purpose"] for e in rec.of_type("lm_call")] == ["generate"]  # no template opened a block


def test_unquoted_yaml_on_and_off_mean_the_words() -> None:
    from app.workflow.spec import load_workflow_text

    text = ("version: 1\nname: t\ninputs: {question: {type: text, default: 'What is 3 + 4?'}}\nnodes:\n"
            "- id: g\n  kind: generator\n  params:\n    prompt: '{question}'\n    think: on\n    think_budget: 4\n"
            "  inputs: {question: inputs.question}\noutputs: {text: g.text, thinking: g.thinking}\n")
    unquoted = load_workflow_text(text)
    assert unquoted.nodes[0].params["think"] is True  # YAML 1.1
    assert validate(unquoted, REGISTRY) == []
    result, _ = run(unquoted, reply_fn=thinker("a b c d e f"))
    assert result.outputs["thinking"] == "a b c d"
    off = load_workflow_text(text.replace("think: on", "think: off"))
    assert validate(off, REGISTRY) == []
    result, _ = run(off, replies=["<think>x</think>y"])
    assert result.outputs["thinking"] == ""


def test_off_leaves_the_text_alone() -> None:
    result, _ = run(make("generator", think="off"), replies=["<think>x</think>y"])
    assert result.outputs["text"] == "<think>x</think>y" and result.outputs["thinking"] == ""


@pytest.mark.parametrize("kind,params,param", [
    ("generator", {"think_budget": 8, "think_min": 9}, "think_min"),
    ("sampler", {"think_budget": 8, "think_min": 9}, "think_min"),
    ("generator", {"think_tags": ["<think>"]}, "think_tags"),
    ("generator", {"think_tags": ["", "</think>"]}, "think_tags"),
    ("generator", {"think_budget": 0}, "think_budget"),
    ("generator", {"think": "maybe"}, "think"),
    ("sampler", {"adaptive": "majority", "extract": "last_number"}, "think"),
])
def test_bad_think_params_are_refused_with_a_code_and_a_hint(kind: str, params: dict[str, Any], param: str) -> None:
    issues = validate(make(kind, **params), REGISTRY)
    assert [i.code for i in issues] == ["bad_param"], issues
    assert f"'{param}'" in issues[0].message and issues[0].hint


def test_think_params_show_only_when_thinking() -> None:
    for kind in ("generator", "sampler"):
        shown = {p.name: p.show_if for p in REGISTRY.get(kind).params}
        assert shown["think"] is None
        for name in ("think_tags", "think_budget", "think_min"):
            assert shown[name] == ("think", ("auto", "on"))


def test_stray_think_tags_are_taken_out_of_an_answer() -> None:
    tags = ("<think>", "</think>")
    assert without_stray_tags("Answer: 7", *tags) == "Answer: 7"
    assert without_stray_tags("more thought</think>Answer: 7", *tags) == "Answer: 7"
    assert without_stray_tags("Answer: 7</think>", *tags) == "Answer: 7"
    assert without_stray_tags("Answer: 7 <think>hmm", *tags) == "Answer: 7"
    assert without_stray_tags("<think>hmm</think> Answer: 7", *tags) == "Answer: 7"
    assert without_stray_tags("a</think>b</think>", *tags) == "a b"


@pytest.mark.parametrize("answer", ["</think>Answer: 7", "Answer: 7</think>", "Answer: 7\n<think>"])
def test_a_stray_tag_in_the_answer_phase_never_reaches_the_answer(answer: str) -> None:
    """Issue 32, finding 12: the bundled model wrote a stray `</think>` into the answer phase."""
    for kind in ("generator", "sampler"):
        result, _ = run(make(kind), reply_fn=thinker("I guess 7</think>", answer=answer))
        texts = [c.text for c in result.outputs["c"].candidates]
        assert texts and all(t == "Answer: 7" for t in texts), texts
    result, _ = run(make("generator", think="auto"), reply_fn=lambda p, s: "<think>hm</think>7</think>")
    assert result.outputs["text"] == "7"
