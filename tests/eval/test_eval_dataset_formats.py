"""Datasets as a JSON array, as Parquet, and from the Hub (`hf:`) through a pre-filled cache, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.eval.datasets import DatasetError, load_dataset, resolve_dataset
from tests.eval.hub_cache import prefill

ROWS = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": 4}]
HUB_ROWS = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"}]


def test_json_array(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(ROWS), encoding="utf-8")
    dataset = load_dataset(path)
    assert dataset.rows == ROWS and dataset.columns == ["question", "answer"]


@pytest.mark.parametrize(("text", "words"), [
    ('{"question": "x"}', "must be an array of objects"),
    ('[{"question": "x"}, 3, [1]]', "row 2"),
    ("[1, 2", "not valid JSON"),
    ("[]", "has no rows"),
])
def test_bad_json_arrays_say_why(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=words):
        load_dataset(path)


def test_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "items.parquet"
    pq.write_table(pa.table({"question": ["a?", "b?"], "answer": [1, 2], "tags": [["x"], []]}), path)
    dataset = load_dataset(path)
    assert dataset.columns == ["question", "answer", "tags"]
    assert dataset.rows == [{"question": "a?", "answer": 1, "tags": ["x"]}, {"question": "b?", "answer": 2, "tags": []}]
    assert len(dataset.sha256) == 64


def test_a_file_that_is_not_parquet_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "fake.parquet"
    path.write_bytes(b"question,answer\n1,2\n")
    with pytest.raises(DatasetError, match="not a Parquet file"):
        load_dataset(path)


def test_hub_dataset_from_the_cache(hub_cache: Path) -> None:
    prefill(hub_cache, "openai/gsm8k", "main", {"test": HUB_ROWS[:1], "train": HUB_ROWS})
    dataset = load_dataset("hf:openai/gsm8k:main@test")
    assert dataset.rows == HUB_ROWS[:1] and str(dataset.path) == "hf:openai/gsm8k:main@test"
    assert load_dataset("hf:openai/gsm8k:main@train").rows == HUB_ROWS
    assert load_dataset("hf:openai/gsm8k:main@train[:1]").rows == HUB_ROWS[:1]
    default = load_dataset("hf:openai/gsm8k:main")  # no split: test is preferred
    assert str(default.path) == "hf:openai/gsm8k:main@test"
    assert resolve_dataset("hf:openai/gsm8k:main@test") == Path("hf:openai/gsm8k:main@test")


def test_hub_errors_name_what_exists(hub_cache: Path) -> None:
    prefill(hub_cache, "openai/gsm8k", "main", {"test": HUB_ROWS[:1], "train": HUB_ROWS})
    with pytest.raises(DatasetError, match=r"dev.*test.*train|test.*train.*dev"):
        load_dataset("hf:openai/gsm8k:main@dev")
    with pytest.raises(DatasetError, match="main"):
        load_dataset("hf:openai/gsm8k:socratic")
    with pytest.raises(DatasetError, match=r"not in the local cache|Hub"):
        load_dataset("hf:nobody/nothing")
    with pytest.raises(DatasetError, match="OWNER/NAME"):
        load_dataset("hf:bad name!")
