"""A published version keeps answering on /v1, MCP and an app link while its file is edited, on the bundled model
(issue 50's test): every answer's run records the published version and its prompt, not the edit's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app.serve.config import studio_config
from app.serve.routes import api_routes
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from tests.serve.test_serve_published import mcp_answer

pytestmark = pytest.mark.model

GREET = """\
version: 1
name: greet
models:
  main: {source: bundled}
inputs:
  question: {type: text, description: Any text}
nodes:
- id: g
  kind: generator
  model: main
  params: {prompt: 'PROMPT {question}', max_tokens: 6, temperature: 0}
  inputs: {question: inputs.question}
outputs: {answer: g.text}
"""


def test_a_published_version_answers_on_v1_mcp_and_an_app_link_while_the_file_is_edited(tmp_path: Path) -> None:
    from app.ui.app_target import named_target
    from app.workflow.spec import load_workflow_text

    folder = tmp_path / "wf"
    folder.mkdir()
    service = StudioService(policy=SharePolicy.local(), workflows_dir=folder, examples_dir=tmp_path / "none",
                            models_dir=tmp_path / "models", trace_db=tmp_path / "t.db")
    try:
        service.save_yaml_text("greet", GREET.replace("PROMPT", "Say hello to"))
        published = service.versions.publish("greet")
        service.save_workflow("greet", load_workflow_text(GREET.replace("PROMPT", "Say goodbye to")).to_dict())
        c = TestClient(Starlette(routes=api_routes(service, replace(studio_config(service)))),
                       client=("127.0.0.1", 5000))
        reply = c.post("/v1/chat/completions", json={"model": "greet", "seed": 1,
                                                     "messages": [{"role": "user", "content": "Tom"}]})
        assert reply.status_code == 200, reply.text
        v1_text = reply.json()["choices"][0]["message"]["content"]
        assert isinstance(v1_text, str) and v1_text
        mcp_text = mcp_answer(service, "greet")
        assert isinstance(mcp_text, str)
        runs: list[dict[str, Any]] = service.trace_store.list_runs()
        assert len(runs) == 2 and {r["workflow_hash"] for r in runs} == {published.version}
        for run in runs:
            assert "Say hello to" in service.trace_record(run["id"])["run"]["workflow_yaml"]
        assert named_target(service, "greet").workflow.nodes[0].params["prompt"] == "Say hello to {question}"
        assert "Say goodbye to" in service.read_workflow_text("greet")  # the edit is saved, just not served
    finally:
        service.close()
