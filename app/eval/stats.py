"""Evaluation statistics (pure math): Wilson intervals, unbiased pass@k, Pareto fronts and means."""

from __future__ import annotations

import math
from collections.abc import Iterable


def wilson_interval(correct: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion `correct / total` (z = 1.96: 95 %).

    With no trials (total = 0) nothing is known, so the interval is the whole range (0.0, 1.0).
    """
    if total < 0 or correct < 0 or correct > total:
        raise ValueError(f"need 0 <= correct <= total, got correct={correct}, total={total}")
    if total == 0:
        return (0.0, 1.0)
    n = float(total)
    p = correct / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    return (max(0.0, center - half), min(1.0, center + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of Chen et al. 2021 from n samples of which c are correct:
    1 - C(n-c, k) / C(n, k), computed as 1 - prod_{i=n-c+1..n} (1 - k/i) (no huge binomials)."""
    if n < 1 or k < 1:
        raise ValueError(f"need n >= 1 and k >= 1, got n={n}, k={k}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got n={n}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (lower or equal cost x and higher or equal accuracy y,
    better in one), sorted by x (ties by index). Equal points are all kept; points with NaN are left out."""
    valid = [i for i, (x, y) in enumerate(points) if not (math.isnan(x) or math.isnan(y))]
    order = sorted(valid, key=lambda i: (points[i][0], -points[i][1], i))
    front: list[int] = []
    best_before = -math.inf  # highest y among points of strictly lower x
    start = 0
    while start < len(order):
        x = points[order[start]][0]
        end = start
        while end < len(order) and points[order[end]][0] == x:
            end += 1
        top = points[order[start]][1]  # the group is sorted by y descending
        if top > best_before:
            front.extend(i for i in order[start:end] if points[i][1] == top)
            best_before = top
        start = end
    return front


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean (bools count as 1/0); raises ValueError for no values."""
    items = [float(v) for v in values]
    if not items:
        raise ValueError("mean of no values")
    return math.fsum(items) / len(items)
