"""Fuzz: generated and mutated workflow texts through load + validate and the editor's parse, and canvas JSON
through the editor's from_editor. Only issues with known codes or clean refusals may come out."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.targets import TARGETS, run_property


def test_workflow_texts_load_and_validate_to_coded_issues(tmp_path: Path) -> None:
    run_property(TARGETS["workflow_text"], tmp_path)


def test_editor_json_gives_issues_or_a_user_error(tmp_path: Path) -> None:
    run_property(TARGETS["editor_json"], tmp_path)
