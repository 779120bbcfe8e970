"""Early exit of thinking (DEER): reflection points, the trial answer's confidence, and the node-level probing loop."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, RunResult, Scheduler
from app.viz.summary import run_summary, summary_html
from app.viz.think_exit import early_exit_body
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from backends.base import SamplingParams
from backends.fake import FakeBackend
from nodes.algorithms.think_exit import confidence_problem, reflection_stops, saved_estimate, trial_confidence
from nodes.registry import default_registry

REGISTRY = default_registry()


def test_reflection_points_and_confidence_by_hand() -> None:
    assert reflection_stops() == ("\nWait", "\nAlternatively")
    assert reflection_stops("\n\n") == ("\nWait", "\nAlternatively", "\n\n")
    assert reflection_stops("\nWait") == ("\nWait", "\nAlternatively")
    assert trial_confidence([]) == 0.0
    assert trial_confidence([0.0, math.log(0.5)]) == pytest.approx(0.75)  # (1 + 0.5) / 2
    assert confidence_problem(0.95) is None and confidence_problem(1) is None
    for bad in (0, 0.0, -0.1, 1.01, True, "high", None):
        assert "(0, 1]" in (confidence_problem(bad) or "")
    # two exited at 10 and 30 tokens, two thought to the end (100 and 60: reference 80) -> 70 + 50 saved
    assert saved_estimate([10, 30], [100, 60], 256) == (120, 80.0)
    assert saved_estimate([10], [], 64) == (54, 64.0)  # every sample exited: against the budget


def test_the_fake_reports_the_stop_string_that_ended_a_sample() -> None:
    fake = FakeBackend(replies=["one two\nWait three</think> four"])
    c = fake.generate("q", SamplingParams(stop=("</think>", "\nWait"))).completions[0]
    assert (c.text, c.finish_reason, c.stop) == ("one two", "stop", "\nWait")
    c = fake.generate("q", SamplingParams(stop=("x",))).completions[0]
    assert c.stop == "" and c.finish_reason == "eog"


def deer(prompt: str, seed: int) -> str:
    """Thinks in three segments split by reflection lines; a probe answers 7; the answer phase says Answer: 7."""
    if prompt.endswith("Final answer:"):
        return " 7\nmore"
    if prompt.endswith("</think>\n"):
        return "Answer: 7"
    if prompt.endswith("<think>"):
        return "first idea\nWait second idea\nAlternatively third idea</think>ignored"
    if prompt.endswith("\nWait"):
        return " second idea\nAlternatively third idea</think>"
    if prompt.endswith("\nAlternatively"):
        return " third idea</think>"
    return "?"


def make(kind: str = "sampler", **params: Any):
    node_params = {"prompt": "{question}", "think": "on", "think_early_exit": True, "think_budget": 64, **params}
    if kind == "sampler":
        node_params.setdefault("n", 2)
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "g", "kind": kind, "params": node_params, "inputs": {"question": "inputs.question"}}],
        "outputs": {"thinking": "g.thinking", "c": "g.candidates"}})


def run(wf) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(reply_fn=deer)).run(wf, seed=0, observers=[rec])
    assert result.status == SUCCEEDED, result.error
    return result, rec


def exit_event(rec: EventRecorder) -> dict[str, Any]:
    (event,) = [e.data for e in rec.of_type("node_event") if e.data["kind"] == "think_early_exit"]
    return event


def test_a_confident_probe_ends_thinking_and_its_answer_is_kept() -> None:
    result, rec = run(make(think_early_exit_confidence=0.0001))
    event = exit_event(rec)
    assert event["exited_count"] == 2 and event["thinking_tokens"] == 4  # "first idea" twice
    assert event["thinking_tokens_saved_est"] == 2 * (64 - 2) and event["reference_tokens"] == 64
    for cand in result.outputs["c"].candidates:
        assert cand.text == "Final answer: 7" and cand.answer == "7"
        assert cand.meta["thinking"] == "first idea" and cand.meta["think_exited"] and cand.meta["think_probes"] == 1
    calls = [e.data for e in rec.of_type("lm_call")]
    assert not [c for c in calls if c["tag"].get("phase") == "answer"]  # no answer phase after an exit
    probes = [c for c in calls if c["purpose"] == "think_probe"]
    assert len(probes) == 2 and all(c["prompt"].endswith("first idea</think>\nFinal answer:") for c in probes)
    assert result.stats.thinking_tokens == 4  # the probes' tokens are not thinking
    assert event["probe_tokens"] == 2 and event["samples"][0]["probes"][0]["answer"] == "7"


def test_a_probe_cut_off_at_its_token_limit_never_ends_thinking() -> None:
    """A trial answer that PROBE_TOKENS cut off (finish "length") is a fragment, however confident: before, it
    became the sample's answer."""
    fragment = " " + " ".join(["7"] * 40)  # no newline: the probe stops at its token limit

    def cut(prompt: str, seed: int) -> str:
        return fragment if prompt.endswith("Final answer:") else deer(prompt, seed)

    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(reply_fn=cut)).run(make(think_early_exit_confidence=0.0001), seed=0,
                                                                  observers=[rec])
    assert result.status == SUCCEEDED, result.error
    event = exit_event(rec)
    assert event["exited_count"] == 0 and all(s["probes"] for s in event["samples"])
    assert [c.text for c in result.outputs["c"].candidates] == ["Answer: 7", "Answer: 7"]


def test_without_a_confident_probe_thinking_goes_on_from_each_reflection_point() -> None:
    result, rec = run(make("generator", think_early_exit_confidence=1.0))
    event = exit_event(rec)
    (sample,) = event["samples"]
    assert [p["at_tokens"] for p in sample["probes"]] == [2, 4]  # at "\nWait" and at "\nAlternatively"
    assert all(p["confidence"] < 1.0 for p in sample["probes"])  # the fake's log-probabilities are below 0
    assert event["exited_count"] == 0 and event["thinking_tokens_saved_est"] == 0
    assert result.outputs["thinking"] == "first idea\nWait second idea\nAlternatively third idea"
    (cand,) = result.outputs["c"].candidates
    assert cand.text == "Answer: 7" and not cand.meta["think_exited"] and not cand.meta["think_forced"]
    think = [e.data["prompt"] for e in rec.of_type("lm_call") if e.data["purpose"] == "think"]
    assert len(think) == 3 and think[0].endswith("<think>")
    assert think[1].endswith("<think>first idea\nWait") and think[2].endswith("second idea\nAlternatively")
    assert result.stats.thinking_tokens == 6


def test_early_exit_params_are_checked() -> None:
    for bad in (0, 1.5, -1):
        issues = validate(make(think_early_exit_confidence=bad), REGISTRY)
        assert [i.code for i in issues] == ["bad_param"] and "(0, 1]" in issues[0].message
    issues = validate(make(think="off"), REGISTRY)
    assert [i.code for i in issues] == ["bad_param"] and "think" in issues[0].message
    assert validate(make(think_early_exit_confidence=1), REGISTRY) == []
    assert validate(make(think="off", think_early_exit=False, think_early_exit_confidence=7), REGISTRY) == []


def test_the_saved_tokens_reach_the_run_summary_and_the_samples_view() -> None:
    _, rec = run(make(think_early_exit_confidence=0.0001))
    event = exit_event(rec)
    record = {"run": {"id": "r", "workflow": "t"}, "lm_calls": [], "nodes": [],
              "events": [{"kind": "think_early_exit", "node_id": "g", "data": event}]}
    summary = run_summary(record)
    assert summary["thinking_tokens_saved_by_early_exit"] == event["thinking_tokens_saved_est"] == 124
    assert summary["samples_exited_thinking_early"] == 2 and summary["early_exit_probe_tokens"] == 2
    html = early_exit_body(record, "g")
    assert "2 of 2 samples exited" in html and "about 124 thinking tokens saved" in html
    cards = summary_html(record)
    assert "thinking tokens saved by early exit (est.)" in cards and "<b>124</b>" in cards
    assert "early exit" not in summary_html({**record, "events": []})


def test_no_probe_before_any_thinking() -> None:
    """A reflection line right after the open tag has nothing to answer from: thinking goes on without a probe."""
    def reply(prompt: str, seed: int) -> str:
        if prompt.endswith("<think>"):
            return "\nWait idea</think>"
        return deer(prompt, seed)

    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(reply_fn=reply)).run(
        make("generator", think_early_exit_confidence=0.0001), seed=0, observers=[rec])
    assert result.status == SUCCEEDED, result.error
    (sample,) = exit_event(rec)["samples"]
    assert [p["at_tokens"] for p in sample["probes"]] == [2]  # only after " second idea", not at the empty start
    assert result.outputs["thinking"] == "Wait second idea"


def test_segments_that_write_nothing_cannot_loop_forever() -> None:
    """A (scripted) model that stops at a reflection line before writing a token never spends its budget: the
    segments are capped and the close tag is forced in."""
    from nodes.thinking import MAX_SEGMENTS

    rec = EventRecorder(skip=("token",))
    result = Scheduler(REGISTRY, fake_provider(replies=["\nWait"])).run(
        make("generator", think_early_exit_confidence=0.5), seed=0, observers=[rec])
    assert result.status == SUCCEEDED, result.error
    think = [e for e in rec.of_type("lm_call") if e.data["purpose"] == "think"]
    assert len(think) == MAX_SEGMENTS
    (cand,) = result.outputs["c"].candidates
    assert cand.meta["think_forced"] and not cand.meta["think_exited"]
