"""Workflow paths that are not readable files give a workflow problem (exit 2 in the CLI), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main
from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow


def test_a_folder_is_a_clear_problem(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError) as caught:
        load_workflow(tmp_path)
    issue = caught.value.issues[0]
    assert issue.code == "not_found" and str(tmp_path) in issue.message and ".yaml" in issue.hint


def test_metagen_run_on_a_folder_exits_2_with_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path), "--dry-run", "--no-trace"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}:0: not_found: cannot read {tmp_path}" in err and "Traceback" not in err
