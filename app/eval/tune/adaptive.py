"""The difficulty-adaptive allocation (Snell et al. 2024), as pure functions over dev results: the probe score's
quantile bins, and the candidate per bin that maximises dev accuracy while the policy's mean cost per item (the
probe's included) stays within the budget."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from app.eval.tune.race import Results, totals
from nodes.kinds.route import bin_of

N_BINS = 3
"""Bins of the probe score at most (fewer when dev is small or the scores tie)."""
MIN_BIN_ITEMS = 2
"""Dev items per bin at least, so each bin's choice rests on more than one item."""
MAX_COMBINATIONS = 200_000
"""The exhaustive search over (candidate per bin) stops being tried beyond this many combinations."""


@dataclass
class Probe:
    """The probe on one item: its score (agreement among k samples) and its cost."""

    score: float
    tokens: int
    seconds: float


@dataclass
class Allocation:
    """The policy chosen on dev: the cut points, one candidate per bin, and its dev figures."""

    bins: list[float]
    branches: list[str]
    accuracy: float
    tokens_per_item: float
    seconds_per_item: float
    n: int
    per_bin: list[dict[str, Any]] = field(default_factory=list)
    """{bin, range, label, n, accuracy, tokens_per_item} per bin (dev)."""


def quantile_bins(scores: list[float], n_bins: int = N_BINS, min_items: int = MIN_BIN_ITEMS) -> list[float]:
    """Ascending cut points splitting `scores` into about equal bins (a score equal to a cut goes above it); cuts
    that would leave a bin empty or under `min_items` are left out (ties make fewer bins)."""
    s = sorted(scores)
    n = len(s)
    n_bins = max(1, min(n_bins, n // max(1, min_items)))
    cuts: list[float] = []
    for j in range(1, n_bins):
        cut = s[min(n - 1, round(j * n / n_bins))]
        floor = cuts[-1] if cuts else -math.inf
        below = sum(1 for x in s if floor <= x < cut)
        above = sum(1 for x in s if x >= cut)
        if below >= min_items and above >= min_items and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
    return cuts


def eligible(labels: list[str], results: Results, dev: list[int]) -> list[str]:
    """The candidates measured on every dev item with no failed run: only they can be compared per bin."""
    return [label for label in labels
            if all(i in results.get(label, {}) and not results[label][i].failed for i in dev)]


def allocate(bins: list[float], probes: dict[int, Probe], results: Results, labels: list[str], dev: list[int], *,
             budget_tokens: int | None = None, budget_seconds: float | None = None) -> Allocation | None:
    """The candidate per bin maximising the correct dev items (ties: fewer tokens, then the order of `labels`)
    with the policy's mean tokens / seconds per dev item (probe + chosen candidate) within the budget; None when no
    choice fits. Only dev items are read."""
    items = [i for i in dev if i in probes]
    if not items or not labels:
        return None
    by_bin: list[list[int]] = [[] for _ in range(len(bins) + 1)]
    for i in items:
        by_bin[bin_of(probes[i].score, bins)].append(i)
    cost = {(b, label): totals(results[label], members)[1:] for b, members in enumerate(by_bin) for label in labels}
    probe_tokens = math.fsum(probes[i].tokens for i in items)
    probe_seconds = math.fsum(probes[i].seconds for i in items)
    n = len(items)
    if len(labels) ** len(by_bin) > MAX_COMBINATIONS:
        labels = labels[:max(1, int(MAX_COMBINATIONS ** (1 / len(by_bin))))]
    best: tuple[float, float, tuple[int, ...]] | None = None
    for choice in itertools.product(range(len(labels)), repeat=len(by_bin)):
        sums = [cost[(b, labels[c])] for b, c in enumerate(choice)]
        tokens = (probe_tokens + math.fsum(s[1] for s in sums)) / n
        seconds = (probe_seconds + math.fsum(s[2] for s in sums)) / n
        if (budget_tokens is not None and tokens > budget_tokens) or (
                budget_seconds is not None and seconds > budget_seconds):
            continue
        key = (-math.fsum(s[0] for s in sums), tokens, choice)
        if best is None or key < best:
            best = key
    if best is None:
        return None
    return _allocation(bins, by_bin, [labels[c] for c in best[2]], results, probes, n)


def _allocation(bins: list[float], by_bin: list[list[int]], branches: list[str], results: Results,
                probes: dict[int, Probe], n: int) -> Allocation:
    per_bin, correct, tokens, seconds = [], 0.0, 0.0, 0.0
    for b, (members, label) in enumerate(zip(by_bin, branches, strict=True)):
        _, score, tok, sec = totals(results[label], members)
        probe_tok = math.fsum(probes[i].tokens for i in members)
        correct, tokens = correct + score, tokens + tok + probe_tok
        seconds += sec + math.fsum(probes[i].seconds for i in members)
        low = bins[b - 1] if b > 0 else None
        high = bins[b] if b < len(bins) else None
        per_bin.append({"bin": b, "range": [low, high], "label": label, "n": len(members),
                        "accuracy": score / len(members) if members else None,
                        "tokens_per_item": (tok + probe_tok) / len(members) if members else None})
    return Allocation(bins=list(bins), branches=branches, accuracy=correct / n, tokens_per_item=tokens / n,
                      seconds_per_item=seconds / n, n=n, per_bin=per_bin)
