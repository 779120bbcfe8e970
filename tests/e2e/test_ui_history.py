"""The editor's History panel in Chromium (`metagen ui --dry-run`): save twice with a change, preview the first
version read-only, draw the diff of the two on the canvas, restore the first, and open a version by deep link."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]


def test_history_preview_diff_restore_and_deep_link(ui: Any, shot: Any, studio: Any) -> None:
    page = ui.page
    ui.open()
    ui.open_example("self_consistency")
    ui.save_as("hist_sc")
    path = studio.home / "workflows" / "hist_sc.yaml"
    first_text = path.read_text(encoding="utf-8")
    assert "n: 8" in first_text

    ui.select("think")
    ui.set_param("n", "4")
    ui.wait_yaml(lambda t: "n: 4" in t)
    page.locator("[data-testid=save-btn]").click()
    page.wait_for_function("document.querySelector('[data-testid=dirty-flag]').hidden")
    assert "n: 4" in path.read_text(encoding="utf-8")

    page.locator("[data-testid=history-btn]").click()
    items = page.locator("[data-testid=history-item]")
    items.nth(1).wait_for()
    assert items.count() == 2
    assert "current" in items.nth(0).inner_text()
    first = items.nth(1).get_attribute("data-version")

    items.nth(1).locator("[data-testid=version-view]").click()
    banner = page.locator("[data-testid=version-banner]")
    banner.wait_for(state="visible")
    assert f"Viewing version {first[:8]}" in banner.inner_text() and "(read-only)" in banner.inner_text()
    assert "n: 8" in ui.yaml()
    assert page.locator("[data-testid=yaml-editor]").evaluate("el => el.readOnly")
    page.locator("[data-testid=save-btn]").click()  # refused: a past version is never saved as the file
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('read-only')")
    assert "n: 4" in path.read_text(encoding="utf-8")
    node = page.locator("[data-node-id=think]")
    before = node.bounding_box()
    assert before is not None
    page.mouse.move(before["x"] + 30, before["y"] + 12)  # drag the node by its header: a past version never moves
    page.mouse.down()
    page.mouse.move(before["x"] + 150, before["y"] + 90, steps=6)
    page.mouse.up()
    after = node.bounding_box()
    assert after is not None and (after["x"], after["y"]) == (before["x"], before["y"])
    shot(page, "preview")
    page.locator("[data-testid=version-back]").click()
    banner.wait_for(state="hidden")
    assert "n: 4" in ui.yaml() and not page.locator("[data-testid=yaml-editor]").evaluate("el => el.readOnly")

    for i in (0, 1):
        items.nth(i).locator("[data-testid=history-pick]").check()
    page.locator("[data-testid=history-diff]").click()
    page.locator("[data-node-id=think][data-diff=changed]").wait_for()
    assert "think.n: 8 → 4" in page.locator("[data-testid=diff-lines]").inner_text()
    assert page.locator("[data-diff]").count() == 1  # only the changed node is marked
    ui.select("think")
    assert "n: 8 → 4" in page.locator("[data-testid=inspector-diff]").inner_text()
    shot(page, "diff")

    page.locator("[data-testid=version-restore]").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.startsWith('Restored')")
    assert path.read_text(encoding="utf-8") == first_text
    assert banner.is_hidden() and ui.yaml() == first_text
    assert not page.locator("[data-testid=yaml-editor]").evaluate("el => el.readOnly")

    page.goto(f"{ui.server.url}?workflow=hist_sc@{first[:8]}")
    page.wait_for_selector(".mg-page[data-ready='1']", timeout=60_000)
    banner.wait_for(state="visible")
    assert f"Viewing version {first[:8]}" in banner.inner_text()
