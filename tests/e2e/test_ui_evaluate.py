"""The Evaluate tab in a browser (`metagen ui --dry-run`): the editor's workflow preselected, an example picked,
a JSONL dataset uploaded and previewed, a sweep, the estimate, a live evaluation to the end, its plots and items
table, and an item's link opening that run in the Traces tab."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]

ROWS = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"},
        {"question": "What is 3 + 3?", "answer": "6"}]


def pick_option(page: Any, box: str, text: str) -> None:
    """Choose `text` in the Gradio dropdown `box` (typing filters the list)."""
    field = page.locator(f"{box} input")
    field.click()
    field.fill(text)
    page.get_by_role("option", name=text, exact=True).click()
    page.keyboard.press("Escape")


def test_evaluate_a_sweep_on_an_uploaded_dataset(ui: Any, shot: Any, tmp_path: Path) -> None:
    page = ui.page
    dataset = tmp_path / "tiny.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")

    ui.open_example("self_consistency")  # the editor's workflow is offered first, preselected
    ui.tab("Evaluate")
    workflows = page.locator("#mg-eval-workflows")
    workflows.get_by_text("(current editor workflow: self-consistency)").wait_for()
    pick_option(page, "#mg-eval-workflows", "self_consistency")  # and the saved example beside it
    sweeps = page.locator("#mg-eval-sweeps textarea")
    page.wait_for_function("document.querySelector('#mg-eval-sweeps textarea').value === 'think.n=1,2,4,8'")

    page.locator("#mg-eval-upload input[type=file]").set_input_files(str(dataset))
    page.locator("#mg-eval-message").get_by_text("Uploaded tiny.jsonl (3 rows)").wait_for()
    page.locator("#mg-eval-check").get_by_text("All 3 rows fill the inputs of 2 workflows").wait_for()
    preview = page.locator("#mg-eval-preview")
    assert "What is 2 + 2?" in preview.inner_text()
    assert "3 rows" in page.locator("#mg-eval-dataset-info").inner_text()
    assert page.locator("#mg-eval-map-0 input").input_value() == "question"
    assert page.locator("#mg-eval-reference input").input_value() == "answer"

    pick_option(page, "#mg-eval-metric", "number (numeric equality)")
    sweeps.fill("think.n=1,2")
    page.locator("#mg-eval-estimate").click()
    estimate = page.locator("#mg-eval-estimate-view")
    estimate.get_by_text("completion tokens").wait_for()
    assert "12 (3 items" in estimate.inner_text()  # 2 workflows x 2 sweep points x 3 rows
    shot(page, "estimate")

    page.locator("#mg-eval-start").click()
    page.locator("#mg-eval-progress [data-state=done]").wait_for(timeout=120_000)
    progress = page.locator("#mg-eval-progress").inner_text()
    assert "Done (succeeded)" in progress and "12 of 12 runs" in progress
    page.locator("#mg-eval-plot-curve .js-plotly-plot").wait_for()
    page.locator("#mg-eval-plot-tokens .js-plotly-plot").wait_for()
    items = page.locator("#mg-eval-items-view table.mg-eval-items")
    items.wait_for()
    assert items.locator("tbody tr").count() == 3
    assert "mg-eval-points" in page.locator("#mg-eval-summary-view").inner_html()
    assert "succeeded" in page.locator("#mg-eval-past input").input_value()
    shot(page, "results")

    link = items.locator("a[href^='?run=']").first
    run_id = (link.get_attribute("href") or "").removeprefix("?run=")
    link.click()  # the item's run opens in the Traces tab
    page.wait_for_url(f"**?run={run_id}")
    page.locator("#mg-traces-run input").wait_for()
    page.wait_for_function("(id) => document.querySelector('#mg-traces-run input').value.startsWith(id)",
                           arg=run_id, timeout=30_000)
    page.locator("#mg-trace-summary").get_by_text("succeeded").first.wait_for()
