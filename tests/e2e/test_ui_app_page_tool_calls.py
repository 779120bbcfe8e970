"""The app page shows a tool-call answer as calls: static/app_page.js in Chromium, its server functions answered
with what the service returns for a real tool_self_consistency run on a scripted fake (app_info, output_views),
renders each call's name and arguments, and neither the answer JSON nor the candidates' JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.service.studio import output_views
from app.service.workflow_api import load_source
from app.ui.app_page import APP_MARKUP, app_info
from app.ui.app_target import resolve_target
from nodes.base import to_jsonable
from tests.studio_fixtures import studio_service

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CALL = json.dumps({"content": "", "tool_calls": [{"name": "get_weather",
                                                  "arguments": {"city": "Paris", "unit": "celsius"}}]})
START = """([info, views]) => {
  const finished = {run_id: "r1", status: "succeeded", finished: true, nodes: {}, done: 3, total: 3,
                    progress: 1, elapsed_s: 0.1, output_views: views};
  const server = {ap_open: async () => info, ap_run: async () => finished, ap_status: async () => finished,
                  ap_cancel: async () => finished, ap_decided: async () => ({html: ""})};
  return window.MetagenApp.start(document.getElementById("root"), server);
}"""


def _served(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the page's ap_open and a finished run's ap_status carry for tool_self_consistency on a fake."""
    service = studio_service(tmp_path, reply=lambda prompt, i: CALL)
    try:
        shutil.copyfile(REPO / "workflows" / "tool_self_consistency.yaml",
                        service.workflows_dir / "tool_self_consistency.yaml")
        info = app_info(service, resolve_target(service, {"app": "tool_self_consistency"}), True)
        wf = load_source(service.workflows_dir / "tool_self_consistency.yaml")[0]
        result = service.run_workflow(wf, {}, trace=False)
        assert result.status == "succeeded", result.error
        return info, output_views(to_jsonable(result.outputs))
    finally:
        service.close()


def test_the_app_page_renders_a_tool_call_answer_as_calls(page: Any, tmp_path: Path) -> None:
    info, views = _served(tmp_path)
    answer = next(v for v in views if v["port"] == "answer")
    assert answer["tool_answer"]["tool_calls"][0]["name"] == "get_weather"
    page.set_content(f'<div id="root">{APP_MARKUP}</div>')
    page.add_style_tag(path=str(REPO / "static" / "app_page.css"))
    page.add_script_tag(path=str(REPO / "static" / "app_page.js"))
    page.evaluate(START, [info, views])
    page.wait_for_selector("[data-testid=app-page][data-ready='1']")
    page.locator("[data-testid=app-run]").click()
    page.wait_for_selector("[data-testid=app-call]")
    output = page.locator("[data-testid=app-output-answer]")
    assert output.locator("[data-testid=app-call]").count() == 1
    assert output.locator("[data-testid=app-call-name]").inner_text() == "get_weather"
    args = output.locator(".ap-arg")
    assert [args.nth(i).inner_text().split() for i in range(args.count())] == [["city", '"Paris"'],
                                                                               ["unit", '"celsius"']]
    text = page.locator("[data-testid=app-outputs]").inner_text()
    assert "tool_calls" not in text and '{"content"' not in text
