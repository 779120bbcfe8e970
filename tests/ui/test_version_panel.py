"""The History panel's service calls (issue 50, items 1, 2 and 4's back end): the editor's save and a share-mode
visitor's save record versions, a version opens read-only with its canvas, two diff with readable lines, restore,
names and publishing are the owner's, and a traced run finds the version it ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.service.errors import UserError
from app.ui.editor_page import mg_save
from app.ui.endpoints import VISITOR_KEY
from app.workflow.spec import load_workflow_text
from tests.studio_fixtures import studio_service

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")


def _editor_json(text: str) -> dict:
    return load_workflow_text(text).to_dict()


def test_the_editors_saves_are_versions_the_panel_reads_diffs_restores_names_and_publishes(tmp_path: Path) -> None:
    service = studio_service(tmp_path, reply=lambda prompt, i: "Answer: 7")
    try:
        panel = service.version_panel
        mg_save(service, {"name": "sc", "workflow": _editor_json(EXAMPLE), "message": "as shipped"})
        mg_save(service, {"name": "sc", "workflow": _editor_json(EXAMPLE)})  # identical: no new version
        mg_save(service, {"name": "sc", "workflow": _editor_json(EXAMPLE.replace("n: 8", "n: 4")),
                          "message": "n=4"})
        history = panel.workflow_history("sc")
        assert [h["message"] for h in history] == ["n=4", "as shipped"]
        assert history[0]["current"] and not history[1]["current"]
        old = panel.open_version("sc", "-1")
        assert old["read_only"] and old["version"] == history[1]["version"] and not old["error"]
        assert "n: 8" in old["yaml"] and old["workflow"]["nodes"]  # the canvas JSON of that version
        diff = panel.diff_versions("sc", "-1")
        assert diff["lines"] == ["~ think.n: 8 → 4"] and diff["a"] == history[1]["version"]
        assert panel.name_version("sc", "-1", "shipped") == {"version": history[1]["version"], "label": "shipped"}
        restored = panel.restore_version("sc", "shipped")
        assert "n: 8" in restored["yaml"] and "n: 8" in service.read_workflow_text("sc")
        assert panel.publish_version("sc", "shipped")["version"] == history[1]["version"]
        assert panel.workflow_history("sc")[1]["published"]
        assert panel.unpublish_version("sc")
        result = service.run_workflow(load_workflow_text(service.read_workflow_text("sc")), seed=1)
        assert panel.run_version(result.run_id) == {"workflow": "sc", "version": history[1]["version"]}
    finally:
        service.close()


def test_a_visitors_save_is_a_version_and_only_the_owner_changes_them(tmp_path: Path) -> None:
    service = studio_service(tmp_path, share=True)
    try:
        mg_save(service, {"name": "mine", "workflow": _editor_json(EXAMPLE), VISITOR_KEY: "v1"})
        panel = service.version_panel
        assert len(panel.workflow_history("mine")) == 1
        for change in (lambda: panel.publish_version("mine"), lambda: panel.restore_version("mine", "latest"),
                       lambda: panel.name_version("mine", "latest", "x")):
            with pytest.raises(UserError, match="is for the owner of this app"):
                change()
    finally:
        service.close()
