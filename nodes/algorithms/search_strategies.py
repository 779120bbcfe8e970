"""Pure parts of the search strategies beyond beam: DVTS budget split, particle resampling, MCTS (UCT) arithmetic."""

from __future__ import annotations

import math
from collections.abc import Sequence


def split_budget(total: int, parts: int) -> list[int]:
    """`total` expansions per round split over `parts` subtrees as evenly as possible, the remainder going to the
    first subtrees (DVTS: 8 = beam_width 2 x expand_k 4 over 3 subtrees -> [3, 3, 2]). Every part gets at least 1."""
    if parts < 1:
        raise ValueError("parts must be at least 1")
    base, extra = divmod(max(total, parts), parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def softmax(scores: Sequence[float | None], temperature: float) -> list[float]:
    """Weights proportional to exp(score / temperature), summing to 1. An unscored entry (None) weighs as the
    lowest score given; temperature must be > 0 (lower = greedier resampling)."""
    if not scores:
        return []
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    known = [s for s in scores if s is not None]
    floor = min(known) if known else 0.0
    values = [(s if s is not None else floor) / temperature for s in scores]
    top = max(values)
    exps = [math.exp(v - top) for v in values]  # shifted by the max: no overflow
    total = sum(exps)
    return [e / total for e in exps]


def systematic_resample(weights: Sequence[float], n: int, offset: float) -> list[int]:
    """`n` indices drawn in proportion to `weights` by systematic resampling: n evenly spaced pointers
    (offset + k) / n, offset in [0, 1), each drawing the index i with C[i-1] <= pointer < C[i] (C the cumulative
    weights). Index i is drawn floor(n * w_i) or that plus one times: lower variance than n independent draws,
    and one random number per generation."""
    if n <= 0 or not weights:
        return []
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("weights must have a positive sum")
    cumulative: list[float] = []
    running = 0.0
    for w in weights:
        running += w / total
        cumulative.append(running)
    last = max(i for i, w in enumerate(weights) if w > 0)
    cumulative[last:] = [1.0] * (len(cumulative) - last)  # rounding must not leave a pointer past the last weight
    below_one = math.nextafter(1.0, 0.0)
    out: list[int] = []
    i = 0
    for k in range(n):
        # (offset + k) / n rounds to exactly 1.0 for an offset just under 1 (e.g. (1 - 2**-53 + 1) / 2): clamp it
        pointer = min((offset % 1.0 + k) / n, below_one)
        while cumulative[i] <= pointer:  # the i with C[i-1] <= pointer < C[i]: a zero weight is never drawn
            i += 1
        out.append(i)
    return out


def uct_score(value_sum: float, visits: int, parent_visits: int, c_explore: float) -> float:
    """UCT (UCB1 on trees): mean value + c * sqrt(ln N_parent / n); an unvisited child is +inf (tried first)."""
    if visits <= 0:
        return math.inf
    return value_sum / visits + c_explore * math.sqrt(math.log(max(parent_visits, 1)) / visits)


def uct_pick(children: Sequence[tuple[float, int]], parent_visits: int, c_explore: float) -> int:
    """Index of the child with the highest UCT score among (value_sum, visits); ties to the lower index."""
    if not children:
        raise ValueError("no children to pick from")
    best, best_score = 0, -math.inf
    for i, (value_sum, visits) in enumerate(children):
        score = uct_score(value_sum, visits, parent_visits, c_explore)
        if score > best_score:
            best, best_score = i, score
    return best


def robust_pick(children: Sequence[tuple[float, int]]) -> int:
    """The final move of MCTS: the most visited child, ties to the higher mean value, then the lower index."""
    if not children:
        raise ValueError("no children to pick from")
    return max(range(len(children)),
               key=lambda i: (children[i][1], children[i][0] / children[i][1] if children[i][1] else -math.inf, -i))
