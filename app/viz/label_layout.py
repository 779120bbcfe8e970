"""Where a scatter plot's point labels go: a side of each marker chosen so labels neither overlap nor leave the plot."""

from __future__ import annotations

import math
from collections.abc import Sequence

Box = tuple[float, float, float, float]
"""(left, bottom, right, top) in plot fractions: 0..1 across the axes' data range."""

PLOT_WIDTH_PX = 640.0
PLOT_HEIGHT_PX = 300.0
CHAR_PX = 6.5
LINE_PX = 14.0
GAP_PX = 7.0
POSITIONS = ("top center", "bottom center", "top right", "bottom right", "top left", "bottom left",
             "middle right", "middle left")
"""Plotly's textpositions, in the order tried: above or below first, where a label reads most naturally."""


def _fractions(values: Sequence[float], log: bool) -> list[float]:
    scaled = [math.log10(v) if log and v > 0 else float(v) for v in values]
    lo, hi = min(scaled, default=0.0), max(scaled, default=0.0)
    span = hi - lo
    return [0.5 if span == 0 else (v - lo) / span for v in scaled]


def label_box(x: float, y: float, chars: int, position: str) -> Box:
    """The box a label of `chars` characters takes at `position` of a marker at fractions (x, y)."""
    w, h = chars * CHAR_PX / PLOT_WIDTH_PX, LINE_PX / PLOT_HEIGHT_PX
    gx, gy = GAP_PX / PLOT_WIDTH_PX, GAP_PX / PLOT_HEIGHT_PX
    vertical, horizontal = position.split()
    left = {"center": x - w / 2, "right": x + gx, "left": x - gx - w}[horizontal]
    bottom = {"top": y + gy, "bottom": y - gy - h, "middle": y - h / 2}[vertical]
    return left, bottom, left + w, bottom + h


def _overlap(a: Box, b: Box) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _outside(box: Box) -> float:
    """How far the box leaves the plot sideways (a label cut off at the edge); above and below have margins."""
    return max(0.0, -box[0]) + max(0.0, box[2] - 1.0)


def label_positions(xs: Sequence[float], ys: Sequence[float], labels: Sequence[str], *,
                    log_x: bool = False) -> list[str]:
    """A textposition per point: the first of POSITIONS whose label box overlaps no label placed before and stays
    inside the plot, else the one that overlaps least. Points are placed left to right, so the result is stable."""
    fx, fy = _fractions(xs, log_x), _fractions(ys, False)
    placed: list[Box] = []
    chosen = [POSITIONS[0]] * len(labels)
    for i in sorted(range(len(labels)), key=lambda k: (fx[k], fy[k])):
        def cost(position: str, i: int = i) -> float:
            box = label_box(fx[i], fy[i], len(labels[i]), position)
            return sum(_overlap(box, other) for other in placed) + 10 * _outside(box)

        best = min(POSITIONS, key=lambda p: (cost(p) > 0, cost(p), POSITIONS.index(p)))
        chosen[i] = best
        placed.append(label_box(fx[i], fy[i], len(labels[i]), best))
    return chosen
