"""Paired comparisons of an evaluation's points for in-process callers (the Python API's Evaluation.compare)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from app.eval.paired import compare
from app.service.errors import UserError


def compare_labels(items: Sequence[dict[str, Any]], a: str, b: str, seed: int = 0) -> dict[str, Any]:
    """Point `a` against point `b` (labels or workflow names of one point) on the items both ran, from item rows
    ({label, workflow, item_idx, correct}): {a, b, n, diff, ci, p_value, method, significant, sentence}."""
    runs: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    workflows: dict[str, set[str]] = defaultdict(set)
    for row in items:
        runs[row["label"]][int(row["item_idx"])].append(1.0 if row["correct"] else 0.0)
        workflows[row.get("workflow", "")].add(row["label"])
    labels = [_resolve(name, runs, workflows) for name in (a, b)]
    return compare(labels[0], labels[1], runs[labels[0]], runs[labels[1]], seed=seed).as_dict()


def _resolve(name: str, runs: dict[str, Any], workflows: dict[str, set[str]]) -> str:
    if name in runs:
        return name
    named = workflows.get(name, set())
    if len(named) == 1:
        return next(iter(named))
    raise UserError(f"no point {name!r} in this evaluation" + (f" ({name!r} has {len(named)} sweep points)"
                    if named else "") + f"; its points: {'; '.join(runs)}")
