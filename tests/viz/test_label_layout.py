"""Accuracy-against-tokens labels: close points get labels on different sides, and the last one stays in the plot."""

from __future__ import annotations

import itertools
from typing import Any

from app.viz.evaluation import accuracy_tokens_figure
from app.viz.label_layout import _fractions, _overlap, label_box, label_positions


def _point(label: str, tokens: int, correct: int) -> dict[str, Any]:
    return {"workflow": label.split(" ")[0], "label": label, "params": {}, "accuracy": correct / 6,
            "correct": correct, "total": 6, "completion_tokens": tokens * 6, "ci": [0.0, 1.0]}


def _boxes(fig: Any) -> list[tuple[float, float, float, float]]:
    """Every label's box in plot fractions, as the figure places it."""
    marks = []
    for trace in fig.data:
        if trace.text is None:
            continue
        sides = trace.textposition
        sides = [sides] * len(trace.x) if isinstance(sides, str) else list(sides)  # one side for all, or one each
        marks += list(zip(trace.x, trace.y, trace.text, sides, strict=True))
    fx, fy = _fractions([m[0] for m in marks], False), _fractions([m[1] for m in marks], False)
    return [label_box(x, y, len(t), pos) for x, y, (_, _, t, pos) in zip(fx, fy, marks, strict=True)]


def test_close_points_get_labels_that_do_not_overlap_and_the_last_is_not_cut() -> None:
    """The newcomer's evaluation (issue 43 §2.5): six points of three workflows within a few tokens of each
    other; every label was 'top center', so they overlapped and the right-most one ran past the plot."""
    summary = {"points": [
        _point("greedy", 40, 3), _point("chain_of_thought", 48, 3),
        _point("self_consistency · sample.n=2", 52, 3), _point("self_consistency · sample.n=4", 58, 4),
        _point("self_certainty_bon · sample.n=4", 62, 4), _point("self_certainty_bon · sample.n=8", 64, 4)]}
    fig = accuracy_tokens_figure(summary)
    assert fig is not None
    boxes = _boxes(fig)
    assert len(boxes) == 6
    for a, b in itertools.combinations(boxes, 2):
        assert _overlap(a, b) == 0, (a, b)
    assert all(box[0] >= 0 and box[2] <= 1 for box in boxes), boxes  # none cut at the left or right edge


def test_a_lone_point_keeps_its_label_above_it() -> None:
    assert label_positions([10.0], [0.5], ["greedy"]) == ["top center"]
