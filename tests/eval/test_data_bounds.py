"""Data files within bounds: a Parquet file's decoded size (not its file size) is bounded, and `hf:` names cannot be
paths that the datasets library would read from the working directory."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from app.eval.dataset_formats import FormatError, parse_parquet
from app.eval.hub_datasets import HubDatasetError, load_hub_rows, parse_hub_spec


def _parquet(table: object) -> bytes:
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def test_a_small_dictionary_encoded_file_cannot_expand_past_the_bound() -> None:
    pa = pytest.importorskip("pyarrow")
    long_text = "a" * 100_000
    rows = 200  # 20 MB once decoded, from a file of a few KB whose metadata says a few KB
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array([long_text]))
    data = _parquet(pa.table({"question": column, "answer": pa.array(["x"] * rows)}))
    assert len(data) < 50_000
    with pytest.raises(FormatError, match="once decoded"):
        parse_parquet(data, "bomb.parquet", max_rows=1000, max_columns=10, max_bytes=2_000_000)


def test_ordinary_parquet_still_loads_nested_values_too() -> None:
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"question": ["What is 1 + 1?", "What is 2 + 2?"], "answer": [2, 4],
                      "tags": [["easy", "sum"], []], "meta": [{"source": "a"}, {"source": "b"}]})
    rows, columns = parse_parquet(_parquet(table), "ok.parquet", max_rows=10, max_columns=10, max_bytes=1_000_000)
    assert columns == ["question", "answer", "tags", "meta"]
    assert rows == [{"question": "What is 1 + 1?", "answer": 2, "tags": ["easy", "sum"], "meta": {"source": "a"}},
                    {"question": "What is 2 + 2?", "answer": 4, "tags": [], "meta": {"source": "b"}}]


def test_nested_text_is_counted_too() -> None:
    pa = pytest.importorskip("pyarrow")
    long_text = "b" * 100_000
    words = pa.DictionaryArray.from_arrays(pa.array([0] * 400, pa.int32()), pa.array([long_text]))
    tags = pa.ListArray.from_arrays(pa.array([0, 200, 400], pa.int32()), words.cast(pa.string()))
    data = _parquet(pa.table({"tags": tags}))
    with pytest.raises(FormatError, match="once decoded"):
        parse_parquet(data, "nested.parquet", max_rows=10, max_columns=10, max_bytes=2_000_000)


@pytest.mark.parametrize("text", ["hf:x/..", "hf:x/.", "hf:../x", "hf:x/..y", "hf:x/.hidden", "hf:x/y.",
                                  "hf:x/-y"])
def test_hub_names_that_are_paths_are_refused(text: str) -> None:
    with pytest.raises(HubDatasetError, match="not a Hub dataset name"):
        parse_hub_spec(text)


def test_hf_x_dotdot_does_not_read_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret.csv").write_text("question,answer\nthe owner's,data\n", encoding="utf-8")
    (tmp_path / "x").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for text in ("hf:x/..", "hf:x"):  # `x` is a folder here: the library would read it, not the Hub
        with pytest.raises(HubDatasetError, match="not a Hub dataset name"):
            load_hub_rows(text, 100, 1 << 20)
    assert os.getcwd() == str(tmp_path)


def test_real_hub_names_still_parse() -> None:
    spec = parse_hub_spec("hf:openai/gsm8k:main@test[:100]")
    assert (spec.repo, spec.config, spec.split) == ("openai/gsm8k", "main", "test[:100]")
    assert parse_hub_spec("hf:HuggingFaceH4/MATH-500@test").repo == "HuggingFaceH4/MATH-500"
