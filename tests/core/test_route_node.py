"""The `route` node kind (fake backend): its validation with codes, the branch chosen at the bin edges, the score
read from a number or a vote, and the choice recorded in the trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.run import events as ev
from app.run.events import EventRecorder
from app.run.scheduler import Scheduler
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import ChildLoader
from app.workflow.validation import check
from backends.fake import FakeBackend
from nodes.kinds.route import ROUTE_EVENT, bin_of, score_of
from nodes.registry import default_registry
from tests.core.test_subworkflows import write

REGISTRY = default_registry()

BRANCH = """\
version: 1
name: {name}
inputs:
  question: {{type: text}}
nodes:
- id: say
  kind: generator
  params: {{prompt: '{word} {{question}}', max_tokens: 8}}
  inputs: {{question: inputs.question}}
outputs: {{answer: say.text}}
"""

POLICY = """\
version: 1
name: policy
inputs:
  question: {type: text, default: 'What is 2+2?'}
  difficulty: {type: number, default: 0.5}
nodes:
- id: pick
  kind: route
  params: {bins: [0.5, 0.75], branches: [hard, medium, easy]}
  inputs: {score: inputs.difficulty, question: inputs.question}
outputs: {answer: pick.answer, taken: pick.branch}
"""


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    for name, word in (("hard", "HARD"), ("medium", "MEDIUM"), ("easy", "EASY")):
        write(tmp_path, name, BRANCH.format(name=name, word=word))
    write(tmp_path, "policy", POLICY)
    return tmp_path


def codes(folder: Path, text: str) -> list[str]:
    wf = load_workflow(write(folder, "policy", text))
    return [i.code for i in check(wf, REGISTRY, ChildLoader((folder,))).issues if i.severity == "error"]


def run(folder: Path, inputs: dict[str, Any]) -> tuple[Any, EventRecorder]:
    sched = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((folder,)))
    recorder = EventRecorder(skip=(ev.TOKEN,))
    result = sched.run(load_workflow(folder / "policy.yaml"), inputs, observers=[recorder])
    return result, recorder


def test_the_policy_validates_and_binds_the_branches_ports(folder: Path) -> None:
    checked = check(load_workflow(folder / "policy.yaml"), REGISTRY, ChildLoader((folder,)))
    assert [i for i in checked.issues if i.severity == "error"] == []
    kind = checked.kinds()["pick"]
    assert [p.name for p in kind.inputs] == ["score", "question"]
    assert [p.name for p in kind.outputs] == ["answer", "branch", "bin"]
    assert [k for k in checked.children] == ["pick/0", "pick/1", "pick/2"]


@pytest.mark.parametrize(("score", "branch", "word"), [
    (0.1, "hard", "HARD"), (0.5, "medium", "MEDIUM"), (0.74, "medium", "MEDIUM"), (0.75, "easy", "EASY"),
    (1.0, "easy", "EASY")])
def test_the_score_picks_the_bin_and_only_that_branch_runs(folder: Path, score: float, branch: str,
                                                            word: str) -> None:
    result, recorder = run(folder, {"difficulty": score})
    assert result.status == "succeeded", result.error
    assert result.outputs["taken"] == branch and word in result.outputs["answer"]
    started = [e.node_id for e in recorder.of_type(ev.NODE_START)]
    index = ["hard", "medium", "easy"].index(branch)
    assert [n for n in started if "/" in n] == [f"pick/{index}/say"]  # one branch ran, under its bin's path
    note = next(e for e in recorder.of_type(ev.NODE_EVENT) if e.data.get("kind") == ROUTE_EVENT)
    assert note.node_id == "pick" and note.data["branch"] == branch and note.data["bin"] == index
    assert note.data["score"] == pytest.approx(score)


def test_bin_edges_and_scores_from_a_vote() -> None:
    assert [bin_of(s, [0.5, 0.75]) for s in (0.0, 0.4999, 0.5, 0.75, 2.0)] == [0, 0, 1, 2, 2]
    assert bin_of(0.3, []) == 0
    vote = {"clusters": [{"answer": "4", "count": 3}, {"answer": "5", "count": 1}], "total": 4}
    assert score_of(vote) == 0.75 and score_of(2) == 2.0
    assert score_of(True) is None and score_of("0.5") is None and score_of({"total": 0, "clusters": []}) is None


@pytest.mark.parametrize(("params", "code"), [
    ("{bins: [0.75, 0.5], branches: [hard, medium, easy]}", "bad_param"),
    ("{bins: [a, 0.5], branches: [hard, medium, easy]}", "bad_param"),
    ("{bins: 0.5, branches: [hard, medium]}", "bad_param"),
    ("{bins: [0.5], branches: [hard, medium, easy]}", "bad_param"),
    ("{bins: [0.5, 0.75], branches: [hard, medium, nowhere]}", "unknown_workflow"),
    ("{bins: [0.5, 0.75], branches: [hard, medium, other]}", "route_mismatch"),
])
def test_bad_routes_are_reported_with_codes(folder: Path, params: str, code: str) -> None:
    write(folder, "other", BRANCH.format(name="other", word="X").replace("outputs: {answer:", "outputs: {text:"))
    text = POLICY.replace("{bins: [0.5, 0.75], branches: [hard, medium, easy]}", params)
    assert code in codes(folder, text)


@pytest.mark.parametrize("bad", [[1, 2], {"a": 1}, None, -5, "x"])
def test_wrong_typed_params_give_issues_not_exceptions(folder: Path, bad: Any) -> None:
    for param in ("bins", "branches", "models"):
        text = POLICY.replace("params: {", f"params: {{{param}: {bad!r}, ".replace("None", "null"), 1)
        text = text.replace(f", {param}: [", ", _unused: [") if param != "models" else text
        found = codes(folder, text)  # raises nothing: the wrong type is an error issue, with its code
        if param == "models" and bad is None:  # null is the param left unset: every branch on the run's model
            assert found == [], found
            continue
        assert "bad_param" in found, (param, bad, found)
        assert set(found) <= {"bad_param", "unknown_workflow", "route_mismatch", "unknown_model"}, (param, bad)
