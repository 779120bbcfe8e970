"""Evaluation views from a hand-built summary: accuracy curve, accuracy against tokens, pass@k, items, report."""

from __future__ import annotations

import copy
import re
from typing import Any

import plotly.graph_objects as go
import pytest

import app.viz as viz
from app.viz.evaluation import NO_POINTS

HOSTILE = "<script>alert(1)</script>"


def _point(workflow: str, w_idx: int, p_idx: int, params: dict[str, Any], correct: int, tokens: int,
           pareto: bool = False) -> dict[str, Any]:
    label = workflow if not params else f"{workflow} · " + ", ".join(f"{k}={v}" for k, v in params.items())
    acc = correct / 10
    point = {"workflow": workflow, "workflow_idx": w_idx, "point_idx": p_idx, "params": params, "label": label,
             "accuracy": acc, "correct": correct, "total": 10, "planned": 10,
             "ci": [max(acc - 0.2, 0.0), min(acc + 0.15, 1.0)], "mean_score": acc, "prompt_tokens": 500,
             "prompt_tokens_evaluated": 300, "prompt_tokens_cached": 200, "completion_tokens": tokens,
             "lm_calls": 10, "wall_s": 2.5, "failed": 0}
    if pareto:
        point["pareto"] = True
    return point


def _grade(correct: bool, run_id: str, output: str = "42") -> dict[str, Any]:
    return {"correct": correct, "score": 1.0 if correct else 0.0, "run_id": run_id, "output": output}


@pytest.fixture
def summary() -> dict[str, Any]:
    points = [
        _point("sc", 0, 0, {"think.n": 1}, 4, 1000, pareto=True),
        _point("sc", 0, 1, {"think.n": 2}, 5, 2000),
        _point("sc", 0, 2, {"think.n": 4}, 7, 4000, pareto=True),
        _point("sc", 0, 3, {"think.n": 8}, 8, 8000, pareto=True),
        _point("greedy", 1, 0, {}, 6, 1500),
    ]
    labels = [p["label"] for p in points]
    agree = {label: _grade(True, f"r{k}") for k, label in enumerate(labels)}
    split = {label: _grade(k % 2 == 0, f"s{k}", HOSTILE if k == 4 else "41") for k, label in enumerate(labels)}
    return {
        "eval_id": "ev1", "name": "gsm <b>mini</b>", "status": "succeeded", "error": None,
        "dataset": {"name": "gsm8k-mini", "path": "gsm.jsonl", "sha256": "ab" * 32, "rows": 10},
        "metric": "exact_number", "output": "answer",
        "sweep": [{"node": "think", "param": "n", "values": [1, 2, 4, 8]}],
        "done": 50, "total": 50,
        "estimate": {"expected_completion_tokens": 15000, "max_completion_tokens": 40000, "prompt_tokens": 2500,
                     "expected_s": 10.0, "max_s": 30.0, "assumptions": "completions use 40% of max_tokens"},
        "points": points,
        "pass_at_k": [{"workflow": "sc", "params": {"think.n": 8}, "label": "sc · think.n=8", "n": 8,
                       "k": [1, 2, 4, 8], "pass_at_k": [0.4, 0.55, 0.7, 0.8], "items": 10}],
        # already sorted by results.disagreements: the split item first
        "disagreements": [{"item": 7, "grades": split, "split": 2}, {"item": 0, "grades": agree, "split": 0}],
    }


@pytest.fixture
def empty(summary: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(summary)
    out.update(points=[], pass_at_k=[], disagreements=[], done=0, estimate={}, status="running")
    return out


def _trace(fig: go.Figure, name: str) -> Any:
    return next(t for t in fig.data if t.name == name)


def test_accuracy_curve(summary: dict[str, Any]) -> None:
    fig = viz.accuracy_curve_figure(summary)
    assert isinstance(fig, go.Figure)
    sc = _trace(fig, "sc")
    assert list(sc.x) == [1, 2, 4, 8]
    assert list(sc.y) == pytest.approx([40, 50, 70, 80])
    assert sc.y[list(sc.x).index(4)] == pytest.approx(summary["points"][2]["accuracy"] * 100)
    assert list(sc.error_y.array) == pytest.approx([15, 15, 15, 15])
    assert list(sc.error_y.arrayminus) == pytest.approx([20, 20, 20, 20])
    greedy = _trace(fig, "greedy")  # no sweep: one labelled marker at n=1
    assert list(greedy.x) == [1] and list(greedy.y) == pytest.approx([60]) and list(greedy.text) == ["greedy"]
    assert [s.y0 for s in fig.layout.shapes] == pytest.approx([60])  # its level drawn across the sweep
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [1, 2, 4, 8]
    assert tuple(fig.layout.yaxis.range) == (0, 100) and fig.layout.yaxis.ticksuffix == "%"


def test_accuracy_curve_linear_when_not_powers_of_two(summary: dict[str, Any]) -> None:
    for point, n in zip(summary["points"][:4], (1, 3, 5, 9), strict=True):
        point["params"] = {"think.n": n}
    fig = viz.accuracy_curve_figure(summary)
    assert fig is not None and fig.layout.xaxis.type != "log"
    assert list(_trace(fig, "sc").x) == [1, 3, 5, 9]


def test_accuracy_tokens_and_frontier(summary: dict[str, Any]) -> None:
    fig = viz.accuracy_tokens_figure(summary)
    assert isinstance(fig, go.Figure)
    sc, greedy = _trace(fig, "sc"), _trace(fig, "greedy")
    assert list(sc.x) == pytest.approx([100, 200, 400, 800])  # completion tokens / total items
    assert list(greedy.x) == pytest.approx([150]) and list(greedy.y) == pytest.approx([60])
    assert list(sc.text) == [p["label"] for p in summary["points"][:4]]
    assert sc.marker.color != greedy.marker.color
    front = _trace(fig, "Pareto frontier")
    assert list(front.x) == pytest.approx([100, 400, 800]) and list(front.y) == pytest.approx([40, 70, 80])
    assert front.line.dash == "dash" and front.line.shape == "hv"


def test_pass_at_k(summary: dict[str, Any]) -> None:
    fig = viz.pass_at_k_figure(summary)
    assert isinstance(fig, go.Figure) and len(fig.data) == 1
    assert list(fig.data[0].x) == [1, 2, 4, 8]
    assert list(fig.data[0].y) == pytest.approx([40, 55, 70, 80])
    assert "sc · think.n=8" in fig.data[0].name


def test_items_table_disagreement_first_links_and_escapes(summary: dict[str, Any]) -> None:
    html = viz.items_table_html(summary, run_link=lambda run_id: f"?run={run_id}")
    rows = re.findall(r'<tr[^>]*data-item="(\d+)"', html)
    assert rows == ["7", "0"]
    head = html[html.index("<thead>"):html.index("</thead>")]
    assert [label in head for label in ("sc · think.n=1", "sc · think.n=8", "greedy")] == [True] * 3
    assert 'href="?run=s0"' in html and 'href="?run=r4"' in html
    assert HOSTILE not in html and "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "✓" in html and "✗" in html and 'title="score 1.000' in html
    plain = viz.items_table_html(summary)
    assert "href=" not in plain
    assert len(re.findall(r"data-item=", viz.items_table_html(summary, limit=1))) == 1


def test_summary_html(summary: dict[str, Any]) -> None:
    html = viz.evaluation_summary_html(summary)
    assert "gsm &lt;b&gt;mini&lt;/b&gt;" in html and "<b>mini</b>" not in html
    assert "exact_number" in html and "gsm8k-mini" in html and "50 of 50" in html
    assert "15,000" in html and "16,500" in html  # estimate vs actual completion tokens
    assert "70.0%" in html and "(50.0%–85.0%)" in html and "7/10" in html
    start = html.index("<tbody>", html.index("mg-eval-points"))
    table = html[start:html.index("</tbody>", start)]
    starred = [row for row in table.split("<tr")[1:] if "★" in row]
    assert len(starred) == 3 and all("think.n=2" not in row for row in starred)


def test_report_is_offline_document(summary: dict[str, Any]) -> None:
    html = viz.evaluation_report_html(summary)
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?https?://", html, re.IGNORECASE)
    assert html.count("Plotly.newPlot") == 3
    for div in ("mg-eval-curve-plot", "mg-eval-tokens-plot", "mg-eval-pass-at-k-plot"):
        assert f'id="{div}"' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "?run=" not in html
    assert html.count("* plotly.js v") == 1  # plotly.js inlined once, as export_html does


def test_empty_summary(empty: dict[str, Any]) -> None:
    assert viz.accuracy_curve_figure(empty) is None
    assert viz.accuracy_tokens_figure(empty) is None
    assert viz.pass_at_k_figure(empty) is None
    assert "No graded items yet." in viz.items_table_html(empty)
    assert NO_POINTS in viz.evaluation_summary_html(empty)
    report = viz.evaluation_report_html(empty)
    assert report.startswith("<!DOCTYPE html>") and "Plotly.newPlot" not in report and NO_POINTS in report
    ungraded = copy.deepcopy(empty)
    ungraded["points"] = [dict(_point("sc", 0, 0, {"think.n": 1}, 0, 0), accuracy=None, total=0)]
    assert viz.accuracy_curve_figure(ungraded) is None and viz.accuracy_tokens_figure(ungraded) is None


def test_no_sweep_at_all(summary: dict[str, Any]) -> None:
    summary["sweep"] = []
    summary["points"] = [summary["points"][4]]
    fig = viz.accuracy_curve_figure(summary)
    assert fig is not None and list(fig.data[0].x) == ["greedy"] and fig.layout.xaxis.type == "category"


def test_a_shared_sample_point_says_its_draws_were_reused(summary: dict[str, Any]) -> None:
    """Issue 43 §2.5: a point whose draws came from the shared pool made 0 completion tokens itself beside a
    per-item cost; the table and the hover say why."""
    shared = copy.deepcopy(summary)
    pooled = shared["points"][0]
    pooled.update(completion_tokens=0, cost_tokens=640)
    html = viz.evaluation_summary_html(shared)
    start = html.index("<tbody>", html.index("mg-eval-points"))
    rows = html[start:html.index("</tbody>", start)].split("<tr")[1:]
    assert "reused from the shared pool" in rows[0] and "64.0" in rows[0]
    assert all("reused from the shared pool" not in row for row in rows[1:])  # points that ran their own draws
    from app.viz.evaluation import accuracy_tokens_figure

    hovers = [str(h) for trace in accuracy_tokens_figure(shared).data for h in (trace.hovertext or [])]
    assert sum("reused from the shared pool" in h for h in hovers) == 1
