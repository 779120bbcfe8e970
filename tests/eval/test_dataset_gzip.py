"""Gzipped dataset files (`.jsonl.gz`, as HumanEval ships): read like the plain file, never unpacked past the size
limit, a broken archive refused with a clear error."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from app.eval import datasets
from app.eval.datasets import DatasetError, load_dataset
from tests.eval.humaneval_data import DATA, problems


def test_humaneval_as_the_wheel_ships_it_loads_all_164_rows() -> None:
    data = load_dataset(DATA)
    assert len(data.rows) == 164 == len(problems())
    assert {"task_id", "prompt", "test", "entry_point", "canonical_solution"} <= set(data.columns)
    assert data.rows[0]["task_id"] == "HumanEval/0"


def test_a_gzipped_csv_counts_rows_from_its_header_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv.gz"
    path.write_bytes(gzip.compress(b"question,answer\n1+1,2\n2+2,4\n"))
    data = load_dataset(path)
    assert [r["answer"] for r in data.rows] == ["2", "4"] and data.where(1) == "row 2"


def test_a_small_file_that_unpacks_past_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "MAX_DATASET_BYTES", 10_000)
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"question": "x"}\n' * 5_000))
    assert path.stat().st_size < 10_000
    with pytest.raises(DatasetError, match="unpacks to over the limit"):
        load_dataset(path)


def test_a_broken_archive_and_gzipped_parquet_get_clear_errors(tmp_path: Path) -> None:
    broken = tmp_path / "cut.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"question": "x"}\n' * 100)[:40])
    with pytest.raises(DatasetError, match="not a whole gzip file"):
        load_dataset(broken)
    parquet = tmp_path / "rows.parquet.gz"
    parquet.write_bytes(gzip.compress(b"PAR1"))
    with pytest.raises(DatasetError, match="unsupported dataset format"):
        load_dataset(parquet)
