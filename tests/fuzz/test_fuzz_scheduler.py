"""Fuzz: runs of examples with params within and just outside their ranges, odd inputs and fake replies, on the
fake backend with a real trace store. A run ends with a run status (a node failing cleanly), or is refused
with a WorkflowError before any model call; nothing escapes the scheduler, nothing hangs, the database is sound."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.targets import TARGETS, run_property


def test_runs_end_with_a_status_or_a_coded_refusal(tmp_path: Path) -> None:
    run_property(TARGETS["scheduler"], tmp_path)
