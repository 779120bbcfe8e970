"""A request whose first sample came from the sample cache still reports its prompt tokens: the first sample it
draws carries them (they were dropped, so the run summary lost the request's prompt)."""

from __future__ import annotations

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from nodes.registry import default_registry


def _sampler(n: int):
    return workflow_from_dict({
        "version": 1, "name": "s", "inputs": {"q": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "s", "kind": "sampler", "params": {"prompt": "{q}", "n": n, "temperature": 0.7},
                   "inputs": {"q": "inputs.q"}}],
        "outputs": {"c": "s.candidates"}})


def test_the_first_drawn_sample_carries_the_prompt_tokens_when_sample_0_was_cached() -> None:
    scheduler = Scheduler(default_registry(), fake_provider())
    assert scheduler.run(_sampler(1), seed=0).status == SUCCEEDED
    rec = EventRecorder(skip=("token",))
    result = scheduler.run(_sampler(3), seed=0, observers=[rec])
    assert result.status == SUCCEEDED
    calls = [e.data for e in rec.of_type("lm_call")]
    assert sorted(c["sample_index"] for c in calls) == [1, 2]  # sample 0 came from the sample cache
    evaluated = sum(c["prompt_tokens_evaluated"] + c["prompt_tokens_cached"] for c in calls)
    assert evaluated == calls[0]["prompt_tokens"] > 0
    assert result.stats.prompt_tokens_evaluated + result.stats.prompt_tokens_cached == evaluated
