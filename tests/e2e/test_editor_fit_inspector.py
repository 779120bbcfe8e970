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


def test_a_node_dropped_over_the_inspector_lands_beside_it(chromium_browser: Any, static_url: str) -> None:
    """A palette drag released over the floating inspector (or where it shows once the new node is selected) puts
    the node on the visible canvas, left of the inspector, where the user can see and wire it, without panning
    the canvas away from what the user was looking at."""
    context = chromium_browser.new_context(viewport={"width": 1000, "height": 760})
    try:
        editor = EditorPage(context.new_page(), "drop-inspector").open(static_url)
        page = editor.page
        for select_first in (True, False):  # the inspector already shown, and shown only once the node is added
            if select_first:
                page.locator('[data-node-id="think"]').click()
            else:
                page.evaluate("window.ed.select(null)")
                page.wait_for_function("getComputedStyle(document.querySelector('.mge-inspector')).display === 'none'")
            before = set(editor.node_ids())
            think = page.locator('[data-node-id="think"]').bounding_box()
            viewport = page.locator(".mge-viewport").bounding_box()
            editor.drag(editor.center('.mge-palette [data-kind="generator"]'),
                        (viewport["x"] + viewport["width"] - 40, viewport["y"] + viewport["height"] / 2))
            added = sorted(set(editor.node_ids()) - before)
            assert len(added) == 1, added
            page.wait_for_function("getComputedStyle(document.querySelector('.mge-inspector')).display !== 'none'")
            left = page.evaluate("document.querySelector('.mge-inspector').getBoundingClientRect().left")
            box = page.locator(f'[data-node-id="{added[0]}"]').bounding_box()
            assert box["x"] + box["width"] <= left, (box, left, select_first)
            assert page.locator('[data-node-id="think"]').bounding_box() == think, select_first  # nothing panned
        assert editor.errors == []
    finally:
        context.close()
