"""On a narrow host the inspector floats over the canvas: Fit shows every node beside it, none under it (issue 43
§2.8)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_editor_component import EditorPage

pytestmark = pytest.mark.e2e


def test_fit_keeps_the_nodes_clear_of_the_floating_inspector(chromium_browser: Any, static_url: str) -> None:
    context = chromium_browser.new_context(viewport={"width": 1000, "height": 760})
    try:
        editor = EditorPage(context.new_page(), "fit-inspector").open(static_url)
        page = editor.page
        page.locator('[data-node-id="think"]').click()  # something selected: the inspector floats over the canvas
        page.wait_for_function("getComputedStyle(document.querySelector('.mge-inspector')).display !== 'none'")
        assert page.evaluate("document.querySelector('.mge').classList.contains('mge-narrow')")
        page.evaluate("window.ed.fitView()")
        page.wait_for_timeout(200)
        left = page.evaluate("document.querySelector('.mge-inspector').getBoundingClientRect().left")
        rights = page.eval_on_selector_all("[data-node-id]", "els => els.map(e => e.getBoundingClientRect().right)")
        assert rights and max(rights) <= left, (rights, left)
        assert editor.errors == []
    finally:
        context.close()
