"""The Tune tab in Chromium (issue 41, item 3): a tune started from the form shows its race live (one row per
candidate), then the held-out table and Pareto plot; the recommended workflow opens in the editor and the report
downloads as offline HTML. The server is `metagen ui --dry-run`: the real tuner, with the scripted fake model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]


def _pick(page: Any, elem_id: str, values: list[str]) -> None:
    """Choose `values` in a Gradio dropdown (typed, then Enter)."""
    box = page.locator(f"#{elem_id} input")
    for value in values:
        box.click()
        box.fill(value)
        page.locator("ul[role=listbox] li", has_text=value).first.click()


def test_the_tune_tab_shows_the_race_and_opens_the_recommendation(ui: Any, shot: Any, tmp_path: Path) -> None:
    page = ui.page
    ui.tab("Tune")
    page.locator("#mg-tune-start").wait_for(state="visible")
    page.wait_for_function("document.querySelector('#mg-tune-dataset input').value.startsWith('arithmetic')")
    _pick(page, "mg-tune-candidates", ["chain_of_thought", "self_consistency"])
    page.locator("#mg-tune-limit input").fill("8")
    page.locator("#mg-tune-budget input").fill("5000")
    page.locator("#mg-tune-start").click()
    rows = page.locator("[data-testid=tune-row]")
    rows.first.wait_for(timeout=60_000)  # the race, live
    assert rows.count() >= 2
    shot(page, "race")
    page.locator("[data-testid=tune-result]").wait_for(timeout=240_000)
    labels = rows.evaluate_all("els => els.map(e => e.dataset.label)")
    assert any(label.startswith("self_consistency") for label in labels) and "chain_of_thought" in labels
    assert all(s in ("finalist", "dropped", "skipped") for s in rows.evaluate_all(
        "els => els.map(e => e.dataset.status)"))
    for dropped in page.locator("[data-testid=tune-row][data-status=dropped]").all():
        assert dropped.locator(".mg-tune-reason").inner_text().strip()  # greyed with the reason
    assert page.locator("[data-testid=tune-held-out-row]").count() >= 1
    assert "recommended" in page.locator("[data-testid=tune-result]").inner_text()
    page.locator("#mg-tune-pareto .js-plotly-plot").wait_for(timeout=30_000)
    shot(page, "result")

    with page.expect_download() as download:
        page.locator("#mg-tune-export").click()
    report = tmp_path / "report.html"
    download.value.save_as(str(report))
    text = report.read_text(encoding="utf-8")
    assert "<html" in text.lower() and "held-out" in text.lower()
    assert not re.search(r"<(script|link)[^>]+(src|href)=[\"']?(https?:)?//", text)  # offline: nothing fetched

    page.locator("#mg-tune-open").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('Opened')")
    assert "provenance:" in ui.yaml() and "metagen tune" in ui.yaml()
    assert page.locator("[data-testid=dirty-flag]").is_hidden()
    shot(page, "opened-in-editor")


def test_the_adaptive_policy_shows_in_the_tab_and_opens_in_the_editor(ui: Any, shot: Any, tmp_path: Path) -> None:
    page = ui.page
    ui.tab("Tune")
    page.locator("#mg-tune-start").wait_for(state="visible")
    page.wait_for_function("document.querySelector('#mg-tune-dataset input').value.startsWith('arithmetic')")
    _pick(page, "mg-tune-candidates", ["chain_of_thought", "self_consistency"])
    page.locator("#mg-tune-limit input").fill("8")
    page.locator("#mg-tune-budget input").fill("2000")
    page.locator("#mg-tune-axes textarea").fill("think.n=2")
    page.locator("#mg-tune-adaptive input[type=checkbox]").check()
    page.locator("#mg-tune-start").click()
    section = page.locator("#mg-tune-adaptive-result [data-testid=tune-adaptive]")
    section.wait_for(timeout=240_000)
    text = section.inner_text()
    assert "Adaptive policy (difficulty-routed)" in text and "tokens per item" in text  # the probe and its cost
    assert section.locator("[data-testid=tune-adaptive-bin]").count() >= 1
    policy = section.locator("[data-testid=tune-adaptive-test]").inner_text()
    assert re.search(r"\d+% \(\d+%–\d+%\)", policy)  # test accuracy with its 95 % CI
    assert section.locator("[data-testid=tune-adaptive-single]").count() == 1
    assert section.locator("[data-testid=tune-adaptive-verdict]").inner_text().strip()
    assert "-adaptive.yaml" in section.locator("[data-testid=tune-adaptive-files]").inner_text()
    page.locator("#mg-tune-pareto .js-plotly-plot").wait_for(timeout=30_000)
    assert "adaptive policy" in page.locator("#mg-tune-pareto").inner_text()  # its own point in the legend
    shot(page, "adaptive-result")

    with page.expect_download() as download:
        page.locator("#mg-tune-export").click()
    report = tmp_path / "report.html"
    download.value.save_as(str(report))
    assert "Adaptive policy (difficulty-routed)" in report.read_text(encoding="utf-8")

    page.locator("#mg-tune-open-adaptive").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('Opened')")
    assert "kind: route" in ui.yaml() and "metagen tune --adaptive" in ui.yaml()
    # its branch workflows (beside it in tuned/) came along: the route finds them, nothing to fix
    page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '0'")
    assert page.locator("[data-testid=dirty-flag]").is_hidden()
    shot(page, "adaptive-policy-in-editor")
