"""Published versions (issue 50, item 5) on a scripted fake: /v1, an MCP tool, `auto` and an app link answer with the
published version while the file is edited, `model: "NAME@VERSION"` pins one on every door, and with nothing
published the file as saved is served, as before."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app.serve.config import studio_config
from app.serve.routes import api_routes
from app.service.studio import StudioService
from app.workflow.spec import load_workflow_text
from tests.studio_fixtures import studio_service

SAY = """\
version: 1
name: say
inputs:
  question: {type: text, description: Any text}
nodes:
- id: t
  kind: template
  params: {template: 'VERSION: {question}'}
  inputs: {question: inputs.question}
outputs: {answer: t.text}
"""


def say(version: str) -> str:
    return SAY.replace("VERSION", version)


@pytest.fixture()
def service(tmp_path: Path) -> Iterator[StudioService]:
    service = studio_service(tmp_path)
    service.save_yaml_text("say", say("one"))
    yield service
    service.close()


def client(service: StudioService, auto: str | None = None) -> TestClient:
    config = replace(studio_config(service), auto=auto)
    return TestClient(Starlette(routes=api_routes(service, config)), client=("127.0.0.1", 5000))


def answer(c: TestClient, model: str) -> str:
    reply = c.post("/v1/chat/completions", json={"model": model, "messages": [{"role": "user", "content": "hi"}]})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["choices"][0]["message"]["content"])


def mcp_answer(service: StudioService, name: str) -> str:
    from mcp import Client

    from app.mcp.server import build_mcp_server
    from app.serve.access import Caller
    from tests.fresh_loop import run_fresh
    from tests.mcp.conftest import text_of

    caller = Caller(remote=False, policy=service.policy)
    server = build_mcp_server(service, studio_config(service), lambda request: caller)

    async def main() -> Any:
        async with Client(server) as c:
            return await c.call_tool(name, {"question": "hi"})

    result = run_fresh(main)
    assert not result.is_error, text_of(result)
    return str(result.structured_content["outputs"]["answer"])


def test_a_published_version_keeps_answering_while_the_file_is_edited(service: StudioService) -> None:
    from app.ui.app_target import named_target

    c = client(service, auto="say")
    assert answer(c, "say") == "one: hi"  # nothing published: the file as saved
    published = service.versions.publish("say")
    service.save_workflow("say", load_workflow_text(say("two")).to_dict(), message="editing")  # the editor's save
    assert "two: {question}" in service.read_workflow_text("say")
    assert answer(c, "say") == "one: hi"
    assert answer(c, "auto") == "one: hi"
    listed = {m["id"]: m for m in c.get("/v1/models").json()["data"]}
    assert listed["say"]["metagen"]["published"] == published.version
    assert mcp_answer(service, "say") == "one: hi"
    target = named_target(service, "say")
    assert target.workflow.nodes[0].params["template"] == "one: {question}"
    runs = service.trace_store.list_runs()
    assert {r["workflow_hash"] for r in runs} == {published.version}  # every served request names its version

    latest = service.versions.get("say").version
    assert answer(c, f"say@{latest[:8]}") == "two: hi"  # a pin answers whatever is published
    assert answer(c, f"say@{published.version[:8]}") == "one: hi"
    assert named_target(service, f"say@{latest[:8]}").workflow.nodes[0].params["template"] == "two: {question}"
    missing = c.post("/v1/chat/completions", json={"model": "say@nope", "messages": [{"role": "user",
                                                                                       "content": "hi"}]})
    assert missing.status_code == 404 and "has no version 'nope'" in missing.text

    service.versions.publish("say")  # the next publish: the edit goes out
    assert answer(c, "say") == "two: hi" and mcp_answer(service, "say") == "two: hi"
    service.versions.unpublish("say")
    (service.workflows_dir / "say.yaml").write_text(say("three"), encoding="utf-8")
    assert answer(c, "say") == "three: hi"  # nothing published: the file as saved, as before


def test_a_published_parent_runs_with_its_own_sub_workflows(service: StudioService) -> None:
    from tests.workflows.test_diff import LEAF, PARENT

    service.save_yaml_text("leaf", LEAF)
    service.save_yaml_text("parent", PARENT)
    published = service.versions.publish("parent")
    (service.workflows_dir / "leaf.yaml").write_text(LEAF.replace("[{draft}]", "<{draft}>"), encoding="utf-8")
    c = client(service)
    assert answer(c, "parent") == "[hi]"  # the child as it was published, not the edited file
    runs = service.trace_store.list_runs(workflow="parent")
    assert [r["workflow_hash"] for r in runs] == [published.version]
    assert mcp_answer_parent(service) == "[hi]"
    service.versions.unpublish("parent")
    assert answer(c, "parent") == "<hi>"


def mcp_answer_parent(service: StudioService) -> str:
    from mcp import Client

    from app.mcp.server import build_mcp_server
    from app.serve.access import Caller
    from tests.fresh_loop import run_fresh

    caller = Caller(remote=False, policy=service.policy)
    server = build_mcp_server(service, studio_config(service), lambda request: caller)

    async def main() -> Any:
        async with Client(server) as c:
            return await c.call_tool("parent", {"draft": "hi"})

    return str(run_fresh(main).structured_content["outputs"]["answer"])
