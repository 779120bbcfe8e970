"""The tune's offline HTML report: its held-out table marks a finalist whose samples came from the shared pool with
`*` and explains it under the table, as the text report does."""

from __future__ import annotations

import re
from typing import Any

from app.viz.common import REUSED, REUSED_FOOTNOTE
from app.viz.tune import tune_html


def _result(note: str) -> dict[str, Any]:
    return {"dataset": "arithmetic", "model": "bundled", "verdict": "v", "tune_tokens": 10, "race": [],
            "comparisons": [], "front": [], "recommended": {"label": "sc · think.n=16", "path": "p.yaml"},
            "baseline": {"label": "chain_of_thought"},
            "held_out": [{"label": "sc · think.n=16", "accuracy": 0.5, "ci": [0.2, 0.8], "tokens_per_item": 400.0,
                          "seconds_per_item": 1.5, "n": 4, "note": ""},
                         {"label": "sc · think.n=2", "accuracy": 0.25, "ci": [0.05, 0.7], "tokens_per_item": 60.0,
                          "seconds_per_item": 0.1, "n": 4, "note": note},
                         {"label": "chain_of_thought", "accuracy": 0.25, "ci": [0.05, 0.7], "tokens_per_item": 30.0,
                          "seconds_per_item": 0.4, "n": 4, "note": ""}]}


def _rows(page: str) -> dict[str, str]:
    table = page[page.index("<h2>Held-out test</h2>"):page.index("<h2>Paired comparisons")]
    return {re.search(r"<td>([^<]+)</td>", row).group(1): row for row in re.findall(r"<tr><td>.*?</tr>", table)}


def test_a_pooled_finalist_is_marked_and_the_footnote_says_why() -> None:
    page = tune_html(_result(REUSED))
    rows = _rows(page)
    assert f"* {REUSED}" in rows["sc · think.n=2"]
    assert "*" not in rows["sc · think.n=16"] and "*" not in rows["chain_of_thought"]
    footnote = REUSED_FOOTNOTE.replace("'", "&#x27;")
    assert page.count(f"* {footnote}") == 1


def test_no_pooled_finalist_no_footnote() -> None:
    page = tune_html(_result(""))
    assert "*" not in "".join(_rows(page).values())
    assert "as if it ran alone" not in page
