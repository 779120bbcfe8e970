"""Undoing Make sub-workflow may delete the file it wrote (mg_delete_made): only while the file is exactly what was
written, and in share mode only a visitor's own file."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.editor_page import mg_delete_made, mg_save
from app.ui.endpoints import VISITOR_KEY
from app.workflow.spec import load_workflow_text
from tests.core.test_subworkflows import CHILD
from tests.studio_fixtures import studio_service


def _service(tmp_path: Path, share: bool = False) -> StudioService:
    return studio_service(tmp_path, share=share)


def test_an_unchanged_child_is_deleted_and_a_changed_one_kept(tmp_path: Path) -> None:
    service = _service(tmp_path)
    data = load_workflow_text(CHILD).to_dict()
    saved = mg_save(service, {"name": "refine", "workflow": data, "overwrite": False})
    path = service.workflows_dir / "refine.yaml"
    assert mg_delete_made(service, {"name": "refine", "yaml": saved["yaml"] + "# edited\n"}) == {
        "deleted": False, "reason": "changed"}
    assert path.exists()
    done = mg_delete_made(service, {"name": "refine", "yaml": saved["yaml"]})
    assert done["deleted"] is True and "refine" not in done["workflows"] and not path.exists()
    assert mg_delete_made(service, {"name": "refine", "yaml": saved["yaml"]}) == {"deleted": False, "reason": "gone"}
    with pytest.raises(UserError):
        mg_delete_made(service, {"name": "../outside", "yaml": ""})


def test_in_share_mode_only_the_visitors_own_file(tmp_path: Path) -> None:
    service = _service(tmp_path, share=True)
    data = load_workflow_text(CHILD).to_dict()
    saved = mg_save(service, {"name": "refine", "workflow": data, "overwrite": False, VISITOR_KEY: "alice"})
    with pytest.raises(UserError, match="not yours"):
        mg_delete_made(service, {"name": "refine", "yaml": saved["yaml"], VISITOR_KEY: "bob"})
    assert mg_delete_made(service, {"name": "refine", "yaml": saved["yaml"], VISITOR_KEY: "alice"})["deleted"]
