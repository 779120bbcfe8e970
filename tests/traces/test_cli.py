"""`metagen traces list/show/export/import`, driven through the CLI entry point as a user types it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def db_with_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    db = tmp_path / "t.db"
    code, out, err = run_cli(capsys, "run", str(ROOT / "workflows" / "self_consistency.yaml"), "--dry-run",
                             "--json", "-q", "--db", str(db))
    assert code == 0, err
    return db, json.loads(out)["run_id"]


def test_list_and_show(db_with_run: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    db, run_id = db_with_run
    code, out, _ = run_cli(capsys, "traces", "list", "--db", str(db))
    assert code == 0
    header, row = out.strip().splitlines()
    assert header.split()[:3] == ["RUN", "WORKFLOW", "STATUS"]
    assert row.split()[:3] == [run_id, "self-consistency", "succeeded"]

    code, out, _ = run_cli(capsys, "traces", "list", "--json", "--db", str(db), "--status", "failed")
    assert code == 0 and json.loads(out) == []
    code, out, _ = run_cli(capsys, "traces", "list", "--json", "--db", str(db), "--workflow", "self-consistency")
    listed = json.loads(out)
    assert [r["id"] for r in listed] == [run_id] and listed[0]["lm_calls"] > 0

    code, out, _ = run_cli(capsys, "traces", "show", run_id[:6], "--db", str(db))
    assert code == 0
    assert f"run {run_id} · self-consistency · succeeded" in out
    assert "think" in out and "vote" in out and "answer:" in out

    code, out, _ = run_cli(capsys, "traces", "show", run_id, "--json", "--db", str(db))
    record = json.loads(out)
    assert record["run"]["id"] == run_id and {n["node_id"] for n in record["nodes"]} == {"think", "vote"}

    page = db.parent / "report" / "run.html"
    code, out, err = run_cli(capsys, "traces", "show", run_id, "--html", str(page), "--db", str(db))
    assert code == 0 and out == "" and str(page) in err
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_export_import_show(db_with_run: tuple[Path, str], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    db, run_id = db_with_run
    code, exported, _ = run_cli(capsys, "traces", "export", run_id, "--db", str(db))
    assert code == 0
    file = tmp_path / "run.json"
    file.write_text(exported, encoding="utf-8")
    other = tmp_path / "other.db"
    code, out, err = run_cli(capsys, "traces", "import", str(file), "--db", str(other))
    assert code == 0 and out.strip() == run_id and "imported" in err
    _, original, _ = run_cli(capsys, "traces", "show", run_id, "--json", "--db", str(db))
    _, copy, _ = run_cli(capsys, "traces", "show", run_id, "--json", "--db", str(other))
    a, b = json.loads(original), json.loads(copy)
    a.pop("provenance")
    b.pop("provenance")
    assert a == b

    code, _, err = run_cli(capsys, "traces", "delete", run_id, "nope", "--db", str(other))
    assert code == 2 and "no run 'nope'" in err
    code, _, err = run_cli(capsys, "traces", "delete", run_id[:4], "--db", str(other))
    assert code == 0 and f"deleted run {run_id}" in err
    code, out, _ = run_cli(capsys, "traces", "list", "--json", "--db", str(other))
    assert json.loads(out) == []


def test_errors_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    code, out, err = run_cli(capsys, "traces", "list", "--db", str(db))
    assert code == 0 and "no runs recorded" in out
    code, _, err = run_cli(capsys, "traces", "show", "abc", "--db", str(db))
    assert code == 2 and err.startswith("error: no run 'abc'") and "traces list" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    code, _, err = run_cli(capsys, "traces", "import", str(bad), "--db", str(db))
    assert code == 2 and "is not JSON (line 1" in err
    bad.write_text('{"hello": 1}', encoding="utf-8")
    code, _, err = run_cli(capsys, "traces", "import", str(bad), "--db", str(db))
    assert code == 2 and "not a Metagen trace export" in err
    code, _, err = run_cli(capsys, "traces", "import", str(tmp_path / "missing.json"), "--db", str(db))
    assert code == 2 and "cannot read" in err
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"x" * 4096)
    code, _, err = run_cli(capsys, "traces", "list", "--db", str(garbage))
    assert code == 2 and "cannot open trace database" in err and "Traceback" not in err


def test_traces_through_the_console_script(tmp_path: Path) -> None:
    """The installed entry point path: `python -m app.cli.main traces ...` in a fresh process, database from the
    environment variable."""
    env = {**os.environ, "METAGEN_TRACE_DB": str(tmp_path / "env.db"), "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "app.cli", "run", str(ROOT / "workflows" / "chain_of_thought.yaml"),
                          "--dry-run", "--json", "-q"], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout)["run_id"]
    listed = subprocess.run([sys.executable, "-m", "app.cli", "traces", "list", "--json"], capture_output=True,
                            text=True, env=env, cwd=ROOT, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
