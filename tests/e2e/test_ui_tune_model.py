"""The Tune tab on the real bundled model (SmolLM2 via llama.cpp, `metagen ui` without --dry-run): a tiny tune of
greedy chain-of-thought against self-consistency (n = 2) on 4 arithmetic items shows its race live, finishes with the
held-out table, and the recommended workflow it wrote opens in the editor without a problem."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_ui_tune import _pick

pytestmark = [pytest.mark.e2e, pytest.mark.model]

SERVER_ARGS: list[str] = []


def test_a_tiny_tune_on_the_bundled_model_races_and_recommends(ui: Any, shot: Any) -> None:
    page = ui.page
    ui.tab("Tune")
    page.locator("#mg-tune-start").wait_for(state="visible")
    page.wait_for_function("document.querySelector('#mg-tune-dataset input').value.startsWith('arithmetic')")
    _pick(page, "mg-tune-candidates", ["chain_of_thought", "self_consistency"])
    page.locator("#mg-tune-limit input").fill("4")
    page.locator("#mg-tune-budget input").fill("2000")
    page.locator("#mg-tune-axes textarea, #mg-tune-axes input").first.fill("think.n=2")  # a tiny race
    page.locator("#mg-tune-start").click(timeout=60_000)  # under a loaded suite the page may be busy re-rendering
    rows = page.locator("[data-testid=tune-row]")
    rows.first.wait_for(timeout=120_000)
    assert rows.count() >= 2
    page.wait_for_function("[...document.querySelectorAll('[data-testid=tune-row]')].some(r => "
                           "r.querySelector('.mg-num') && r.querySelector('.mg-num').textContent.trim() !== '0')",
                           timeout=600_000)  # items come in while it runs
    shot(page, "race-live")
    page.locator("[data-testid=tune-result]").wait_for(timeout=900_000)
    shot(page, "result")
    statuses = rows.evaluate_all("els => els.map(e => e.dataset.status)")
    assert "finalist" in statuses and set(statuses) <= {"finalist", "dropped", "skipped"}
    for dropped in page.locator("[data-testid=tune-row][data-status=dropped]").all():
        assert dropped.locator(".mg-tune-reason").inner_text().strip()
    assert page.locator("[data-testid=tune-held-out-row]").count() >= 1
    page.locator("#mg-tune-open").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('Opened')")
    page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '0'")
    assert "provenance:" in ui.yaml()
    shot(page, "recommended-in-editor")
