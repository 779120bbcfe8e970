"""The samples figure's table is tall enough for every candidate of a page: with the bundled model's long texts
the rows wrapped, and the table showed 5 of self_certainty_bon's 6 samples (issue 43 §2.5)."""

from __future__ import annotations

from typing import Any

from app.viz.samples import sample_view

TEXT = ("Let me think step by step. First we add twelve and seven, which gives nineteen. Then we check the sum "
        "again by counting up from twelve: thirteen, fourteen, fifteen, sixteen, seventeen, eighteen, nineteen. "
        "Answer: 19")


def _record(texts: list[str]) -> dict[str, Any]:
    cands = [{"text": t, "answer": "19", "score": 0.5, "completion_tokens": 64} for t in texts]
    return {"nodes": [{"node_id": "sample", "outputs": {"candidates": {
        "__type__": "candidates", "candidates": cands, "winner": 0}}}], "events": []}


def _table_px(fig: Any) -> float:
    table = next(t for t in fig.data if t.type == "table")
    low, high = table.domain.y
    return (high - low) * fig.layout.height


def test_six_long_candidates_fit_in_the_table() -> None:
    """Measured in Chromium: a ~250-character text takes a 61 px row in a 900 px wide figure (46 px at 1800 px)
    under a 28 px header; the table had 220 px whatever the texts, so the last rows were out of sight."""
    fig = sample_view(_record([f"{TEXT} ({i})" for i in range(6)]), "sample")
    assert _table_px(fig) >= 28 + 6 * 61
    short = sample_view(_record(["Answer: 19"] * 6), "sample")
    assert _table_px(short) < _table_px(fig)  # short answers keep a short table
