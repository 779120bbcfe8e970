"""The strategy gallery (issue 41, item 4) in Chromium: the first screen shows the examples as cards (gist, tags,
cost, graph, and the measured figure only where the benchmarks wrote one), opening one is no unsaved change, and
"Which one should I use?" opens the Tune tab."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Studio

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]
WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


@pytest.fixture
def first_screen(page: Any, studio: Any) -> Studio:
    ui = Studio(page, studio).open(keep_gallery=True)
    ui.page.locator("[data-testid=gallery-card]").first.wait_for()
    return ui


def _measured() -> dict[str, Any]:
    path = WORKFLOWS / "measured.json"
    return json.loads(path.read_text())["examples"] if path.exists() else {}


def test_the_first_screen_shows_the_examples_as_cards(first_screen: Studio, shot: Any) -> None:
    page = first_screen.page
    gallery = page.locator("[data-testid=gallery]")
    assert gallery.is_visible() and page.evaluate("window.MetagenUI.state().gallery")
    names = sorted(p.stem for p in WORKFLOWS.glob("*.yaml"))
    cards = gallery.locator("[data-testid=gallery-card]")
    assert sorted(cards.evaluate_all("els => els.map(e => e.dataset.example)")) == names
    sc = gallery.locator("[data-example=self_consistency]")
    text = sc.inner_text()
    assert "self-consistency" in text and "Self-consistency (Wang et al. 2023)" in text
    assert "needs: none" in text and "task: math" in text
    assert "8 model calls" in sc.locator("[data-testid=card-cost]").inner_text()
    assert sc.locator("svg.mg-workflow-graph").count() == 1
    assert "needs: tests" in gallery.locator("[data-example=code_best_of_n]").inner_text()
    measured = _measured()
    shown = gallery.locator("[data-testid=card-measured]")
    assert shown.count() == len(measured)  # a figure only where the benchmarks measured one, never typed
    for name, figure in measured.items():
        line = gallery.locator(f"[data-example={name}] [data-testid=card-measured]").inner_text()
        assert f"{round(figure['accuracy'] * 100)}%" in line and figure["model"] in line
    assert gallery.locator("[data-testid=gallery-which]").is_visible()
    shot(page, "gallery")


def test_opening_an_example_is_not_an_unsaved_change(first_screen: Studio, shot: Any) -> None:
    ui, page = first_screen, first_screen.page
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.locator("[data-testid=gallery] [data-example=mbr]").click()
    page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'minimum-bayes-risk'")
    assert page.locator("[data-testid=gallery]").is_hidden()
    assert page.locator("[data-testid=dirty-flag]").is_hidden()
    assert page.evaluate("window.MetagenUI.state().dirty") is False
    assert "kind: voter" in ui.yaml() and len(ui.node_ids()) >= 3
    shot(page, "opened")
    ui.pick_example("self_consistency")  # New from example…, another card: nothing to discard
    page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'self-consistency'")
    assert asked == []
    assert page.evaluate("localStorage.getItem('metagen.draft.v1')") is None  # no draft to restore
    ui.page.reload()
    page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
    assert page.locator("[data-testid=draft-banner]").is_hidden()
    assert page.locator("[data-testid=gallery]").is_visible()  # nothing unsaved: the first screen again


def test_the_which_one_card_opens_the_tune_tab(first_screen: Studio, shot: Any) -> None:
    page = first_screen.page
    page.locator("[data-testid=gallery-which]").click()
    page.locator("#mg-tune-start").wait_for(state="visible")
    assert page.get_by_role("tab", name="Tune").get_attribute("aria-selected") == "true"
    shot(page, "tune-tab")


def test_close_shows_the_empty_canvas_and_new_from_example_brings_the_gallery_back(first_screen: Studio) -> None:
    page = first_screen.page
    first_screen.close_gallery()
    assert page.locator("[data-testid=editor-canvas]").is_visible()
    page.locator("[data-testid=example-btn]").click()
    assert page.locator("[data-testid=gallery]").is_visible()
    assert page.locator("[data-testid=gallery-card]").count() > 30
