"""`metagen traces list` with filters that match nothing says so (and what is recorded), not 'no runs recorded'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_filter_matching_nothing_names_the_filter_and_what_exists(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    assert main(["run", str(ROOT / "workflows" / "self_consistency.yaml"), "--dry-run", "--json", "-q",
                 "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded"

    assert main(["traces", "list", "--db", str(db), "--status", "sucess"]) == 0
    out = capsys.readouterr().out
    assert "no runs match --status sucess" in out
    assert "statuses: succeeded" in out and "self-consistency" in out

    assert main(["traces", "list", "--db", str(db), "--workflow", "nope"]) == 0
    assert "no runs match --workflow nope" in capsys.readouterr().out


def test_an_empty_database_says_no_runs_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "empty.db"
    assert main(["traces", "list", "--db", str(db), "--status", "failed"]) == 0
    assert capsys.readouterr().out.strip() == f"no runs recorded in {db}"
