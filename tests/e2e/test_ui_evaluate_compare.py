"""The Evaluate tab's paired comparisons in a browser (`metagen ui --dry-run`): repeats and a baseline set in the
form, and the comparison table (sorted by difference, significant ones marked) under the results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_ui_evaluate import ROWS, pick_option

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]


def test_repeats_and_a_baseline_show_the_paired_comparisons(ui: Any, shot: Any, tmp_path: Path) -> None:
    page = ui.page
    dataset = tmp_path / "tiny.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    ui.open_example("self_consistency")
    ui.tab("Evaluate")
    page.locator("#mg-eval-workflows").get_by_text("(current editor workflow: self-consistency)").wait_for()
    pick_option(page, "#mg-eval-workflows", "chain_of_thought")
    page.locator("#mg-eval-upload input[type=file]").set_input_files(str(dataset))
    page.locator("#mg-eval-check").get_by_text("All 3 rows fill the inputs of 2 workflows").wait_for()
    pick_option(page, "#mg-eval-metric", "number (numeric equality)")
    page.locator("#mg-eval-sweeps textarea").fill("")
    page.locator("#mg-eval-repeats input").fill("2")
    page.locator("#mg-eval-share-samples input").check()
    page.locator("#mg-eval-baseline textarea, #mg-eval-baseline input").first.fill("chain_of_thought")
    page.locator("#mg-eval-start").click()
    page.locator("#mg-eval-progress [data-state=done]").wait_for(timeout=120_000)
    assert "12 of 12 runs" in page.locator("#mg-eval-progress").inner_text()  # 3 rows × 2 workflows × 2 repeats
    table = page.locator("#mg-eval-summary-view table#mg-eval-comparisons")
    table.wait_for()
    rows = table.locator("tbody tr")
    assert rows.count() == 1
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[1] == "chain_of_thought" and cells[2] == "3" and cells[6] == "sign-flip"
    assert "against the baseline chain_of_thought" in page.locator("#mg-eval-summary-view").inner_text()
    shot(page, "comparisons")
