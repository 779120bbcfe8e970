"""The Evaluate tab in share mode (`metagen ui --dry-run --share-mode`), two browser contexts as two visitors:
the second sees neither the first one's uploaded dataset nor its evaluation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run", "--share-mode"]

ROWS = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"}]


def test_a_visitor_does_not_see_another_visitors_dataset_or_evaluation(ui: Any, studio: Any, browser: Any,
                                                                       shot: Any, tmp_path: Path) -> None:
    page = ui.page
    dataset = tmp_path / "alice_private.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    ui.open_example("self_consistency")
    ui.tab("Evaluate")
    page.locator("#mg-eval-workflows").get_by_text("(current editor workflow: self-consistency)").wait_for()
    page.locator("#mg-eval-upload input[type=file]").set_input_files(str(dataset))
    page.locator("#mg-eval-message").get_by_text("Uploaded alice_private.jsonl (2 rows)").wait_for()
    page.locator("#mg-eval-sweeps textarea").fill("")  # no sweep: two runs
    page.locator("#mg-eval-start").click()
    page.locator("#mg-eval-progress [data-state=done]").wait_for(timeout=120_000)
    eval_id = page.locator("#mg-eval-progress .mg-eval-progress").get_attribute("data-eval")
    assert eval_id and eval_id in page.locator("#mg-eval-past input").input_value()
    shot(page, "first-visitor")

    other = browser.new_context(viewport={"width": 1800, "height": 1150})
    try:
        visitor = other.new_page()
        visitor.goto(studio.url)
        visitor.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
        visitor.get_by_role("tab", name="Evaluate").click()
        visitor.locator("#mg-eval-dataset input").click()
        # the built-in datasets are everyone's; once they are listed, the tab's lists are all in
        visitor.get_by_role("option").filter(has_text="arithmetic.jsonl").first.wait_for()
        datasets = visitor.get_by_role("option").all_inner_texts()
        visitor.keyboard.press("Escape")
        assert not any("alice_private" in d for d in datasets), datasets
        visitor.locator("#mg-eval-past input").click()
        visitor.wait_for_timeout(500)
        assert not any(eval_id in p for p in visitor.get_by_role("option").all_inner_texts())
        visitor.keyboard.press("Escape")
        visitor.get_by_text("Past evaluations").click()  # the accordion of the past-evaluations table
        table = visitor.locator("#mg-eval-past-table")
        table.wait_for()
        assert eval_id not in table.inner_text()
        shot(visitor, "second-visitor")
    finally:
        other.close()
