"""The Traces tab follows the newest run unless another was picked, and a runs-table row opens its run (issue 43
§2.6)."""

from __future__ import annotations

import gradio as gr

from app.ui.traces_tab import followed_run, row_run


def test_the_newest_run_is_followed_until_another_is_picked() -> None:
    assert followed_run(None, ["b", "a"], None) == "b"  # first listing: the newest
    assert followed_run("b", ["c", "b", "a"], "b") == "c"  # was showing the newest: follows the new one
    assert followed_run("a", ["c", "b", "a"], "b") == "a"  # picked an older one (or a ?run= link): it stays
    assert followed_run("a", ["c", "b", "a"], None) == "a"  # a link's run on the tab's first listing
    assert followed_run("gone", ["c"], "b") == "c"  # a run no longer listed (deleted, filtered out)
    assert followed_run("x", [], "x") is None


def test_a_click_on_a_row_opens_its_run() -> None:
    clicked = gr.SelectData(None, {"index": [2, 3], "value": "succeeded", "row_value": ["abc123", "cot", "x"]})
    assert row_run(clicked)["value"] == "abc123"
    assert "value" not in row_run(gr.SelectData(None, {"index": [0, 0], "value": None, "row_value": []}))
