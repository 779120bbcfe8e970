"""The example workflows as golden fixtures: canonical YAML, valid, documented, laid out, runnable (fake backend)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from nodes.registry import default_registry

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
EXPECTED = ("chain_of_thought", "best_of_n", "self_consistency", "weighted_vote", "mbr", "rejection_sampling",
            "self_refine", "beam_search", "universal_self_consistency", "deepconf", "cot_decoding",
            "refine_each", "best_of_refined", "judge_of_methods")
EXPECTED += ("dvts", "particle_filter", "mcts", "thinking_budget")
EXPECTED += ("prm_beam",)
EXPECTED += ("beam_rerank", "diverse_beam")
EXPECTED += ("code_best_of_n", "alphacode", "plansearch", "plan_to_code")
EXPECTED += ("genselect", "tournament", "self_certainty_bon")
EXPECTED += ("rsa", "deer_think", "ab_mcts")
EXPECTED += ("code_completion", "code_completion_best_of_n")
EXPECTED += ("tool_greedy", "tool_self_consistency", "tool_best_of_n")
FILES = sorted(WORKFLOWS.glob("*.yaml"))


def test_every_expected_example_exists() -> None:
    assert {p.stem for p in FILES} >= set(EXPECTED)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_example_is_canonical_yaml(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert load_workflow_text(text).to_yaml() == text, f"normalise {path.name} through Workflow.to_yaml()"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_example_validates_and_is_documented(path: Path) -> None:
    wf = load_workflow_text(path.read_text(encoding="utf-8"))
    assert validate(wf, default_registry()) == []
    assert len(wf.description) > 80, "say what the example demonstrates"
    assert wf.inputs and all(spec.default is not None for spec in wf.inputs.values())
    placed = set(wf.layout)
    assert {n.id for n in wf.nodes} <= placed
    assert {f"inputs.{name}" for name in wf.inputs} <= placed
    assert {f"outputs.{name}" for name in wf.outputs} <= placed


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_example_runs_end_to_end_on_the_fake_backend(path: Path) -> None:
    wf = load_workflow_text(path.read_text(encoding="utf-8"))
    recorder = EventRecorder(skip=("token",))
    result = Scheduler(default_registry(), fake_provider()).run(wf, seed=3, observers=[recorder])
    assert result.status == SUCCEEDED, result.error
    assert set(result.outputs) == set(wf.outputs)
    assert result.stats.lm_calls > 0


def test_sub_workflow_examples_nest_their_children() -> None:
    """best_of_refined maps refine_each over 4 drafts; judge_of_methods runs three examples as nodes."""
    recorder = EventRecorder(skip=("token",))
    wf = load_workflow_text((WORKFLOWS / "best_of_refined.yaml").read_text(encoding="utf-8"))
    result = Scheduler(default_registry(), fake_provider()).run(wf, seed=3, observers=[recorder])
    assert result.status == SUCCEEDED, result.error
    ids = {e.node_id for e in recorder.of_type("node_end")}
    assert {f"refine_each/{i}/revise" for i in range(4)} <= ids
    assert len(result.node_outputs["refine_each"]["candidates"]) == 4
    wf = load_workflow_text((WORKFLOWS / "judge_of_methods.yaml").read_text(encoding="utf-8"))
    result = Scheduler(default_registry(), fake_provider()).run(wf, seed=3, observers=[recorder])
    assert result.status == SUCCEEDED, result.error
    assert [c.source for c in result.node_outputs["answers"]["candidates"].candidates] == [
        "chain_of_thought", "self_consistency", "beam_search"]
