"""Evaluations against hostile data: a CSV header is checked in one pass with a column cap and no lock shared by
visitors, an upload is refused by its size before it is read, a number too long for Python's int() fails one item
(not the evaluation, nor its resume), and --resume never runs a workflow edited in the database."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.eval.datasets import MAX_COLUMNS, DatasetError, load_dataset
from app.service import evaluations as evaluations_module
from app.service.errors import UserError
from app.service.evaluations import MAX_UPLOAD_BYTES, EvaluationService, read_upload
from app.share.policy import SharePolicy
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
SC = str(ROOT / "workflows" / "self_consistency.yaml")


def test_a_header_of_150k_columns_is_refused_by_the_column_cap(tmp_path: Path) -> None:
    data = tmp_path / "wide.csv"
    data.write_text(",".join(f"c{i}" for i in range(150_000)) + "\n" + ",".join("1" for _ in range(150_000)) + "\n")
    with pytest.raises(DatasetError, match=f"150000 columns; the limit is {MAX_COLUMNS}"):
        load_dataset(data)


def test_a_header_at_the_cap_loads_and_duplicates_are_named_once(tmp_path: Path) -> None:
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(MAX_COLUMNS)) + "\n" + ",".join("1" * MAX_COLUMNS) + "\n")
    assert len(load_dataset(wide).columns) == MAX_COLUMNS
    dup = tmp_path / "dup.csv"
    dup.write_text("a,b,a,,b,a\n1,2,3,4,5,6\n")
    with pytest.raises(DatasetError) as err:
        load_dataset(dup)
    assert "duplicate column names a, b" in str(err.value) and "column 4 has no name" in str(err.value)


def test_jsonl_rows_are_held_to_the_column_cap_too(tmp_path: Path) -> None:
    data = tmp_path / "keys.jsonl"
    data.write_text("".join(json.dumps({f"k{i}_{j}": 1 for j in range(300)}) + "\n" for i in range(5)))
    with pytest.raises(DatasetError, match="the limit is"):
        load_dataset(data)


def test_one_visitors_slow_upload_does_not_hold_anothers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_DATASETS", str(tmp_path / "datasets"))
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=tmp_path)
    service = EvaluationService(registry=default_registry(), scheduler=None, policy=policy,  # type: ignore[arg-type]
                                trace_store=None, uploads_dir=tmp_path / "uploads")
    parsing, release = threading.Event(), threading.Event()
    real = evaluations_module.load_dataset

    def slow(path: Any) -> Any:
        if Path(path).name.startswith("slow"):
            parsing.set()
            release.wait(20)
        return real(path)

    monkeypatch.setattr(evaluations_module, "load_dataset", slow)
    rows = b'{"question": "q", "answer": "a"}\n'
    alice = threading.Thread(target=service.upload_dataset, args=("slow.jsonl", rows), kwargs={"visitor": "alice"})
    alice.start()
    try:
        assert parsing.wait(20)
        assert service.upload_dataset("quick.jsonl", rows, visitor="bob")["count"] == 1  # while alice's parses
    finally:
        release.set()
        alice.join(20)


def test_an_upload_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.jsonl"
    with open(huge, "wb") as f:
        f.truncate(10 * MAX_UPLOAD_BYTES)  # sparse: 200 MB on paper
    with pytest.raises(UserError, match="MB; datasets are limited"):
        read_upload(huge)


def _eval_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, Any]:
    code = main(args)
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_a_number_too_long_for_int_fails_its_item_not_the_evaluation_nor_its_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps({"question": "q1", "answer": "1" * 5000 + "/3"}) + "\n"
                    + json.dumps({"question": "q2", "answer": "2"}) + "\n")
    db = tmp_path / "t.db"
    args = ["eval", SC, "--data", str(data), "--metric", "number", "--dry-run", "--db", str(db), "--json"]
    result = _eval_json(capsys, args)
    assert result["status"] == "succeeded" and result["points"][0]["total"] == 2
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM eval_items WHERE item_idx >= 1")
        conn.execute("UPDATE evaluations SET status = 'running', writer_pid = 999999999")
    resumed = _eval_json(capsys, ["eval", "--resume", result["eval_id"], "--dry-run", "--db", str(db), "--json"])
    assert resumed["status"] == "succeeded" and resumed["points"][0]["total"] == 2


def test_resume_refuses_a_workflow_edited_in_the_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "good.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "answer": str(i)}) + "\n" for i in range(3)))
    db = tmp_path / "t.db"
    result = _eval_json(capsys, ["eval", SC, "--data", str(data), "--dry-run", "--db", str(db), "--json"])
    with sqlite3.connect(db) as conn:
        config = json.loads(conn.execute("SELECT config FROM evaluations").fetchone()[0])
        config["workflows"][0]["yaml"] = config["workflows"][0]["yaml"].replace("temperature: 0.7",
                                                                              "temperature: 0.9")
        assert "temperature: 0.9" in config["workflows"][0]["yaml"]
        conn.execute("UPDATE evaluations SET config = ?, status = 'running', writer_pid = 999999999",
                     (json.dumps(config),))
    assert main(["eval", "--resume", result["eval_id"], "--dry-run", "--db", str(db)]) == 2
    assert "changed in the trace database" in capsys.readouterr().err
