"""Links in the local studio (dry run): a share link always opens what it names, even when the browser holds an
unsaved draft: the draft is offered (a notice with an "Open draft" button) and kept, never restored over the link
(issue 43 §2.3: the page restored the draft, then asked before replacing it with the link's workflow; a dismissed
question left the draft open). "Copy app link" makes a link that opens the workflow's app page."""

from __future__ import annotations

from typing import Any

import pytest

from app.share.deeplink import encode_workflow

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]
DRAFT_KEY = "metagen.draft.v1"
LINKED = """version: 1
name: linked_demo
inputs:
  question: {type: text, default: "What is 6 * 7?"}
nodes:
  - id: think
    kind: generator
    params: {prompt: "{question}", max_tokens: 8}
    inputs: {question: inputs.question}
outputs:
  answer: think.text
"""


def _make_draft(ui: Any) -> str:
    """An unsaved edit of an example, as a visitor leaves it: the page keeps it as the browser's draft."""
    ui.open()
    ui.open_example("chain_of_thought")
    ui.wait_yaml(lambda t: "chain" in t)
    box = ui.page.locator("[data-testid=yaml-editor]")
    box.fill(ui.yaml().replace("name: chain-of-thought", "name: my-draft-cot", 1))
    ui.page.wait_for_function("(k) => (localStorage.getItem(k) || '').includes('my-draft-cot')", arg=DRAFT_KEY)
    ui.settle()
    return _stored_yaml(ui)


def _stored_yaml(ui: Any) -> str:
    return str(ui.page.evaluate("(k) => JSON.parse(localStorage.getItem(k)).yaml", DRAFT_KEY))


def _dialogs(ui: Any) -> list[str]:
    """Questions the page asks from now on, each answered No; leaving the page (beforeunload) is allowed."""
    seen: list[str] = []

    def dismiss(dialog: Any) -> None:
        if dialog.type == "beforeunload":
            dialog.accept()
            return
        seen.append(dialog.message)
        dialog.dismiss()

    ui.page.on("dialog", dismiss)
    return seen


def test_a_workflow_link_opens_its_workflow_and_offers_the_draft(ui: Any, studio: Any, shot: Any) -> None:
    stored = _make_draft(ui)
    dialogs = _dialogs(ui)
    ui.page.goto(ui.server.url + "?workflow=self_consistency")
    ui.page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
    ui.page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'self_consistency'")
    saved = (studio.home / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")
    assert ui.yaml() == saved and not dialogs  # the link's workflow, not the draft, and nothing asked
    banner = ui.page.locator("[data-testid=draft-banner]")
    assert banner.is_visible() and "unsaved draft of 'my-draft-cot'" in banner.inner_text()
    assert _stored_yaml(ui) == stored  # kept, not overwritten by the link's workflow
    shot(ui.page, "draft-offered")

    ui.page.locator("[data-testid=open-draft]").click()
    ui.wait_yaml(lambda t: "my-draft-cot" in t)
    assert "Restored your unsaved draft" in banner.inner_text()
    assert ui.page.locator("[data-testid=open-draft]").is_hidden()


def test_a_payload_link_opens_its_workflow_and_discarding_the_draft_keeps_the_link(ui: Any) -> None:
    _make_draft(ui)
    dialogs = _dialogs(ui)
    ui.page.goto(ui.server.url + "?wf=" + encode_workflow(LINKED))
    ui.page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
    ui.wait_yaml(lambda t: "linked_demo" in t)
    assert not dialogs and ui.page.locator("[data-testid=open-draft]").is_visible()
    ui.page.locator("[data-testid=discard-draft]").click()
    assert ui.page.locator("[data-testid=draft-banner]").is_hidden()
    assert "linked_demo" in ui.yaml()
    # the link's unsaved workflow is now the browser's draft: a reload restores it, not the discarded one
    ui.page.wait_for_function("(k) => (localStorage.getItem(k) || '').includes('linked_demo')", arg=DRAFT_KEY)
    ui.reload()
    ui.wait_yaml(lambda t: "linked_demo" in t)


def test_copy_app_link_opens_the_workflows_app_page(ui: Any, shot: Any) -> None:
    ui.open()
    ui.open_saved("self_consistency")
    ui.page.locator("[data-testid=app-link-btn]").click()
    url = ui.page.locator("[data-testid=app-url]")
    ui.page.wait_for_function("document.querySelector('[data-testid=app-url]').value !== ''")
    assert url.input_value() == ui.server.url + "?app=self_consistency"
    assert "without the editor" in ui.page.locator("[data-testid=share-note]").inner_text()
    shot(ui.page, "app-link")
    ui.page.goto(url.input_value())
    ui.page.wait_for_selector("[data-testid=app-page][data-ready='1']", timeout=60_000)
    assert ui.page.locator("[data-testid=app-title]").inner_text() == "Self-consistency"
    assert ui.page.locator("[data-testid=app-input-question]").input_value() == "What is 3 + 4?"
    ui.page.locator("[data-testid=app-run]").click()
    ui.page.wait_for_function("document.querySelector('[data-testid=app-status]').dataset.status === 'succeeded'")
    assert ui.page.locator("[data-testid=app-output-answer]").inner_text().strip()
    assert ui.page.locator("[data-testid=app-outputs] details[data-port=votes]").count() == 1  # JSON folded
