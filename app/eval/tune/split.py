"""The honest split: the items, shuffled with the seed (and cut to --limit), into a dev set every choice is made on
and a held-out test set used once, for the reported figures."""

from __future__ import annotations

import random

from app.eval.tune.errors import TuneError

MIN_ITEMS = 4


def split_items(n_rows: int, dev_fraction: float, seed: int, limit: int | None = None) -> tuple[list[int], list[int]]:
    """(dev, test) row indices, disjoint and each sorted; the same seed gives the same split."""
    if not 0.0 < dev_fraction < 1.0:
        raise TuneError(f"--dev-fraction must be between 0 and 1 (exclusive), got {dev_fraction}")
    items = list(range(n_rows))
    random.Random(seed).shuffle(items)
    if limit is not None:
        items = items[:limit]
    if len(items) < MIN_ITEMS:
        raise TuneError(f"tuning needs at least {MIN_ITEMS} items (some to race on, some held out); the dataset gives "
                        f"{len(items)}" + (" with --limit" if limit is not None else ""))
    k = min(len(items) - 1, max(1, round(len(items) * dev_fraction)))
    return sorted(items[:k]), sorted(items[k:])


def race_slices(n_dev: int, first: int = MIN_ITEMS) -> list[int]:
    """The race's slice sizes: the first slice, doubling, ending with all of dev (4, 8, 16, ..., n_dev)."""
    sizes, size = [], min(first, n_dev)
    while size < n_dev:
        sizes.append(size)
        size *= 2
    return [*sizes, n_dev]
