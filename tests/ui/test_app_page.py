"""The app page's server side (app/ui/app_page.py, app_target.py, app_links.py): which workflow a link opens, the
form's fields, required inputs refused, a run through the share policy, "How it was decided", app links and the
redirect of `?app=` (and, in share mode, of workflow links) to the app page."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from app.share.deeplink import encode_workflow
from app.ui import app_page
from app.ui.app_links import AppLinkRedirect, app_link, app_payload_link, app_redirect
from app.ui.app_target import resolve_target
from app.ui.share_links import sl_make_links
from app.viz.decision import decision_html
from tests.studio_fixtures import studio_service

TINY = """\
version: 1
name: tiny vote
description: Three short samples and a majority vote.
inputs:
  question: {type: text, description: A short arithmetic question}
  budget: {type: number, default: 8}
nodes:
- id: think
  kind: sampler
  params: {n: 3, prompt: '{question}', max_tokens: 8, extract: last_number}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority, extract: last_number}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""


def _calls(service: Any, fixed: str | None = None) -> dict[str, Any]:
    """The page's server functions as the browser calls them (each wrapped by `endpoint`)."""
    return {fn.__name__: fn for fn in app_page.server_functions(service, fixed)}


class _Request:
    """What Gradio hands a server function: the browser tab's session."""

    def __init__(self, session: str) -> None:
        self.session_hash = session
        self.client = type("Client", (), {"host": "10.0.0.7"})()
        self.headers: dict[str, str] = {}


def _service(tmp_path: Path, share: bool = False, reply: Any = None) -> Any:
    service = studio_service(tmp_path, share=share, reply=reply or (lambda prompt, i: ["4", "4", "5"][i % 3]))
    (service.workflows_dir / "tiny.yaml").write_text(TINY, encoding="utf-8")
    return service


def _wait(calls: dict[str, Any], run_id: str, request: Any = None) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        snap = calls["ap_status"]({"run_id": run_id}, request)
        if snap.get("finished"):
            return snap
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish: {snap}")


def test_an_app_link_opens_its_workflow_with_typed_fields_and_required_inputs(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        info = _calls(service)["ap_open"]({"query": {"app": "tiny"}})
        assert info["title"] == "tiny vote" and info["description"].startswith("Three short samples")
        fields = {f["name"]: f for f in info["inputs"]}
        assert fields["question"]["required"] and fields["question"]["type"] == "text"
        assert not fields["budget"]["required"] and fields["budget"]["default"] == 8
        assert info["outputs"] == ["answer"] and info["problem"] is None
        assert info["studio_url"] == "./?workflow=tiny&studio=1"
        assert _calls(service)["ap_open"]({"query": {"workflow": "tiny"}})["title"] == "tiny vote"
    finally:
        service.close()


def test_links_that_name_nothing_usable_get_a_clear_error(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        ap_open = _calls(service)["ap_open"]
        assert "no workflow named 'missing'" in ap_open({"query": {"app": "missing"}})["error"]
        assert "names are not paths" in ap_open({"query": {"app": "../../etc/passwd"}})["error"]
        assert "damaged" in ap_open({"query": {"wf": "1.@@@"}})["error"] or \
            "characters" in ap_open({"query": {"wf": "1.@@@"}})["error"]
        assert "twice" in ap_open({"query": {"app": "tiny", "wf": encode_workflow(TINY)}})["error"]
        assert "names no workflow" in ap_open({"query": {}})["error"]
    finally:
        service.close()


def test_a_required_input_left_empty_is_refused_naming_the_field(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        refused = _calls(service)["ap_run"]({"query": {"app": "tiny"}, "inputs": {"question": "   "}})
        assert refused["fields"] == ["question"] and "question" in refused["error"]
        assert not service.active_runs()
    finally:
        service.close()


def test_a_run_answers_and_tells_how_it_was_decided(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        calls = _calls(service)
        snap = calls["ap_run"]({"query": {"app": "tiny"}, "inputs": {"question": "What is 2 + 2?", "budget": 8}})
        assert snap.get("run_id"), snap
        done = _wait(calls, snap["run_id"])
        assert done["status"] == "succeeded"
        assert {v["port"]: v["text"] for v in done["output_views"]}["answer"] == "4"
        html = calls["ap_decided"]({"run_id": snap["run_id"]})["html"]
        assert "Votes per answer" in html and html.count('data-testid="vote-row"') == 2
        assert "★ 4" in html and "Candidates of vote" in html
    finally:
        service.close()


def test_a_share_link_payload_runs_under_the_share_policy_and_only_its_visitor_reads_it(tmp_path: Path) -> None:
    service = _service(tmp_path, share=True)
    try:
        calls = _calls(service)
        ada, bob = _Request("ada-session"), _Request("bob-session")
        with_default = TINY.replace("question: {type: text,", "question: {type: text, default: '1+1',")
        query = {"wf": encode_workflow(with_default)}
        info = calls["ap_open"]({"query": query}, ada)
        assert info["source"] == "link" and info["problem"] is None and info["studio_url"].startswith("./?wf=")
        snap = calls["ap_run"]({"query": query, "inputs": {}}, ada)
        _wait(calls, snap["run_id"], ada)
        assert "error" in calls["ap_decided"]({"run_id": snap["run_id"]}, bob)
        assert "error" in calls["ap_status"]({"run_id": snap["run_id"]}, bob)
        assert "Votes per answer" in calls["ap_decided"]({"run_id": snap["run_id"]}, ada)["html"]
        python = TINY.replace("outputs:", "- id: check\n  kind: verifier\n  params: {method: python, code: 'x=1'}\n"
                                          "  inputs: {candidates: think.candidates}\noutputs:")
        refused = calls["ap_open"]({"query": {"wf": encode_workflow(python)}}, ada)
        assert refused["problem"] and "python" in refused["problem"]
        assert "error" in calls["ap_run"]({"query": {"wf": encode_workflow(python)}, "inputs": {"question": "1"}}, ada)
    finally:
        service.close()


def test_the_page_of_metagen_ui_app_shows_its_one_workflow_whatever_the_query(tmp_path: Path) -> None:
    service = _service(tmp_path)
    (service.workflows_dir / "other.yaml").write_text(TINY.replace("tiny vote", "other one"), encoding="utf-8")
    try:
        calls = _calls(service, fixed="tiny")
        info = calls["ap_open"]({"query": {"app": "other"}})
        assert info["title"] == "tiny vote" and info["studio_url"] is None
        snap = calls["ap_run"]({"query": {"wf": encode_workflow(TINY.replace("tiny vote", "sneaky"))},
                                "inputs": {"question": "2+2"}})
        assert _wait(calls, snap["run_id"])["workflow"] == "tiny vote"
    finally:
        service.close()


def test_a_run_without_candidates_says_there_was_nothing_to_decide() -> None:
    record = {"run": {"id": "r1", "status": "succeeded"}, "nodes": [{"node_id": "gen", "kind": "generator",
                                                                      "outputs": {"text": "hi"}}],
              "events": [], "lm_calls": []}
    html = decision_html(record)
    assert "no choice between candidates" in html and "vote-row" not in html


@pytest.mark.parametrize(("query", "share", "target"), [
    ("app=tiny", False, "app?app=tiny"),
    ("app=tiny", True, "app?app=tiny"),
    ("workflow=tiny", False, None),
    ("workflow=tiny", True, "app?workflow=tiny"),
    ("wf=1.abc", True, "app?wf=1.abc"),
    ("workflow=tiny&studio=1", True, None),
    ("run=abc", True, None),
    ("app=", False, None),
    ("", True, None),
])
def test_app_links_and_share_mode_workflow_links_go_to_the_app_page(query: str, share: bool,
                                                                    target: str | None) -> None:
    assert app_redirect(query, share) == target


def test_the_redirect_answers_only_the_main_page() -> None:
    inner = Starlette(routes=[Route("/", lambda r: PlainTextResponse("studio")),
                              Route("/app", lambda r: PlainTextResponse("app page")),
                              Route("/gradio_api/x", lambda r: PlainTextResponse("api"))])
    client = TestClient(AppLinkRedirect(inner, share_mode=True))
    moved = client.get("/?app=tiny", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == "app?app=tiny"
    assert client.get("/?workflow=tiny").text == "app page"
    assert client.get("/?workflow=tiny&studio=1").text == "studio"
    assert client.get("/gradio_api/x?app=tiny").text == "api"
    assert client.post("/?app=tiny").status_code == 405  # only page loads move


def test_copy_app_link_makes_app_links_that_open_the_same_workflow(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        saved = sl_make_links(service, {"base": "http://host:7860/", "name": "tiny", "dirty": False})
        assert saved["app_url"] == "http://host:7860/?app=tiny"
        changed = sl_make_links(service, {"base": "http://host:7860/", "name": "tiny", "dirty": True, "yaml": TINY})
        parts = urlsplit(changed["app_url"])
        assert parts.path == "/app"
        target = resolve_target(service, {k: v[0] for k, v in parse_qs(parts.query).items()})
        assert target.source == "link" and target.workflow.name == "tiny vote"
        assert app_link("http://h/?workflow=x&keep=1", "tiny") == "http://h/?keep=1&app=tiny"
        assert app_payload_link("http://h/sub", TINY).startswith("http://h/sub/app?wf=")
    finally:
        service.close()


def test_an_unknown_run_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        calls = _calls(service)
        assert "no live run 'nope'" in calls["ap_status"]({"run_id": "nope"})["error"]
        assert calls["ap_decided"]({"run_id": "nope"})["error"]
    finally:
        service.close()


def test_metagen_ui_app_with_an_unknown_name_exits_with_the_names_it_has(tmp_path: Path) -> None:
    env = {**os.environ, "METAGEN_HOME": str(tmp_path), "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("METAGEN_WORKFLOWS", None)
    done = subprocess.run([sys.executable, "-m", "app.cli", "ui", "--no-browser", "--dry-run", "--port", "7",
                           "--app", "nope"], cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "no workflow named 'nope'" in done.stderr and "self_consistency" in done.stderr
    assert "Traceback" not in done.stderr
