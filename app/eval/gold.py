"""The gold-answer check: grade a task preset's dataset's own right answers with the preset's metric.

A grader that marks the benchmark's own gold answers wrong makes every number built on it wrong, so
`metagen eval check --task NAME` (and the Evaluate tab's "Check the grader") renders each row's `gold` template
(tasks/*.yaml: e.g. HumanEval's prompt + canonical solution, GSM8K's solution text ending in `#### N`), grades it
as the evaluation would grade a model's answer, and reports how many pass and why the others do not.
"""

from __future__ import annotations

import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.eval.metrics import Grade, parse_metric
from app.eval.tasks import REFERENCE_COLUMN, TaskError, TaskPreset, load_task_rows, render, task_row

log = logging.getLogger(__name__)

@dataclass
class GoldCheck:
    """How a preset's metric grades its dataset's gold answers."""

    task: str
    total: int
    correct: int
    failures: list[dict[str, Any]] = field(default_factory=list)
    """[{item, reason}]: the item (0-based row of the dataset) and why its gold answer was not graded correct."""
    ungraded: int = 0
    """Rows the grader could not grade at all (e.g. the sandbox did not start); also listed in `failures`."""

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "total": self.total, "correct": self.correct, "failures": self.failures,
                "ungraded": self.ungraded}

    def summary(self) -> str:
        pct = f" ({100 * self.correct / self.total:.1f}%)" if self.total else ""
        extra = f", {self.ungraded} ungraded" if self.ungraded else ""
        return f"{self.task}: {self.correct}/{self.total} gold answers graded correct{pct}{extra}"


_GOLD_FIELD = re.compile(r"\{([A-Za-z_][\w ]*)\}")


def gold_answer(task: TaskPreset, row: dict[str, Any], made: dict[str, Any]) -> str:
    """The row's gold answer: the preset's `gold` template over the row, `{reference}` the preset's reference.
    Unlike a prompt, `{name}` is replaced wherever it names a column, next to another field too
    (`{prompt}{canonical_solution}`, `\\boxed{{answer}}`); braces naming none stay as they are."""
    values = {**row, "reference": made.get(REFERENCE_COLUMN)}
    return _GOLD_FIELD.sub(lambda m: render(m.group(0), values) if m.group(1) in values else m.group(0), task.gold)


def _grade_row(task: TaskPreset, metric: Any, row: dict[str, Any], index: int) -> tuple[Grade | None, str]:
    try:
        made = task_row(task, row, index)
        gold = gold_answer(task, row, made)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        return None, f"the preset cannot read this row ({type(exc).__name__}: {exc})"
    try:
        reference = made.get(REFERENCE_COLUMN)
        return metric.grade(gold, made, None if reference is None else str(reference), {"answer": gold}), ""
    except Exception as exc:  # the grader failed: no verdict on this row
        return None, f"ungraded: the metric failed: {type(exc).__name__}: {exc}"


def check_gold(task: TaskPreset, data: str | Path | None = None, limit: int | None = None,
               workers: int | None = None) -> GoldCheck:
    """Grade the first `limit` rows' gold answers (all by default) with the preset's metric, in parallel."""
    if not task.gold:
        raise TaskError(f"task preset {task.name} names no gold answer (add a `gold:` template to its YAML)")
    metric = parse_metric(task.metric)
    rows = load_task_rows(task, data).rows
    if limit is not None:
        rows = rows[: max(0, int(limit))]
    workers = workers or max(1, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(workers, max(1, len(rows)))) as pool:
        graded = list(pool.map(lambda i: _grade_row(task, metric, rows[i], i), range(len(rows))))
    failures, correct, ungraded = [], 0, 0
    for index, (grade, problem) in enumerate(graded):
        if grade is not None and grade.correct and not grade.ungraded:
            correct += 1
            continue
        if (grade is not None and grade.ungraded) or problem.startswith("ungraded"):
            ungraded += 1
        reason = problem or (grade.detail if grade is not None else "") or "graded wrong"
        failures.append({"item": index, "reason": reason[:500]})
    log.info("gold check of %s: %d/%d", task.name, correct, len(rows))
    return GoldCheck(task.name, len(rows), correct, failures, ungraded)
