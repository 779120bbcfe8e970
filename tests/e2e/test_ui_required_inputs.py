"""A required input left empty is refused in the run panel, the field highlighted, nothing run (issue 43 §2.9);
the run then made links to its trace, and the Traces tab shows it (§2.6)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]

ASK = """version: 1
name: ask
inputs:
  question: {type: text}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{question}', max_tokens: 8}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""


def test_an_empty_required_input_is_highlighted_and_not_run(ui: Any, shot: Any) -> None:
    page = ui.page
    page.locator("[data-testid=yaml-editor]").fill(ASK)
    field = page.locator("[data-testid=input-question]")
    field.wait_for()
    assert "required" in page.locator("[data-testid=run-inputs]").inner_text()
    page.locator("[data-testid=run-btn]").click()
    status = page.locator("[data-testid=run-status]")
    page.wait_for_function("document.querySelector('[data-testid=run-status]').textContent.includes('required')")
    assert "Input 'question' is required" in status.inner_text()
    assert field.get_attribute("aria-invalid") == "true"
    assert page.evaluate("window.MetagenUI.state().runs.length") == 0  # nothing was started
    shot(page, "required-empty")
    field.fill("What is 2 + 2?")
    assert field.get_attribute("aria-invalid") is None
    run_id = ui.click_run()
    page.wait_for_function("document.querySelector('[data-testid=run-status]').dataset.status === 'succeeded'",
                           timeout=60_000)
    link = page.locator("[data-testid=run-trace-link]")  # the run panel links to the run's trace (§2.6)
    assert link.is_visible() and link.get_attribute("href") == f"?run={run_id}"
    ui.tab("Traces")  # which follows the newest run
    page.wait_for_function("(id) => document.querySelector('#mg-traces-run input').value.startsWith(id)",
                           arg=run_id, timeout=30_000)
