"""Share mode on localhost (forced with --share-mode) behind a login: what a visitor can and cannot do, in
Chromium and over plain HTTP."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from app.share.deeplink import encode_workflow

pytestmark = pytest.mark.e2e

USER, PASSWORD = "ada", "lovelace-1815"
SERVER_ARGS = ["--dry-run", "--share-mode", "--auth", f"{USER}:{PASSWORD}", "--cap-lm-calls", "5"]

PYTHON_WF = """version: 1
name: visitor_python
inputs:
  q: {type: text, default: "2+2?"}
nodes:
  - id: think
    kind: sampler
    params: {n: 2, prompt: "{q}"}
    inputs: {q: inputs.q}
  - id: check
    kind: verifier
    params: {method: python, code: "__import__('os').system('touch /tmp/pwned')"}
    inputs: {candidates: think.candidates}
outputs:
  best: check.candidates
"""

PATH_WF = """version: 1
name: visitor_model
models:
  main: {source: path, path: /etc/passwd}
inputs:
  q: {type: text, default: "2+2?"}
nodes:
  - id: think
    kind: generator
    model: main
    params: {prompt: "{q}"}
    inputs: {q: inputs.q}
outputs:
  answer: think.text
"""


def _status(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=15) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_logged_in_visitors_cannot_fetch_files_by_path(studio: Any) -> None:
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect)
    right = urllib.parse.urlencode({"username": USER, "password": PASSWORD}).encode()
    opener.open(urllib.request.Request(studio.url + "login", data=right), timeout=15).close()

    def status(path: str) -> int:
        try:
            with opener.open(studio.url + "gradio_api/file=" + path, timeout=15) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    from app.platform.resources import static_dir

    assert status(str(static_dir() / "share_links.js")) == 200  # the app's own static files
    assert status("/etc/passwd") == 403
    assert status(str(studio.home / "workflows" / "best_of_n.yaml")) == 403
    assert status(str(Path(__file__).resolve())) == 403
    assert _status(studio.url + "gradio_api/file=" + str(static_dir() / "share_links.js")) == 401  # no login


def test_auth_is_required_over_http(studio: Any) -> None:
    base = studio.url
    assert _status(base + "config") == 401
    assert _status(base + "gradio_api/info") == 401
    wrong = urllib.parse.urlencode({"username": USER, "password": "nope"}).encode()
    assert _status(base + "login", wrong, {"Content-Type": "application/x-www-form-urlencoded"}) == 400
    right = urllib.parse.urlencode({"username": USER, "password": PASSWORD}).encode()
    assert _status(base + "login", right, {"Content-Type": "application/x-www-form-urlencoded"}) == 200
    for _ in range(100):  # the banner is printed just after the server starts answering
        if "Login required" in studio.log():
            break
        time.sleep(0.1)
    log = studio.log()
    assert "share mode" in log and "Login required" in log


def _login(page: Any, studio: Any, query: str = "") -> None:
    page.goto(studio.url + query)
    page.get_by_label("username").fill(USER)
    page.get_by_label("password").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()
    page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)


def test_login_page_then_share_mode_banner(page: Any, studio: Any, shot: Any, page_watch: Any) -> None:
    page_watch.allow("401")
    page.goto(studio.url)
    page.get_by_role("button", name="Login").wait_for()
    assert page.locator(".mg-page").count() == 0  # nothing of the app before logging in
    shot(page, "login")
    _login(page, studio)
    assert "share mode" in page.locator("#mg-banner").inner_text()
    assert page.locator("#mg-models-path").count() == 0 or not page.locator("#mg-models-path").is_visible()


def _paste_yaml(page: Any, text: str) -> None:
    page.locator("[data-testid=yaml-editor]").fill(text)
    page.locator("[data-testid=yaml-editor]").dispatch_event("input")


def test_python_verifier_and_model_paths_refused_in_the_editor(page: Any, studio: Any, shot: Any,
                                                               page_watch: Any) -> None:
    page_watch.allow("401")
    _login(page, studio)
    _paste_yaml(page, PYTHON_WF)
    page.wait_for_function("document.querySelector('[data-testid=issues]').innerText.includes('python_disabled')",
                           timeout=20_000)
    page.locator("[data-testid=run-btn]").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').innerText.includes('disabled')",
                           timeout=20_000)
    assert not Path("/tmp/pwned").exists()
    shot(page, "python-refused")

    _paste_yaml(page, PATH_WF)
    page.wait_for_function(
        "document.querySelector('[data-testid=issues]').innerText.includes('model_path_refused')", timeout=20_000)
    shot(page, "model-path-refused")


def test_linked_workflow_with_python_opens_but_is_refused(page: Any, studio: Any, page_watch: Any) -> None:
    page_watch.allow("401")
    _login(page, studio, "?studio=1&wf=" + encode_workflow(PYTHON_WF))  # the editor, not the app page
    page.wait_for_function("document.querySelector('[data-testid=notice]').innerText.includes('from the link')",
                           timeout=20_000)
    page.wait_for_function("document.querySelector('[data-testid=issues]').innerText.includes('python_disabled')",
                           timeout=20_000)
    assert page.evaluate("window.MetagenUI.state().runs.length") == 0


def test_traversal_in_a_workflow_link_is_refused(page: Any, studio: Any, page_watch: Any) -> None:
    page_watch.allow("401")
    _login(page, studio, "?studio=1&workflow=" + urllib.parse.quote("../../../etc/passwd"))
    page.wait_for_function("document.querySelector('[data-testid=notice]').innerText.includes('Cannot open')",
                           timeout=20_000)
    assert "names are not paths" in page.locator("[data-testid=notice]").inner_text()
    assert "root:" not in page.locator("[data-testid=yaml-editor]").input_value()


BIG_WF = """version: 1
name: visitor_big
inputs:
  q: {type: text, default: "2+2?"}
nodes:
  - id: think
    kind: sampler
    params: {n: 8, prompt: "{q}"}
    inputs: {q: inputs.q}
  - id: vote
    kind: voter
    params: {method: majority}
    inputs: {candidates: think.candidates}
outputs:
  answer: vote.answer
"""


def test_run_budget_is_capped_by_the_server(page: Any, studio: Any, shot: Any, page_watch: Any) -> None:
    page_watch.allow("401")
    _login(page, studio)
    _paste_yaml(page, BIG_WF)  # 8 samples, but the owner allows 5 LM calls per run
    page.wait_for_selector("[data-node-id='think']", timeout=20_000)  # the pasted workflow is on the canvas
    page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '0'",
                           timeout=20_000)
    page.locator("[data-testid=run-btn]").click()
    page.wait_for_function("['succeeded','failed','budget_exceeded'].includes("
                           "document.querySelector('[data-testid=run-status]').dataset.status)", timeout=60_000)
    assert page.locator("[data-testid=run-status]").get_attribute("data-status") == "budget_exceeded"
    assert "max_lm_calls=5" in page.locator("[data-testid=run-status]").inner_text()
    shot(page, "budget-capped")


def test_visitors_do_not_see_each_others_runs(page: Any, studio: Any, browser: Any, page_watch: Any) -> None:
    page_watch.allow("401")
    _login(page, studio)
    _paste_yaml(page, BIG_WF.replace("visitor_big", "first_visitor"))
    page.wait_for_selector("[data-node-id='think']", timeout=20_000)
    page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '0'",
                           timeout=20_000)
    page.locator("[data-testid=run-btn]").click()
    page.wait_for_function("['succeeded','failed','budget_exceeded'].includes("
                           "document.querySelector('[data-testid=run-status]').dataset.status)", timeout=60_000)
    run_id = page.evaluate("window.MetagenUI.state().currentRun")
    page.get_by_role("tab", name="Traces").click()  # the visitor's own run is in its Traces tab
    page.wait_for_function("(id) => document.querySelector('#mg-traces-runs').innerText.includes(id)", arg=run_id,
                           timeout=30_000)
    other = browser.new_context()
    try:
        visitor = other.new_page()  # another visitor, logged in with the same account
        _login(visitor, studio)
        assert visitor.evaluate("window.MetagenUI.state().runs.length") == 0
        visitor.get_by_role("tab", name="Traces").click()
        visitor.locator("#mg-traces-refresh").click()
        visitor.wait_for_timeout(3000)
        table = visitor.locator("#mg-traces-runs").inner_text()
        assert run_id not in table and "first_visitor" not in table
    finally:
        other.close()
