"""The sub-workflow examples once on the real bundled model: children nested in the trace, mapped ones at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.run.events import EventRecorder
from app.run.providers import llama_provider
from app.run.scheduler import SUCCEEDED, RunResult, Scheduler
from app.workflow.spec import load_workflow
from nodes.base import CandidateSet
from nodes.registry import default_registry

pytestmark = pytest.mark.model

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Scheduler]:
    provider = llama_provider()
    yield Scheduler(default_registry(), provider)
    provider.close()  # its engine worker ends with the module


def run_example(scheduler: Scheduler, name: str) -> tuple[RunResult, EventRecorder]:
    recorder = EventRecorder(skip=("token",))
    result = scheduler.run(load_workflow(WORKFLOWS / f"{name}.yaml"), seed=0, observers=[recorder],
                           use_cache=False)
    assert result.status == SUCCEEDED, result.error
    return result, recorder


def test_best_of_refined_maps_the_child_over_four_drafts_at_once(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "best_of_refined")
    calls = [e.data | {"node": e.node_id} for e in recorder.of_type("lm_call")]
    critiques = [c for c in calls if c["node"].endswith("/critique")]
    assert sorted(c["node"] for c in critiques) == [f"refine_each/{i}/critique" for i in range(4)]
    assert max(c["start"] for c in critiques) < min(c["end"] for c in critiques)  # in flight together
    drafts = result.node_outputs["drafts"]["candidates"].candidates
    for i, call in enumerate(sorted(critiques, key=lambda c: c["node"])):
        assert drafts[i].text.strip() in call["prompt"]  # each child refines its own draft
    refined: CandidateSet = result.node_outputs["refine_each"]["candidates"]
    revises = {c["node"]: c["completion"] for c in calls if c["node"].endswith("/revise")}
    assert [c.text for c in refined.candidates] == [revises[f"refine_each/{i}/revise"] for i in range(4)]
    scored = result.node_outputs["judge"]["candidates"]
    best = max(range(4), key=lambda i: scored.candidates[i].scores["judge"])
    assert result.outputs["answer"] == scored.candidates[best].text


def test_judge_of_methods_runs_three_examples_as_nodes(scheduler: Scheduler) -> None:
    result, recorder = run_example(scheduler, "judge_of_methods")
    nodes = {e.node_id for e in recorder.of_type("node_end")}
    assert {"cot/think", "cot/answer", "consistency/think", "consistency/vote", "beam/search"} <= nodes
    gathered = result.node_outputs["answers"]["candidates"].candidates
    assert [c.source for c in gathered] == ["chain_of_thought", "self_consistency", "beam_search"]
    assert gathered[0].text == result.node_outputs["cot"]["answer"]
    assert result.outputs["answer"] in [c.text for c in gathered]
