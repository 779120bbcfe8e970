"""Saving a workflow opened from a `2.` share link (or a traced run) writes the sub-workflows it carried beside it,
never overwriting a different workflow of the same name, and nothing at all when one conflicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.editor_page import mg_open, mg_save
from app.ui.endpoints import VISITOR_KEY
from app.workflow.spec import load_workflow_text
from tests.core.test_subworkflows import CHILD, PARENT
from tests.studio_fixtures import studio_service


def _service(tmp_path: Path, share: bool = False) -> StudioService:
    return studio_service(tmp_path, share=share)


def _save_parent(service: StudioService, **extra: object) -> dict:
    data = load_workflow_text(PARENT).to_dict()
    return mg_save(service, {"name": "parent", "workflow": data, "overwrite": False,
                             "children": {"refine": CHILD}, **extra})


def test_the_links_children_are_saved_with_the_parent(tmp_path: Path) -> None:
    service = _service(tmp_path)
    saved = _save_parent(service)
    assert saved["children_saved"] == ["refine"]
    assert (service.workflows_dir / "refine.yaml").read_text(encoding="utf-8") == CHILD
    assert {"parent", "refine"} <= set(saved["workflows"]) and "refine" in saved["workflow_ports"]
    opened = mg_open(service, {"name": "parent"})  # the saved parent now finds its child in the folder
    assert not [i for i in opened["issues"] if i["severity"] == "error"]


def test_an_identical_child_already_there_is_kept_and_a_different_one_refuses_the_save(tmp_path: Path) -> None:
    service = _service(tmp_path)
    service.workflows_dir.mkdir(parents=True, exist_ok=True)
    child = service.workflows_dir / "refine.yaml"
    child.write_text(CHILD, encoding="utf-8")
    assert _save_parent(service)["children_saved"] == []
    (service.workflows_dir / "parent.yaml").unlink()
    child.write_text(CHILD + "# mine\n", encoding="utf-8")
    with pytest.raises(UserError, match="already has a different workflow named 'refine'"):
        _save_parent(service)
    assert child.read_text(encoding="utf-8") == CHILD + "# mine\n"  # never overwritten
    assert not (service.workflows_dir / "parent.yaml").exists()  # and nothing half-saved


def test_a_visitors_saved_children_are_its_own(tmp_path: Path) -> None:
    service = _service(tmp_path, share=True)
    _save_parent(service, **{VISITOR_KEY: "alice"})
    again = mg_save(service, {"name": "refine", "workflow": load_workflow_text(CHILD).to_dict(), "overwrite": True,
                              VISITOR_KEY: "alice"})
    assert again["name"] == "refine"
    with pytest.raises(UserError, match="not yours"):
        mg_save(service, {"name": "refine", "workflow": load_workflow_text(CHILD).to_dict(), "overwrite": True,
                          VISITOR_KEY: "bob"})


def test_a_traced_run_opens_with_the_children_it_ran(tmp_path: Path) -> None:
    """The Traces tab's "Open this run's workflow" takes the children's YAML the run recorded, not today's files."""
    from app.ui.traces_tab import run_children

    service = _service(tmp_path)
    service.workflows_dir.mkdir(parents=True, exist_ok=True)
    child = service.workflows_dir / "refine.yaml"
    child.write_text(CHILD, encoding="utf-8")
    result = service.run_workflow(load_workflow_text(PARENT))
    child.write_text(CHILD.replace("name: refine", "name: refine-changed"), encoding="utf-8")  # edited since
    record = service.trace_record(result.run_id)
    children = run_children(record)
    assert children == {"refine": CHILD}
    assert "refine" in service.linked_workflow_ports(children)
    service.close()
