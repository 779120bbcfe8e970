"""The sampler's method: beam on the fake backend: candidates best first with their scores, the traced beam
tree, and every validation problem (groups dividing n, adaptive / think refused, a remote model refused, sampling
knobs a warning, the share-mode cap)."""

from __future__ import annotations

from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.scheduler import SUCCEEDED, Scheduler
from app.share.policy import SHARE_MAX_BEAMS, SharePolicy, check_workflow_allowed
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from backends.fake import FakeBackend
from nodes.registry import default_registry


def beam_wf(model: dict[str, Any] | None = None, **params: Any):
    return workflow_from_dict({
        "version": 1, "name": "t", "models": {"main": model or {"source": "fake"}},
        "inputs": {"question": {"type": "text", "default": "3 + 4?"}},
        "nodes": [{"id": "b", "kind": "sampler", "model": "main",
                   "params": {"prompt": "{question}", "method": "beam", "n": 4, "max_tokens": 6, **params},
                   "inputs": {"question": "inputs.question"}}],
        "outputs": {"c": "b.candidates"}})


def codes(wf: Any, severity: str = "error") -> list[str]:
    return [i.code for i in validate(wf, default_registry()) if i.severity == severity]


def test_beam_candidates_come_best_first_with_the_tree_traced() -> None:
    backend = FakeBackend(by_prompt={"3 + 4": ["it is 7", "maybe 8", "7"]})
    recorder = EventRecorder(skip=("token",))
    wf = beam_wf(diverse_groups=2, diversity_penalty=1.5)
    result = Scheduler(default_registry(), lambda spec: backend).run(wf, seed=1, observers=[recorder])
    assert result.status == SUCCEEDED, result.error
    cands = result.node_outputs["b"]["candidates"].candidates
    assert len(cands) == 4
    scores = [c.scores["b"] for c in cands]
    assert scores == sorted(scores, reverse=True) and [c.score for c in cands] == scores
    assert {c.meta["beam"]["group"] for c in cands} == {0, 1}
    (tree,) = [e.data for e in recorder.of_type("node_event") if e.data["kind"] == "beam_tree"]
    assert tree["groups"] == 2 and any(n["status"] == "pruned" for n in tree["nodes"])
    calls = [e.data for e in recorder.of_type("lm_call")]
    assert len(calls) == 4 and all(c["purpose"] == "beam" for c in calls)


@pytest.mark.parametrize(("params", "code"), [
    ({"diverse_groups": 3}, "bad_param"),
    ({"adaptive": "majority"}, "bad_param"),
    ({"think": "on"}, "bad_param"),
])
def test_bad_beam_params_are_errors(params: dict[str, Any], code: str) -> None:
    issues = [i for i in validate(beam_wf(**params), default_registry()) if i.severity == "error"]
    assert [i.code for i in issues] == [code]
    assert next(iter(params)) in issues[0].message


def test_a_remote_model_is_refused_with_a_hint() -> None:
    remote = {"source": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    issues = [i for i in validate(beam_wf(remote), default_registry()) if i.code == "beam_needs_local_model"]
    assert len(issues) == 1 and "local GGUF" in issues[0].hint


def test_sampling_knobs_are_a_warning() -> None:
    wf = beam_wf(temperature=0.7)
    assert codes(wf) == []
    assert codes(wf, "warning") == ["beam_ignores_sampling"]
    assert codes(beam_wf(), "warning") == []


def test_beam_width_is_capped_in_share_mode() -> None:
    wf = beam_wf(n=SHARE_MAX_BEAMS + 4)
    assert [i.code for i in check_workflow_allowed(wf, SharePolicy.for_serving("0.0.0.0"))] == ["share_cap_exceeded"]
    assert check_workflow_allowed(wf, SharePolicy.local()) == []
