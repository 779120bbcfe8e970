"""Successive halving with paired tests (pure functions over per-item results): after each slice of dev, the
candidates over budget, those significantly worse than the leader (the product's paired test), those that can no
longer beat greedy significantly on dev, and (once the slice holds MIN_HALVING_ITEMS) the bottom half are dropped;
the choice among the finalists is made on dev alone."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.eval.paired import ALPHA, compare, mcnemar_exact
from app.run.status import SUCCEEDED, UNGRADED

MIN_HALVING_ITEMS = 8
"""A bottom-half drop that is not significant needs a slice of at least this many dev items: on 4 items one
answer decides the ranking (18 candidates once went at 0 % against the leader's 25 %)."""


@dataclass
class ItemResult:
    """What one candidate did on one item."""

    score: float
    tokens: int
    """Its cost as if run alone: prompt and completion tokens, those reused from a shared sample pool included."""
    seconds: float
    spent: int = 0
    """Tokens actually evaluated and generated for it (not those it found in the shared pool)."""
    reused: int = 0
    """Completion tokens it took from the shared sample pool (drawn, and timed, by another candidate's run)."""
    failed: bool = False
    """The run itself failed (an error, not a wrong answer): scored 0, and its cost is not what it would be."""


def row_spent(row: dict[str, Any]) -> int:
    """Tokens an evaluation row's run evaluated and generated (what it cost the tune's budget)."""
    return int(row["prompt_tokens_evaluated"] or 0) + int(row["completion_tokens"] or 0)


def reused_tokens(row: dict[str, Any]) -> int:
    """Tokens an item's run took from the shared pool: its reused samples' completions, and the prompts of its
    requests served wholly from the pool (counted in prompt_tokens, neither evaluated nor cached)."""
    completions = int(row["completion_tokens_reused"] or 0)
    if not completions:
        return 0
    prompts = int(row["prompt_tokens"] or 0) - int(row["prompt_tokens_evaluated"] or 0) - int(
        row["prompt_tokens_cached"] or 0)
    return completions + max(prompts, 0)


def item_result(row: dict[str, Any]) -> ItemResult | None:
    """One evaluation row as a candidate's result on its item; None for a row with no verdict (ungraded: left out,
    never counted as wrong)."""
    if row["status"] == UNGRADED:
        return None
    tokens = int(row["prompt_tokens"] or 0) + int(row["completion_tokens"] or 0) + int(
        row["completion_tokens_reused"] or 0)
    return ItemResult(float(row["score"] or 0.0), tokens, float(row["wall_s"] or 0.0), spent=row_spent(row),
                      reused=reused_tokens(row), failed=row["status"] not in (SUCCEEDED, ""))


Results = dict[str, dict[int, ItemResult]]
"""label -> item -> result."""


@dataclass
class Figures:
    """A candidate's figures on a set of items."""

    n: int
    accuracy: float
    tokens_per_item: float
    seconds_per_item: float

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "accuracy": self.accuracy, "tokens_per_item": self.tokens_per_item,
                "seconds_per_item": self.seconds_per_item}


def totals(rows: dict[int, ItemResult], items: list[int]) -> tuple[int, float, float, float]:
    """(items with a result, their summed score, tokens and seconds): the one way figures are summed in a tune."""
    got = [rows[i] for i in items if i in rows]
    return (len(got), math.fsum(r.score for r in got), math.fsum(r.tokens for r in got),
            math.fsum(r.seconds for r in got))


def figures(rows: dict[int, ItemResult], items: list[int]) -> Figures:
    n, score, tokens, seconds = totals(rows, items)
    if not n:
        return Figures(0, math.nan, math.nan, math.nan)
    return Figures(n, score / n, tokens / n, seconds / n)


def scores(rows: dict[int, ItemResult], items: list[int]) -> dict[int, list[float]]:
    """The paired test's input: item -> [score]."""
    return {i: [rows[i].score] for i in items if i in rows}


def over_budget(fig: Figures, budget_tokens: int | None, budget_seconds: float | None) -> str | None:
    if budget_tokens is not None and fig.n and fig.tokens_per_item > budget_tokens:
        return f"over budget: {fig.tokens_per_item:.0f} tokens per item on {fig.n} dev items (budget {budget_tokens})"
    if budget_seconds is not None and fig.n and fig.seconds_per_item > budget_seconds:
        return (f"over budget: {fig.seconds_per_item:.1f} s per item on {fig.n} dev items "
                f"(budget {budget_seconds:g} s)")
    return None


def ranked(labels: list[str], results: Results, items: list[int]) -> list[str]:
    """Best first: higher accuracy, then fewer tokens, then the order given (the baseline first)."""
    figs = {label: figures(results.get(label, {}), items) for label in labels}

    def key(label: str) -> tuple[float, float, int]:
        f = figs[label]
        return (-(f.accuracy if not math.isnan(f.accuracy) else -1.0), f.tokens_per_item, labels.index(label))

    return sorted(labels, key=key)


def race_round(alive: list[str], results: Results, items: list[int], *, baseline: str,
               budget_tokens: int | None = None, budget_seconds: float | None = None,
               halve: bool = True) -> dict[str, str]:
    """The candidates to drop after a slice of dev ({label: reason}); the baseline is never dropped."""
    drops: dict[str, str] = {}
    for label in alive:
        rows = [results.get(label, {})[i] for i in items if i in results.get(label, {})]
        failed = sum(1 for r in rows if r.failed)
        why = (f"its runs failed on {failed} of {len(rows)} dev items" if rows and 2 * failed >= len(rows)
               else over_budget(figures(results.get(label, {}), items), budget_tokens, budget_seconds))
        if why and label != baseline:
            drops[label] = why
    within = [label for label in alive if label not in drops]
    if not within:
        return drops
    leader = ranked(within, results, items)[0]
    for label in within:
        if label in (leader, baseline):
            continue
        comparison = compare(leader, label, scores(results.get(leader, {}), items),
                             scores(results.get(label, {}), items))
        if comparison.p_value < ALPHA and comparison.diff > 0:
            drops[label] = (f"significantly worse than {leader} on {comparison.n} dev items "
                            f"({comparison.diff * -100:+.0f} points, p = {comparison.p_value:.2g})")
    rest = [label for label in ranked(within, results, items) if label not in drops and label != baseline]
    if halve and len(rest) > 1 and len(items) >= MIN_HALVING_ITEMS:
        keep = math.ceil(len(rest) / 2)
        lead = figures(results.get(leader, {}), items)
        for label in rest[keep:]:
            f = figures(results.get(label, {}), items)
            drops[label] = (f"bottom half after {f.n} dev items ({f.accuracy:.0%} against the leader's "
                            f"{lead.accuracy:.0%})")
    return drops


def _binary(*rows: dict[int, ItemResult]) -> bool:
    return all(r.score in (0.0, 1.0) for row in rows for r in row.values())


def cannot_beat(label: str, results: Results, dev: list[int], *, baseline: str) -> str | None:
    """Why `label` can no longer be recommended (None: it still can): `choose` recommends a challenger only when it
    beats greedy significantly on dev, and even right on every dev item it has not run (greedy wrong on those
    greedy has not run) it would not. Exact for 0/1 scores (the McNemar case); other scores never rule out."""
    own, base = results.get(label, {}), results.get(baseline, {})
    if label == baseline or not _binary(own, base):
        return None
    a = b = 0
    for i in dev:
        mine = own[i].score if i in own else 1.0
        theirs = base[i].score if i in base else 0.0
        a, b = a + (mine > theirs), b + (mine < theirs)
    p = mcnemar_exact(a, b)
    if a > b and p < ALPHA:
        return None
    left = sum(1 for i in dev if i not in own)
    return (f"cannot beat greedy significantly on dev: even right on the {left} dev items it has not run it would "
            f"win {a} and lose {b} of the items where they differ (p = {p:.2g})")


def steps_to_rule_out(label: str, results: Results, dev: list[int], upcoming: list[int], *,
                      baseline: str) -> int | None:
    """How many of the `upcoming` dev items (in order) `label` must run before `cannot_beat` could rule it out
    (were it wrong on each of them); None when it cannot be ruled out on these items at all."""
    own, base = results.get(label, {}), results.get(baseline, {})
    if label == baseline or not _binary(own, base):
        return None
    trial = dict(own)
    for step, item in enumerate(upcoming, 1):
        trial[item] = ItemResult(0.0, 0, 0.0)
        if cannot_beat(label, {**results, label: trial}, dev, baseline=baseline):
            return step
    return None


def holm_significant(p_values: dict[str, float], alpha: float = ALPHA) -> set[str]:
    """The labels whose null hypothesis Holm's step-down procedure rejects at family-wise level `alpha`: sorted by
    p, the k-th smallest (from 0) is rejected while every p before it was and p < alpha / (m - k)."""
    order = sorted(p_values, key=lambda label: p_values[label])
    rejected: set[str] = set()
    for k, label in enumerate(order):
        if not p_values[label] < alpha / (len(order) - k):
            break
        rejected.add(label)
    return rejected


def choose(finalists: list[str], results: Results, dev: list[int], *, baseline: str,
           budget_tokens: int | None = None, budget_seconds: float | None = None) -> tuple[str, str]:
    """(recommended label, why) from dev alone: the best-ranked finalist within the budget whose gain over the
    baseline on dev is significant after Holm's correction over every finalist compared (the paired test of each
    against greedy), else the baseline: an honest "no gain". Without the correction, the first of many candidates
    with p < 0.05 would be a false "significant" one time in a few."""
    within = [label for label in finalists
              if label == baseline or not over_budget(figures(results.get(label, {}), dev), budget_tokens,
                                                     budget_seconds)]
    order = ranked(within, results, dev) if within else [baseline]
    above = order[:order.index(baseline)] if baseline in order else order
    if not above:
        return baseline, f"no candidate scored above greedy {baseline} on dev"
    compared = {label: compare(label, baseline, scores(results.get(label, {}), dev),
                               scores(results.get(baseline, {}), dev)) for label in within if label != baseline}
    significant = holm_significant({label: c.p_value for label, c in compared.items() if c.diff > 0})
    m = len(compared)
    for label in above:  # the best whose gain survives the correction: one that does not is never recommended
        comparison = compared[label]
        if label in significant:
            return label, (f"{label} beats greedy on {comparison.n} dev items by {comparison.diff * 100:.0f} "
                           f"points (p = {comparison.p_value:.2g}, significant after Holm's correction over {m} "
                           f"candidate{'s' if m != 1 else ''})")
    best = above[0]
    comparison = compared[best]
    return baseline, (f"no gain: the best finalist, {best}, does not beat greedy significantly on dev after Holm's "
                      f"correction over {m} candidate{'s' if m != 1 else ''} ({comparison.diff * 100:+.0f} points, "
                      f"p = {comparison.p_value:.2g}); greedy is recommended")
