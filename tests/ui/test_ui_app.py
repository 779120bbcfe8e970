"""The Gradio app without a browser: the editor page's server functions, static head, Traces helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from app.service.studio import StudioService
from app.ui.app import build_app, static_head
from app.ui.editor_page import EDITOR_ELEM_ID
from app.ui.traces_tab import call_choices, run_rows
from backends.fake import FakeBackend

EXAMPLES = Path(__file__).resolve().parents[2] / "workflows"


def make(tmp_path: Path) -> StudioService:
    fake = FakeBackend(replies=["Answer: 7"])
    return StudioService(provider=lambda spec: fake, workflows_dir=tmp_path / "wf", examples_dir=EXAMPLES,
                         models_dir=tmp_path / "models", trace_db=tmp_path / "t.db", dry_run=True)


def editor_component(demo: gr.Blocks) -> Any:
    return next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == EDITOR_ELEM_ID)


def test_editor_page_server_functions_answer_json_and_never_raise(tmp_path: Path) -> None:
    service = make(tmp_path)
    page = editor_component(build_app(service))
    for name in ("mg_init", "mg_open", "mg_save", "mg_parse_yaml", "mg_from_editor", "mg_run", "mg_status",
                 "mg_cancel", "mg_node_outputs", "mg_example", "mg_list"):
        assert getattr(getattr(page, name), "_is_server_fn", False), name
    init = page.mg_init({})
    assert {k["kind"] for k in init["schema"]} >= {"sampler", "voter", "input", "output"}
    assert "self_consistency" in init["examples"] and init["dry_run"] is True
    broken = page.mg_parse_yaml({"text": "version: 1\nnodes: [\n"})
    assert broken["error"]["code"] == "yaml_syntax" and broken["error"]["line"]
    assert "names are not paths" in page.mg_open({"name": "../../etc/passwd"})["error"]
    assert "expected a JSON object" in page.mg_from_editor({"workflow": 42})["error"]
    assert "no live run" in page.mg_status({"run_id": "nope"})["error"]
    assert "error" in page.mg_run(None)  # a bad payload is a message, not a traceback
    opened = page.mg_example({"name": "self_consistency"})
    run = page.mg_run({"workflow": opened["workflow"], "inputs": {"question": "What is 3 + 4?"}, "seed": 1})
    final = service.wait_run(run["run_id"], timeout=30)
    assert final["status"] == "succeeded" and final["outputs"]["answer"] == "7"
    assert page.mg_node_outputs({"run_id": run["run_id"], "node_id": "vote"})["views"]
    rows, names = run_rows(service, "(all)", "succeeded")
    assert rows[0][0] == run["run_id"] and names == ["self-consistency"]
    assert run_rows(service, "(all)", "failed") == ([], ["self-consistency"])
    record = service.trace_store.get_run(run["run_id"])
    assert call_choices(record)[0].startswith("think#")
    service.close()


def test_static_head_serves_local_files_only() -> None:
    head = static_head()
    for name in ("editor.js", "editor.css", "ui_bridge.js", "ui.css"):
        assert f"/static/{name}?v=" in head
    assert "http://" not in head and "https://" not in head and 'src="gradio_api/file=' in head
