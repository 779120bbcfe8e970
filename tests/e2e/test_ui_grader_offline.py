"""Offline, a task preset reads its rows from an uploaded file (issue 43 §2.2): HumanEval rows uploaded, the
humaneval preset picked in the Task preset list, Check the grader grades every gold answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_ui_evaluate import pick_option
from tests.eval.humaneval_data import problems

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]


def test_check_the_grader_on_an_uploaded_copy_of_humaneval(ui: Any, shot: Any, tmp_path: Path) -> None:
    page = ui.page
    dataset = tmp_path / "humaneval_copy.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in problems()[:4]), encoding="utf-8")
    ui.tab("Evaluate")
    page.locator("#mg-eval-upload input[type=file]").set_input_files(str(dataset))
    page.locator("#mg-eval-message").get_by_text("Uploaded humaneval_copy.jsonl (4 rows)").wait_for()
    pick_option(page, "#mg-eval-task", "HumanEval (tests)")
    page.wait_for_function("document.querySelector('#mg-eval-metric input').value.startsWith('tests')")
    page.locator("#mg-eval-check-grader").click()
    verdict = page.locator("#mg-eval-gold-check[data-ok=true]")
    verdict.wait_for(timeout=60_000)
    assert verdict.get_attribute("data-correct") == "4" and verdict.get_attribute("data-total") == "4"
    assert "4/4 gold answers graded correct" in verdict.inner_text()
    shot(page, "grader-checked")
