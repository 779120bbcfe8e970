"""The editor's History panel server functions (app/ui/history_panel.py): versions listed, a version opened
read-only, a diff's canvas (marks, removed nodes ghosted), restore, names, publishing refused to visitors, and
the `?workflow=NAME@VERSION` deep link."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from app.service.errors import UserError
from app.share.deeplink import read_deep_link, workflow_link
from app.ui import editor_page
from app.ui.editor_page import mg_save
from app.ui.endpoints import VISITOR_KEY, endpoint
from app.ui.history_panel import (
    diff_canvas,
    mg_diff_versions,
    mg_history,
    mg_name_version,
    mg_open_version,
    mg_publish_version,
    mg_restore_version,
    mg_unpublish_version,
)
from app.ui.share_links import sl_open_link
from app.workflow.diff import diff_workflows
from app.workflow.spec import load_workflow_text
from tests.studio_fixtures import studio_service

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")


def _json(text: str) -> dict:
    return load_workflow_text(text).to_dict()


def test_a_diff_canvas_marks_added_changed_and_ghosts_removed_nodes() -> None:
    old = {"version": 1, "name": "w", "nodes": [
        {"id": "a", "kind": "sampler", "params": {"n": 8, "prompt": "{q}"}},
        {"id": "gone", "kind": "voter", "inputs": {"candidates": "a.candidates", "x": "nowhere.out"}}],
        "outputs": {"answer": "gone.answer"}, "layout": {"a": [0, 0], "gone": [300, 40]}}
    new = {"version": 1, "name": "w", "nodes": [
        {"id": "a", "kind": "sampler", "params": {"n": 4, "prompt": "{q}"}},
        {"id": "pick", "kind": "mbr", "inputs": {"candidates": "a.candidates"}}],
        "outputs": {"answer": "pick.answer"}}
    diff = {"nodes": {"added": [{"id": "pick", "kind": "mbr"}], "removed": [{"id": "gone", "kind": "voter"}]},
            "params": [{"node": "a", "param": "n", "old": 8, "new": 4}]}
    merged, marks = diff_canvas(old, new, diff)
    assert marks == {"pick": "added", "a": "changed", "gone": "removed"}
    ghost = next(n for n in merged["nodes"] if n["id"] == "gone")
    assert ghost["inputs"] == {"candidates": "a.candidates"}  # wired only to nodes still drawn
    assert merged["layout"] == {"gone": [300, 40]} and "layout" not in new  # the input is left as it was


def test_the_panel_lists_previews_diffs_restores_and_names_versions(tmp_path: Path) -> None:
    service = studio_service(tmp_path)
    try:
        mg_save(service, {"name": "sc", "workflow": _json(EXAMPLE), "message": "first"})
        mg_save(service, {"name": "sc", "workflow": _json(EXAMPLE.replace("n: 8", "n: 4")), "message": "second"})
        listed = mg_history(service, {"name": "sc"})
        assert [v["message"] for v in listed["versions"]] == ["second", "first"] and listed["owner"]
        first = listed["versions"][1]["version"]
        opened = mg_open_version(service, {"name": "sc", "version": first[:8]})
        assert opened["read_only"] and opened["version"] == first and "n: 8" in opened["yaml"]
        drawn = mg_diff_versions(service, {"name": "sc", "a": first, "b": "current"})
        assert drawn["marks"] == {"think": "changed"} and drawn["lines"] == ["~ think.n: 8 → 4"]
        assert drawn["a_version"] == first and drawn["b_version"] == listed["versions"][0]["version"]
        assert next(n for n in drawn["workflow"]["nodes"] if n["id"] == "think")["params"]["n"] == 4
        assert mg_name_version(service, {"name": "sc", "version": first, "label": " baseline "})["label"] == "baseline"
        restored = mg_restore_version(service, {"name": "sc", "version": "baseline"})
        assert "n: 8" in restored["yaml"] and "n: 8" in (tmp_path / "workflows" / "sc.yaml").read_text()
        assert [v["version"] for v in restored["versions"] if v["current"]] == [first]
        assert restored["restored_subworkflows"] == []  # no sub-workflows: only the file itself
        assert mg_publish_version(service, {"name": "sc", "version": "baseline"})["version"] == first
        assert [v["published"] for v in mg_history(service, {"name": "sc"})["versions"]] == [False, True]
        assert mg_unpublish_version(service, {"name": "sc"}) == {"unpublished": True}
        with pytest.raises(UserError, match="not a version reference"):
            mg_open_version(service, {"name": "sc", "version": "x; drop"})
        with pytest.raises(UserError, match="save the workflow first"):
            mg_history(service, {})
    finally:
        service.close()


def test_a_visitor_reads_versions_but_publishing_is_refused_in_words(tmp_path: Path) -> None:
    service = studio_service(tmp_path, share=True)
    try:
        mg_save(service, {"name": "mine", "workflow": _json(EXAMPLE), VISITOR_KEY: "v1"})
        listed = mg_history(service, {"name": "mine"})
        assert len(listed["versions"]) == 1 and listed["owner"] is False
        with pytest.raises(UserError, match="is for the owner of this app"):
            mg_publish_version(service, {"name": "mine", "version": "latest"})
        # what the browser gets from the page's server function: the refusal in words, no traceback
        calls = {fn.__name__: endpoint(fn, service) for fn in editor_page.SERVER_FUNCTIONS}
        answer = calls["mg_publish_version"]({"name": "mine", "version": "latest"},
                                             request=SimpleNamespace(session_hash="v1"))
        assert answer == {"error": "publishing a version is for the owner of this app"}
    finally:
        service.close()


def test_a_deep_link_names_a_version_to_open_read_only(tmp_path: Path) -> None:
    assert read_deep_link({"workflow": "sc@3f2a1c"}).version == "3f2a1c"
    assert read_deep_link({"workflow": "sc"}).version is None
    assert "malformed" in (read_deep_link({"workflow": "sc@<x>"}).error or "")
    assert workflow_link("http://h:1", "sc", "-1") == "http://h:1/?workflow=sc%40-1"
    service = studio_service(tmp_path)
    try:
        mg_save(service, {"name": "sc", "workflow": _json(EXAMPLE), "message": "first"})
        version = mg_history(service, {"name": "sc"})["versions"][0]["version"]
        opened = sl_open_link(service, {"query": {"workflow": f"sc@{version[:6]}"}})
        assert opened == {"kind": "workflow", "name": "sc", "source": "version", "version": version}
        missing = sl_open_link(service, {"query": {"workflow": "sc@ffffff"}})
        assert "the link opens version 'ffffff' of 'sc'" in missing["error"]
    finally:
        service.close()


def test_the_diff_the_panel_draws_is_the_workflow_diff() -> None:
    old, new = load_workflow_text(EXAMPLE), load_workflow_text(EXAMPLE.replace("n: 8", "n: 4"))
    _, marks = diff_canvas(old.to_dict(), new.to_dict(), diff_workflows(old, new))
    assert marks == {"think": "changed"}
