"""`metagen eval` through its CLI on the scripted fake model: bad datasets refused with row numbers before
anything runs, --json output, list/show/export, resume of an unfinished evaluation."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SC = str(ROOT / "workflows" / "self_consistency.yaml")
COT = str(ROOT / "workflows" / "chain_of_thought.yaml")


def _runs(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


def _good(tmp_path: Path, rows: int = 3) -> Path:
    path = tmp_path / "good.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(rows)), encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("missing.jsonl", b'{"question": "a", "answer": "1"}\n{"answer": "2"}\n{"question": "", "answer": "3"}\n',
     ["row 2", "row 3", "question"]),
    ("empty.csv", b"", ["empty"]),
    ("latin1.csv", "question,answer\ncaf\u00e9,1\n".encode("latin-1"), ["UTF-8"]),
    ("ragged.csv", b"question,answer\nq1,1\nq2,2,extra\nq3\n", ["row 2", "row 3"]),
])
def test_bad_datasets_are_refused_with_row_numbers_and_nothing_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, expected: list[str]) -> None:
    data = tmp_path / name
    data.write_bytes(content)
    db = tmp_path / "t.db"
    code = main(["eval", SC, "--data", str(data), "--dry-run", "--db", str(db), "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert "nothing was run" in err
    for text in expected:
        assert text in err
    assert _runs(db) == 0


def test_an_oversized_dataset_is_refused_by_its_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "huge.jsonl"
    with open(data, "wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB on paper, no time spent writing it
    code = main(["eval", SC, "--data", str(data), "--dry-run", "--db", str(tmp_path / "t.db"), "-q"])
    assert code == 2
    assert "MB" in capsys.readouterr().err


def test_unknown_sweep_and_mapping_problems_are_reported(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "t.db")
    code = main(["eval", SC, "--data", str(_good(tmp_path)), "--dry-run", "--db", db, "--sweep", "nothere.n=1,2",
                 "-q"])
    assert code == 2 and "nothere" in capsys.readouterr().err
    code = main(["eval", SC, "--data", str(_good(tmp_path)), "--dry-run", "--db", db, "--map", "question=nope", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "'nope'" in err and "'question', 'answer'" in err


def test_json_results_list_show_and_html_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "t.db")
    code = main(["eval", COT, SC, "--data", str(_good(tmp_path)), "--metric", "number", "--sweep", "think.n=1,2",
                 "--dry-run", "--db", db, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "succeeded"
    labels = [(p["workflow"], p["params"]) for p in out["points"]]
    assert labels == [("chain-of-thought", {}), ("self-consistency", {"think.n": 1}),
                      ("self-consistency", {"think.n": 2})]
    for point in out["points"]:
        assert point["total"] == 3 and 0.0 <= point["ci"][0] <= point["ci"][1] <= 1.0
    assert set(out["estimate"]) >= {"expected_completion_tokens", "max_completion_tokens", "expected_s"}
    assert main(["eval", "list", "--db", db]) == 0
    assert out["eval_id"] in capsys.readouterr().out
    html = tmp_path / "report.html"
    assert main(["eval", "show", out["eval_id"], "--db", db, "--html", str(html)]) == 0
    assert "self-consistency" in capsys.readouterr().out
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert main(["eval", "show", "nope", "--db", db]) == 2


def test_resume_redoes_only_unfinished_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    assert main(["eval", SC, "--data", str(_good(tmp_path, 4)), "--dry-run", "--db", str(db), "--json"]) == 0
    eval_id = json.loads(capsys.readouterr().out)["eval_id"]
    with sqlite3.connect(db) as conn:  # as if the process had died after two items
        conn.execute("DELETE FROM eval_items WHERE item_idx >= 2")
        conn.execute("UPDATE evaluations SET status = 'running', writer_pid = 999999999")
        kept = dict(conn.execute("SELECT item_idx, run_id FROM eval_items").fetchall())
    assert main(["eval", "--resume", eval_id[:6], "--dry-run", "--db", str(db), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "succeeded" and result["points"][0]["total"] == 4
    with sqlite3.connect(db) as conn:
        after = dict(conn.execute("SELECT item_idx, run_id FROM eval_items").fetchall())
    assert len(after) == 4 and all(after[i] == kept[i] for i in kept)
    assert main(["eval", "--resume", eval_id, "--dry-run", "--db", str(db)]) == 2  # already finished
