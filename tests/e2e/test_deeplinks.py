"""Deep links in Chromium: ?workflow=NAME, ?wf=<payload> and ?run=ID open the right thing; tampered,
oversized and unknown links show a clear error; the "Copy share link" button makes links that work."""

from __future__ import annotations

import base64
import os
import zlib
from typing import Any
from urllib.parse import quote

import pytest

from app.share.deeplink import MAX_PAYLOAD_CHARS, encode_workflow

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]

LINKED = """version: 1
name: linked_demo
description: carried in a link
inputs:
  question: {type: text, default: "What is 6 * 7?"}
nodes:
  - id: think
    kind: sampler
    params: {n: 3, prompt: "{question}"}
    inputs: {question: inputs.question}
  - id: vote
    kind: voter
    params: {method: majority}
    inputs: {candidates: think.candidates}
outputs:
  answer: vote.answer
"""


def _goto(ui: Any, query: str) -> None:
    ui.page.goto(ui.server.url + query)
    ui.page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)


def _wait_notice(ui: Any, text: str) -> str:
    ui.page.wait_for_function("(t) => document.querySelector('[data-testid=notice]').textContent.includes(t)",
                              arg=text, timeout=20_000)
    return ui.notice()


def test_workflow_link_opens_a_saved_workflow(ui: Any, shot: Any, studio: Any) -> None:
    saved = (studio.home / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")
    _goto(ui, "?workflow=self_consistency")
    ui.page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'self_consistency'")
    assert ui.yaml() == saved
    assert ui.page.locator("[data-testid=dirty-flag]").is_hidden()
    assert ui.run_status() in ("", "idle") or "No run" in ui.page.locator("[data-testid=run-status]").inner_text()
    shot(ui.page, "workflow-link")


def test_payload_link_opens_the_workflow_without_running_it(ui: Any, shot: Any) -> None:
    _goto(ui, "?wf=" + encode_workflow(LINKED))
    notice = _wait_notice(ui, "from the link")
    assert "not been run" in notice
    assert ui.wait_yaml(lambda t: "linked_demo" in t) == LINKED
    assert sorted(ui.node_ids()) == sorted(["inputs.question", "think", "vote", "outputs.answer"])
    assert "No run" in ui.page.locator("[data-testid=run-status]").inner_text()
    assert ui.page.evaluate("window.MetagenUI.state().runs.length") == 0
    assert "wf=" not in ui.page.url  # a reload restores the draft instead of re-opening the link
    shot(ui.page, "payload-link")


@pytest.mark.parametrize(("query", "message"), [
    ("?wf=" + (lambda p: p[:20] + ("A" if p[20] != "A" else "B") + p[21:])(encode_workflow(LINKED)),
     "damaged"),
    ("?wf=1." + "A" * (MAX_PAYLOAD_CHARS + 100), "too large"),
    ("?wf=1." + base64.urlsafe_b64encode(zlib.compress(b"x" * 3_000_000, 9)).decode().rstrip("="),
     "unpacks to more than"),
    ("?workflow=" + quote("../../etc/passwd"), "names are not paths"),
    ("?workflow=no_such_workflow", "not in this app's workflows folder"),
])
def test_bad_links_show_a_clear_error(ui: Any, shot: Any, page_watch: Any, query: str, message: str) -> None:
    page_watch.allow("414|URI Too Long")
    before = ui.yaml()
    _goto(ui, query)
    notice = _wait_notice(ui, "Cannot open this link")
    assert message in notice
    assert ui.yaml() == before  # nothing was replaced
    shot(ui.page, "bad-link")


def test_copy_share_link_and_run_link_round_trip(ui: Any, shot: Any, browser: Any) -> None:
    ui.open_example("self_consistency")
    ui.page.locator("[data-testid=run-btn]").click()
    assert ui.wait_run_finished() == "succeeded"
    first_run = ui.page.evaluate("window.MetagenUI.state().currentRun")
    assert first_run

    ui.page.set_viewport_size({"width": 1280, "height": 1000})  # a laptop: the popover used to run off the right
    ui.page.locator("[data-testid=share-link-btn]").click()
    ui.page.wait_for_function("document.querySelector('[data-testid=share-url]').value.length > 0")
    link = ui.page.locator("[data-testid=share-url]").input_value()
    run_url = ui.page.locator("[data-testid=share-run-url]").input_value()
    assert "?wf=" in link  # the example is not saved under a name: the workflow travels in the link
    assert run_url.endswith(f"?run={first_run}")
    assert "Copied to the clipboard" in ui.page.locator("[data-testid=share-note]").inner_text()
    box = ui.page.locator("[data-testid=share-box]").bounding_box()
    width = ui.page.evaluate("document.documentElement.clientWidth")
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width  # the whole popover on screen
    shot(ui.page, "share-box")
    ui.page.locator("[data-testid=share-close]").click()
    ui.page.set_viewport_size({"width": 1800, "height": 1150})
    yaml_here = ui.yaml()

    # a newer run, so that the linked (older) run is not simply the newest one in the list
    ui.page.locator("[data-testid=seed-input]").fill("7")
    ui.page.locator("[data-testid=run-btn]").click()
    ui.page.wait_for_function("(r) => window.MetagenUI.state().currentRun !== r", arg=first_run)
    assert ui.wait_run_finished() == "succeeded"

    other = browser.new_context(viewport={"width": 1600, "height": 1000})  # a visitor with a fresh browser
    try:
        visitor = other.new_page()
        visitor.goto(link)
        visitor.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
        visitor.wait_for_function("(y) => document.querySelector('[data-testid=yaml-editor]').value === y",
                                  arg=yaml_here, timeout=20_000)
        visitor.goto(run_url)
        visitor.wait_for_selector("#mg-trace-summary", state="visible", timeout=60_000)
        visitor.wait_for_function("(r) => document.querySelector('#mg-trace-summary').innerText.includes(r)",
                                  arg=first_run, timeout=30_000)
        visitor.wait_for_timeout(1500)  # nothing may switch the view to another run afterwards
        assert first_run in visitor.locator("#mg-trace-summary").inner_text()
        visitor.locator("#mg-traces-copy-link").click()  # the Traces tab makes the same link
        visitor.wait_for_function("(r) => document.querySelector('#mg-traces-run-link textarea, "
                                  "#mg-traces-run-link input').value.endsWith('?run=' + r)", arg=first_run)
        visitor.screenshot(path=str(ui_artifact("run-link.png")))
    finally:
        other.close()


def test_unknown_run_link_says_so(ui: Any) -> None:
    ui.page.goto(ui.server.url + "?run=doesnotexist123")
    ui.page.wait_for_function("document.querySelector('#mg-traces-message') &&"
                              " document.querySelector('#mg-traces-message').innerText.includes('no run')",
                              timeout=30_000)


def test_saved_workflow_share_link_is_by_name(ui: Any) -> None:
    ui.open_saved("best_of_n")
    ui.page.locator("[data-testid=share-link-btn]").click()
    ui.page.wait_for_function("document.querySelector('[data-testid=share-url]').value.length > 0")
    assert ui.page.locator("[data-testid=share-url]").input_value().endswith("?workflow=best_of_n")


def ui_artifact(name: str) -> Any:
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def test_payload_is_not_trusted_to_be_small(ui: Any) -> None:
    noise = base64.b64encode(os.urandom(14_000)).decode()
    with pytest.raises(ValueError):
        encode_workflow(LINKED.replace("carried in a link", noise))


LINKED_PYTHON = LINKED.replace("""outputs:
  answer: vote.answer
""", """  - id: check
    kind: verifier
    params: {method: python, code: "answer == '42'"}
    inputs: {candidates: think.candidates}
outputs:
  answer: vote.answer
""")


def test_python_from_a_link_is_shown_and_asked_before_it_runs(ui: Any, shot: Any) -> None:
    _goto(ui, "?wf=" + encode_workflow(LINKED_PYTHON))
    ui.wait_yaml(lambda t: "linked_demo" in t)
    ui.settle()
    seen: list[str] = []

    def refuse(dialog: Any) -> None:
        seen.append(dialog.message)
        dialog.dismiss()

    ui.page.once("dialog", refuse)
    ui.page.locator("[data-testid=run-btn]").click()
    _wait_notice(ui, "not accepted")
    assert seen and "answer == '42'" in seen[0] and "[check]" in seen[0]
    assert ui.page.evaluate("window.MetagenUI.state().runs.length") == 0
    ui.page.once("dialog", lambda dialog: dialog.accept())
    ui.click_run()
    assert ui.wait_run_finished() == "succeeded"
    shot(ui.page, "python-link-confirmed")


LINKED_CHILD = """version: 1
name: linked_refine
inputs:
  draft: {type: text}
nodes:
  - id: revise
    kind: generator
    params: {prompt: "Revise {draft}", max_tokens: 16}
    inputs: {draft: inputs.draft}
outputs:
  answer: revise.text
"""

LINKED_PARENT = LINKED.replace("""  - id: vote
    kind: voter
    params: {method: majority}
    inputs: {candidates: think.candidates}""", """  - id: refine_each
    kind: workflow
    map: draft
    params: {workflow: linked_refine}
    inputs: {draft: think.candidates}
  - id: vote
    kind: voter
    params: {method: majority}
    inputs: {candidates: refine_each.candidates}""")


def test_a_link_with_a_sub_workflow_opens_checks_and_runs_with_the_carried_child(ui: Any, shot: Any,
                                                                                  studio: Any) -> None:
    """The child is in the link only (not in this app's folder): the page checks and runs with it, never saves it,
    and the share button makes a link that carries it again."""
    assert not (studio.home / "workflows" / "linked_refine.yaml").exists()
    _goto(ui, "?wf=" + encode_workflow(LINKED_PARENT, {"linked_refine": LINKED_CHILD}))
    _wait_notice(ui, "from the link")
    ui.wait_yaml(lambda t: "refine_each" in t)
    ui.settle()
    assert ui.page.locator("[data-testid=issues] li").count() == 0  # the child was found: no unknown_workflow
    ui.click_run()
    assert ui.wait_run_finished() == "succeeded"
    assert not (studio.home / "workflows" / "linked_refine.yaml").exists()
    # the carried child opens from its node (it is not a file here), and the way back keeps the link's children
    ui.page.locator("[data-node-id=refine_each] .mge-node-title").dblclick()
    ui.page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'linked_refine'")
    assert "Revise {draft}" in ui.yaml()
    ui.page.locator("[data-testid=subworkflow-back]").click()
    ui.wait_yaml(lambda t: "refine_each" in t)
    ui.settle()
    assert ui.page.locator("[data-testid=issues] li").count() == 0
    assert ui.page.evaluate("window.MetagenUI.state().origin") == "link"  # still asks before python or servers
    ui.page.locator("[data-testid=share-link-btn]").click()
    ui.page.wait_for_function("document.querySelector('[data-testid=share-url]').value.includes('wf=2.')",
                              timeout=20_000)
    shot(ui.page, "link-with-sub-workflow")
    # saving the link's workflow writes the child it carried beside it (else the saved file names a missing child)
    ui.save_as("linked_parent")
    assert (studio.home / "workflows" / "linked_refine.yaml").read_text(encoding="utf-8") == LINKED_CHILD
    assert ui.page.evaluate("Object.keys(window.MetagenUI.state().linked).length") == 0
