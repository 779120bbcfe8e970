"""The evaluation's figures say what they measure: a point's wall time (never more than the evaluation's own) apart
from its items' run seconds summed over concurrent items, in the summary, the CLI table, the JSON and the HTML;
the comparisons' sentence column has a header."""

from __future__ import annotations

from typing import Any

import pytest

from app.cli.eval import format_comparisons, format_table
from app.eval.results import json_points, summarize, wall_seconds
from app.viz.comparisons import comparisons_body
from app.viz.evaluation import BUSY_HEADER, evaluation_report_html, evaluation_summary_html

T0 = 1_700_000_000.0


def _item(w: int, item: int, end: float, wall: float, correct: bool) -> dict[str, Any]:
    return {"workflow_idx": w, "point_idx": 0, "item_idx": item, "status": "succeeded", "correct": correct,
            "score": 1.0 if correct else 0.0, "output": "4", "detail": "", "run_id": f"r{w}{item}", "samples": [],
            "prompt_tokens": 10, "prompt_tokens_evaluated": 10, "prompt_tokens_cached": 0, "completion_tokens": 5,
            "completion_tokens_reused": 0, "lm_calls": 1, "wall_s": wall, "finished_at": T0 + end}


@pytest.fixture
def record() -> dict[str, Any]:
    """Two workflows of four items each, the eight items run eight at a time: each item 10 s, all between
    T0 and T0 + 10.5 (the evaluation's own 12 s)."""
    items = [_item(w, i, 10.0 + 0.1 * i, 10.0, correct=(w == 0 or i < 2)) for w in (0, 1) for i in range(4)]
    config = {"dataset": {"name": "tiny.jsonl", "rows": 4}, "metric": "number", "items": [0, 1, 2, 3],
              "workflows": [{"name": "greedy", "points": [{}]}, {"name": "vote", "points": [{}]}],
              "total_tasks": 8, "seed": 0}
    evaluation = {"id": "ev1", "name": "", "status": "succeeded", "error": None, "config": config,
                  "estimate": {"expected_s": 5.0, "max_s": 9.0}, "created_at": T0 - 1.5, "ended_at": T0 + 10.5}
    return {"evaluation": evaluation, "items": items}


def test_wall_seconds_is_the_union_of_the_items_run_intervals() -> None:
    rows = [{"finished_at": 10.0, "wall_s": 10.0}, {"finished_at": 12.0, "wall_s": 4.0},  # [0, 10] and [8, 12]
            {"finished_at": 30.0, "wall_s": 5.0}]  # [25, 30]: a pause (cancel, then resume) between is not counted
    assert wall_seconds(rows) == pytest.approx(12.0 + 5.0)
    assert wall_seconds([{"finished_at": None, "wall_s": 3.0}]) is None  # recorded before items had a time


def test_a_points_wall_time_is_never_more_than_the_evaluations(record: dict[str, Any]) -> None:
    summary = summarize(record)
    assert summary["elapsed_s"] == pytest.approx(12.0)
    for point in summary["points"]:
        assert point["busy_s"] == pytest.approx(40.0)  # four items of 10 s, summed
        assert point["wall_s"] == pytest.approx(10.3)  # from the first item's start to the last one's end
        assert point["wall_s"] <= summary["elapsed_s"]
    assert [set(p) >= {"wall_s", "busy_s"} for p in json_points(summary)] == [True, True]
    assert json_points(summary)[0]["busy_s"] == pytest.approx(40.0)


def test_the_cli_table_names_wall_and_busy_seconds(record: dict[str, Any]) -> None:
    text = format_table(summarize(record))
    header = text.splitlines()[0]
    assert "WALL S" in header and "BUSY S" in header and "SECONDS" not in header
    first = text.splitlines()[1].split()
    assert "10.3" in first and "40.0" in first
    assert "summed over concurrent items" in text
    comparisons = format_comparisons(summarize(record))
    assert comparisons[2].split()[-1] == "P<0.05"  # every column has a header


def test_the_html_names_busy_seconds_and_every_comparison_column(record: dict[str, Any]) -> None:
    summary = summarize(record)
    html = evaluation_summary_html(summary)
    assert "busy s (summed over concurrent items)" == BUSY_HEADER and BUSY_HEADER in html
    assert ">wall s</th>" in html and ">seconds</th>" not in html
    assert "seconds (wall)" in html  # the estimate against the evaluation's own time
    body = comparisons_body(summary)
    assert summary["comparisons"] and "<th></th>" not in body and "<th>in words</th>" in body
    assert BUSY_HEADER in evaluation_report_html(summary)
