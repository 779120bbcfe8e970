"""Every way of saving a workflow gets the checks a run gets (issue 37, 1.1): in share mode a visitor's python
verifier, candidates' code or reserved model name is refused whether it comes as the saved workflow, as a sub-workflow
carried with it (a link's `children`, a traced run's), and nothing at all is written; the owner may save them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.editor_page import mg_save
from app.ui.endpoints import VISITOR_KEY
from app.workflow.spec import load_workflow_text
from tests.studio_fixtures import studio_service

PARENT = """\
version: 1
name: harmless
inputs:
  question: {type: text, default: 'What is 2+2?'}
nodes:
- id: inner
  kind: workflow
  params: {workflow: checker}
  inputs: {question: inputs.question}
outputs: {answer: inner.best}
"""

CHILD = """\
version: 1
name: checker
inputs:
  question: {type: text, default: 'What is 2+2?'}
nodes:
- id: sample
  kind: sampler
  params: {prompt: '{question}', n: 2, max_tokens: 8}
  inputs: {question: inputs.question}
- id: check
  kind: verifier
  params: {method: length}
  inputs: {candidates: sample.candidates}
- id: vote
  kind: voter
  params: {method: best_of_n}
  inputs: {candidates: check.candidates}
outputs: {best: vote.best}
"""

PYTHON_CHILD = CHILD.replace("params: {method: length}", "params: {method: python, code: '0.777'}")
CODE_CHILD = CHILD.replace("params: {method: length}", "params: {method: tests, tests: 'assert True'}")


def _parent(ref: str = "checker") -> dict:
    return load_workflow_text(PARENT.replace("workflow: checker", f"workflow: {ref}")).to_dict()


def _folder(service: StudioService) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(service.workflows_dir.iterdir())}


def test_the_fixtures_are_what_they_say(tmp_path: Path) -> None:
    """The harmless parent with the harmless child saves in share mode (so what is refused below is the child)."""
    service = studio_service(tmp_path, share=True)
    saved = service.save_workflow("harmless", _parent(), linked={"checker": CHILD})
    assert saved["children_saved"] == ["checker"]
    assert set(_folder(service)) == {"harmless.yaml", "checker.yaml"}
    assert "python" in PYTHON_CHILD and "method: tests" in CODE_CHILD


@pytest.mark.parametrize(("child", "refusal"), [(PYTHON_CHILD, "python_disabled"),
                                                (CODE_CHILD, "code_execution_disabled")])
def test_a_visitors_child_the_policy_refuses_is_not_saved(tmp_path: Path, child: str, refusal: str) -> None:
    service = studio_service(tmp_path, share=True)
    before = _folder(service)
    with pytest.raises(UserError, match=refusal):  # the editor's Save of a link's workflow with its children
        mg_save(service, {"name": "harmless", "workflow": _parent(), "children": {"checker": child},
                          VISITOR_KEY: "visitor"})
    assert _folder(service) == before  # neither the parent nor the child
    with pytest.raises(UserError, match=refusal):  # the service's own save the same
        service.save_workflow("harmless", _parent(), linked={"checker": child})
    assert _folder(service) == before


def test_a_carried_child_the_parent_does_not_use_is_checked_too(tmp_path: Path) -> None:
    service = studio_service(tmp_path, share=True)
    with pytest.raises(UserError, match="python_disabled"):
        mg_save(service, {"name": "harmless", "workflow": _parent(),
                          "children": {"checker": CHILD, "stowaway": PYTHON_CHILD}})
    assert _folder(service) == {}


def test_a_grandchild_the_policy_refuses_is_not_saved(tmp_path: Path) -> None:
    middle = PARENT.replace("name: harmless", "name: middle")
    service = studio_service(tmp_path, share=True)
    with pytest.raises(UserError, match="python_disabled"):
        mg_save(service, {"name": "harmless", "workflow": _parent("middle"),
                          "children": {"middle": middle, "checker": PYTHON_CHILD}})
    assert _folder(service) == {}


def test_a_parent_using_the_owners_python_workflow_is_refused_to_a_visitor(tmp_path: Path) -> None:
    """A child found in the owner's folder counts as for a run: the run would be refused, so is the save."""
    service = studio_service(tmp_path, share=True)
    (service.workflows_dir / "checker.yaml").write_text(PYTHON_CHILD, encoding="utf-8")
    with pytest.raises(UserError, match="python_disabled"):
        service.save_workflow("harmless", _parent())
    assert set(_folder(service)) == {"checker.yaml"}


@pytest.mark.parametrize("share", [True, False])
def test_a_child_named_like_a_model_is_not_saved(tmp_path: Path, share: bool) -> None:
    """`bundled` is reserved for the model on /v1, for a carried sub-workflow as for the parent."""
    service = studio_service(tmp_path, share=share)
    with pytest.raises(UserError, match="name of a model"):
        mg_save(service, {"name": "harmless", "workflow": _parent("bundled"), "children": {"bundled": CHILD},
                          VISITOR_KEY: "visitor"})
    with pytest.raises(UserError, match="name of a model"):
        service.save_workflow("harmless", _parent("bundled"), linked={"bundled": CHILD})
    assert _folder(service) == {}


def test_an_upload_saved_as_text_gets_the_same_check(tmp_path: Path) -> None:
    service = studio_service(tmp_path, share=True)
    with pytest.raises(UserError, match="python_disabled"):
        service.save_yaml_text("checker", PYTHON_CHILD)
    service.save_yaml_text("checker", CHILD)
    assert set(_folder(service)) == {"checker.yaml"}


def test_a_traced_runs_workflow_with_a_python_child_is_not_saved_by_a_visitor(tmp_path: Path) -> None:
    """"Open this run's workflow" opens the run's workflow with the children it recorded; saving it is a save
    with children like a link's."""
    from app.ui.traces_tab import run_children

    owner = studio_service(tmp_path / "owner")
    (owner.workflows_dir / "checker.yaml").write_text(PYTHON_CHILD, encoding="utf-8")
    record = owner.trace_record(owner.run_workflow(load_workflow_text(PARENT)).run_id)
    owner.close()
    children = run_children(record)
    assert children == {"checker": PYTHON_CHILD}
    workflow = load_workflow_text(record["run"]["workflow_yaml"]).to_dict()
    service = studio_service(tmp_path / "shared", share=True)
    with pytest.raises(UserError, match="python_disabled"):
        mg_save(service, {"name": "from-run", "workflow": workflow, "children": children, VISITOR_KEY: "v"})
    assert _folder(service) == {}


def test_the_owner_may_save_them(tmp_path: Path) -> None:
    service = studio_service(tmp_path)
    saved = mg_save(service, {"name": "harmless", "workflow": _parent(),
                              "children": {"checker": PYTHON_CHILD, "coder": CODE_CHILD}})
    assert sorted(saved["children_saved"]) == ["checker", "coder"]
    assert _folder(service)["checker.yaml"] == PYTHON_CHILD
    service.save_yaml_text("again", PYTHON_CHILD)
    assert "again.yaml" in _folder(service)


CYCLE_A = PARENT.replace("name: harmless", "name: loop_a").replace("workflow: checker", "workflow: loop_b")
CYCLE_B = PARENT.replace("name: harmless", "name: loop_b").replace("workflow: checker", "workflow: loop_a")


def test_a_visitors_invalid_tree_is_validated_before_it_is_written(tmp_path: Path) -> None:
    """Round 7 §2.5: a visitor's save is validated as its run would be (a cycle of sub-workflows here; the probe's
    route bomb the same), so nothing invalid reaches the owner's folder; the owner may still save unfinished
    work."""
    service = studio_service(tmp_path, share=True)
    with pytest.raises(UserError, match=r"would run: .*unknown_workflow"):  # loop_b's loop_a is not in the folder
        mg_save(service, {"name": "loop_a", "workflow": load_workflow_text(CYCLE_A).to_dict(),
                          "children": {"loop_b": CYCLE_B}, VISITOR_KEY: "visitor"})
    assert _folder(service) == {}
    unfinished = load_workflow_text(PARENT.replace("workflow: checker", "workflow: not_there")).to_dict()
    with pytest.raises(UserError, match=r"unknown_workflow|not_there"):
        service.save_workflow("harmless", unfinished)
    assert _folder(service) == {}
    owner = studio_service(tmp_path / "owner", share=False)
    owner.save_workflow("harmless", unfinished)
    assert set(_folder(owner)) == {"harmless.yaml"}
