"""App links in Chromium on the bundled model, in share mode: a visitor opens `?app=NAME`, is told a required
field is empty, runs the workflow, reads the answer and opens "How it was decided", at desktop and phone sizes
(no horizontal scroll on the phone); a share link to a workflow opens its app page, which links to the studio;
`metagen ui --app NAME` serves that page alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, LOCAL_PREFIXES, StudioServer, start_server, stop_server

pytestmark = [pytest.mark.e2e, pytest.mark.model]

NAME = "tiny_vote"
TINY_VOTE = """\
version: 1
name: tiny vote
description: |
  Three short answers from the bundled model,
  and the most frequent number wins.

  Ask it something small.
models:
  main: {source: bundled}
inputs:
  question: {type: text, description: An arithmetic question}
nodes:
- id: think
  kind: sampler
  model: main
  params: {n: 3, prompt: "{question}\\nAnswer with a number.", max_tokens: 12, temperature: 0.7,
           extract: last_number, normalize: number}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority, extract: last_number, normalize: number}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
RECORD_CANCEL = """() => {
  window.__cancelSeen = [];
  const status = document.querySelector('[data-testid=app-status]');
  const cancel = document.querySelector('[data-testid=app-cancel]');
  new MutationObserver(() => window.__cancelSeen.push({status: status.dataset.status || "",
                                                       enabled: !cancel.disabled}))
    .observe(status, {attributes: true, attributeFilter: ["data-status"]});
}"""
FINISHED = "['succeeded','failed','cancelled','budget_exceeded','invalid','lost'].includes(" \
           "document.querySelector('[data-testid=app-status]').dataset.status)"


def _serve(home: Path, args: list[str]) -> StudioServer:
    (home / "workflows").mkdir(parents=True, exist_ok=True)
    (home / "workflows" / f"{NAME}.yaml").write_text(TINY_VOTE, encoding="utf-8")
    return start_server(home, args)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StudioServer]:
    """`metagen ui --share-mode` on the bundled model, its workflows folder holding TINY_VOTE."""
    server = _serve(tmp_path_factory.mktemp("shared-home"), ["--share-mode"])
    yield server
    stop_server(server)


@pytest.fixture
def visitor(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context of the size the test names (its `size` parameter); console errors and requests
    off this machine fail the test."""
    size = getattr(request, "param", "desktop")
    phone = size == "phone"
    context = browser.new_context(viewport=SIZES[size], is_mobile=phone, has_touch=phone,
                                  device_scale_factor=2 if phone else 1)
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.on("request", lambda req: problems.append(f"off-machine {req.url}")
            if not req.url.startswith(LOCAL_PREFIXES) else None)
    yield page
    context.close()
    assert not problems, problems


def _open_app(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("[data-testid=app-page][data-ready='1']", timeout=60_000)


def _no_horizontal_scroll(page: Any) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width[0]} px wide in a {width[1]} px window"


def _screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for folder in (ARTIFACTS, Path("/tmp")):
        page.screenshot(path=str(folder / name), full_page=True)


@pytest.mark.parametrize("visitor", ["desktop", "phone"], indirect=True)
def test_a_visitor_runs_an_app_link_and_reads_how_it_was_decided(visitor: Any, shared: StudioServer,
                                                                 request: pytest.FixtureRequest) -> None:
    size = request.node.callspec.params["visitor"]
    page = visitor
    _open_app(page, shared.url + f"?app={NAME}")
    assert page.url.split("?")[0].endswith("/app"), page.url
    assert page.locator("[data-testid=app-title]").inner_text() == "Tiny vote"
    paragraphs = page.locator("[data-testid=app-description] p").all_inner_texts()
    assert paragraphs == ["Three short answers from the bundled model, and the most frequent number wins.",
                          "Ask it something small."]  # the YAML's hard break inside a sentence is a space
    assert page.locator(".mg-page, [data-testid=yaml-editor], [role=tab]").count() == 0  # no editor, no tabs
    assert "studio=1" in (page.locator("[data-testid=studio-link]").get_attribute("href") or "")
    assert "share mode" in page.locator("[data-testid=app-policy]").inner_text()
    if size == "phone":
        _no_horizontal_scroll(page)

    page.locator("[data-testid=app-run]").click()  # the question has no default: refused, field marked
    field = page.locator("[data-field=question]")
    assert "ap-invalid" in (field.get_attribute("class") or "")
    assert page.locator("[data-testid=app-input-question]").get_attribute("aria-invalid") == "true"
    assert "Fill in Question" in page.locator("[data-testid=app-status]").inner_text()
    assert page.evaluate("window.MetagenApp.state().run") is None

    question = {"desktop": "What is 2 + 2?", "phone": "What is 3 + 3?"}[size]  # a run of its own, not the cache's
    page.locator("[data-testid=app-input-question]").fill(question)
    assert "ap-invalid" not in (field.get_attribute("class") or "")
    page.evaluate(RECORD_CANCEL)  # every status the page shows, with whether Cancel could be pressed then
    page.locator("[data-testid=app-run]").click()
    page.wait_for_function("window.MetagenApp.state().run !== null")
    page.wait_for_function(FINISHED, timeout=300_000)
    shown = page.evaluate("window.__cancelSeen")
    live = [s for s in shown if s["status"] not in ("succeeded", "failed", "cancelled", "budget_exceeded",
                                                     "invalid", "lost")]
    assert live, shown  # the run was shown unfinished at least once (the run call answers before it ends)
    assert all(s["enabled"] for s in live), shown  # ... and Cancel was enabled whenever it was
    status = page.locator("[data-testid=app-status]")
    assert status.get_attribute("data-status") == "succeeded", status.inner_text()
    assert page.locator("[data-testid=app-progress]").get_attribute("aria-valuenow") == "100"
    answer = page.locator("[data-testid=app-output-answer]").inner_text().strip()
    assert answer, "the run finished without an answer"

    decided = page.locator("[data-testid=app-decided]")
    assert decided.is_visible() and decided.get_attribute("open") is None  # collapsed until asked
    decided.locator("summary").click()
    page.wait_for_selector("[data-testid=app-decided-body] [data-testid=vote-row]")
    body = page.locator("[data-testid=app-decided-body]").inner_text()
    assert "Votes per answer" in body and "Candidates of vote" in body and "3 model calls" in body
    assert page.locator("[data-testid=app-decided-body] table.mg-samples tbody tr").count() == 3
    if size == "phone":
        _no_horizontal_scroll(page)
    _screenshot(page, f"app_page_{size}.png")


def test_a_share_link_to_a_workflow_opens_its_app_page_with_a_link_to_the_studio(visitor: Any,
                                                                                  shared: StudioServer) -> None:
    page = visitor
    _open_app(page, shared.url + f"?workflow={NAME}")
    assert page.url.split("?")[0].endswith("/app")
    page.locator("[data-testid=studio-link]").click()
    page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
    page.wait_for_function("(n) => document.querySelector('[data-testid=wf-title]').textContent === n", arg=NAME)
    assert "studio=1" in page.url and "/app" not in page.url


def test_an_app_link_to_a_missing_workflow_says_so(visitor: Any, shared: StudioServer) -> None:
    page = visitor
    _open_app(page, shared.url + "?app=no_such_flow")
    assert "no workflow named 'no_such_flow'" in page.locator("[data-testid=app-error]").inner_text()
    assert page.locator("[data-testid=app-form]").is_hidden()


def test_metagen_ui_app_serves_that_page_alone(visitor: Any, tmp_path: Path) -> None:
    server = _serve(tmp_path / "home", ["--app", NAME])
    try:
        page = visitor
        _open_app(page, server.url)
        assert page.locator("[data-testid=app-title]").inner_text() == "Tiny vote"
        assert page.locator("[data-testid=studio-link]").is_hidden()  # no studio here to link to
        assert page.locator(".mg-page").count() == 0
        page.locator("[data-testid=app-input-question]").fill("What is 1 + 1?")
        page.locator("[data-testid=app-run]").click()
        page.wait_for_function(FINISHED, timeout=300_000)
        assert page.locator("[data-testid=app-status]").get_attribute("data-status") == "succeeded"
        assert page.locator("[data-testid=app-output-answer]").inner_text().strip()
        assert "App page of 'tiny_vote' alone" in server.log()
    finally:
        stop_server(server)
