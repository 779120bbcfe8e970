"""Pure parts of Recursive Self-Aggregation (RSA): the random subsets each round aggregates, and their prompt text."""

from __future__ import annotations

import random
from collections.abc import Sequence


def draw_subsets(population: int, count: int, k: int, rng: random.Random) -> list[list[int]]:
    """`count` subsets of `k` distinct indices of range(population), each drawn uniformly without replacement
    (rng.sample) and sorted: the candidates each new candidate of a round is made from."""
    if k < 1:
        raise ValueError("a subset needs at least 1 candidate")
    if k > population:
        raise ValueError(f"cannot draw {k} distinct candidates from a population of {population}")
    return [sorted(rng.sample(range(population), k)) for _ in range(count)]


def numbered_solutions(texts: Sequence[str]) -> str:
    """The candidates shown to the model: 'Solution 1:' and its text, one after the other, blank lines between."""
    return "\n\n".join(f"Solution {i}:\n{text.strip()}" for i, text in enumerate(texts, start=1))
