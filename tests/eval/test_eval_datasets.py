"""Evaluation datasets: loading JSONL/CSV, every refusal with its row or byte, binding columns, row checks."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import pytest

from app.eval import datasets
from app.eval.datasets import (
    MAX_DATASET_BYTES,
    Binding,
    DatasetError,
    bind,
    check_rows,
    item_inputs,
    item_reference,
    load_dataset,
    resolve_dataset,
    select_items,
)
from app.workflow.spec import load_workflow

ROOT = Path(__file__).resolve().parents[2]
QUESTION = {"question": {"type": "text"}}


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def problems_of(excinfo: pytest.ExceptionInfo[DatasetError]) -> list[str]:
    return excinfo.value.problems


# ------------------------------------------------------------------ loading


def test_jsonl_loads_objects_skipping_blank_lines(tmp_path: Path) -> None:
    text = '\ufeff{"question": "1+1?", "answer": 2}\n\n  \n{"question": "2+2?", "answer": "4", "level": 1}\r\n'
    path = write(tmp_path, "d.jsonl", text)
    ds = load_dataset(path)
    assert ds.rows == [{"question": "1+1?", "answer": 2}, {"question": "2+2?", "answer": "4", "level": 1}]
    assert ds.columns == ["question", "answer", "level"]
    assert ds.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ds.path == path and ds.where(1) == "row 2 (line 4)"


def test_jsonl_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", '{"q": 1}\n[1, 2]\n{"q": \n"text"\n')
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    found = problems_of(caught)
    assert len(found) == 3
    assert found[0].startswith("line 2: a JSON list") and "JSON object" in found[0]
    assert found[1].startswith("line 3: not valid JSON") and found[2].startswith("line 4: a JSON str")


def test_csv_loads_with_header_quotes_and_bom(tmp_path: Path) -> None:
    text = '\ufeffquestion, answer\n"What is 1,000 + 1?",1001\n\n"Two\nlines",x\n'
    ds = load_dataset(write(tmp_path, "d.csv", text))
    assert ds.columns == ["question", "answer"]
    assert ds.rows == [{"question": "What is 1,000 + 1?", "answer": "1001"}, {"question": "Two\nlines", "answer": "x"}]
    assert ds.where(0) == "row 1" and ds.where(1) == "row 2 (line 4)"


def test_csv_ragged_rows_name_their_rows(tmp_path: Path) -> None:
    text = "question,answer\nok,1\ntoo,many,cells\nfew\nok,2\n"
    with pytest.raises(DatasetError) as caught:
        load_dataset(write(tmp_path, "d.csv", text))
    found = problems_of(caught)
    assert found == [
        "row 2 (line 3): 3 cells, but the header has 2 columns (an unquoted comma?)",
        "row 3 (line 4): 1 cells, but the header has 2 columns",
    ]


@pytest.mark.parametrize(("name", "content", "words"), [
    ("empty.jsonl", "", "is empty"),
    ("blank.jsonl", "\n  \n", "is empty"),
    ("empty.csv", "", "is empty"),
    ("header.csv", "question,answer\n", "no data rows"),
    ("data.txt", "question\n", "supported: .jsonl"),
    ("data.json", "[]", "has no rows"),
    ("dup.csv", "a,a\n1,2\n", "duplicate column"),
])
def test_refused_files(tmp_path: Path, name: str, content: str, words: str) -> None:
    with pytest.raises(DatasetError, match=words.replace(".", r"\.")):
        load_dataset(write(tmp_path, name, content))


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such dataset file"):
        load_dataset(tmp_path / "nope.jsonl")
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    with pytest.raises(DatasetError, match="is a folder"):
        load_dataset(folder)


def test_non_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    path = write(tmp_path, "d.csv", b"question,answer\ncaf\xe9,1\n")
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    message = str(caught.value)
    assert "not UTF-8" in message and "byte offset 19" in message and "0xe9" in message and "line 2" in message


def test_a_file_over_the_limit_is_refused_without_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("wb") as f:
        f.truncate(MAX_DATASET_BYTES + 1)  # sparse: no 20 MB written

    def no_reading(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an oversized dataset was opened")

    monkeypatch.setattr(Path, "open", no_reading)
    monkeypatch.setattr(Path, "read_bytes", no_reading)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    message = str(caught.value)
    assert f"{MAX_DATASET_BYTES + 1} bytes" in message and f"limit is 20.0 MB ({MAX_DATASET_BYTES} bytes)" in message


def test_too_many_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "MAX_ROWS", 3)
    assert len(load_dataset(write(tmp_path, "ok.jsonl", '{"a": 1}\n' * 3)).rows) == 3
    with pytest.raises(DatasetError, match="more than 3 rows"):
        load_dataset(write(tmp_path, "d.jsonl", '{"a": 1}\n' * 4))
    with pytest.raises(DatasetError, match="more than 3 rows"):
        load_dataset(write(tmp_path, "d.csv", "a\n" + "1\n" * 4))


def test_error_summary_shows_ten_and_counts_the_rest() -> None:
    error = DatasetError([f"row {i}: bad" for i in range(1, 13)])
    text = str(error)
    assert text.startswith("12 problems") and "row 10: bad" in text and "row 11" not in text
    assert text.endswith("(and 2 more)")
    assert str(DatasetError("just one")) == "just one" and DatasetError("just one").problems == ["just one"]


# ------------------------------------------------------------------ binding and checking


def test_bind_by_name_and_reference_default(tmp_path: Path) -> None:
    ds = load_dataset(write(tmp_path, "d.csv", "question,answer,extra\nq,1,x\n"))
    wf = load_workflow(ROOT / "workflows" / "self_consistency.yaml")
    assert bind(ds, wf.inputs) == Binding(inputs={"question": "question"}, reference="answer")
    assert bind(ds, QUESTION, reference="extra").reference == "extra"
    no_answer = load_dataset(write(tmp_path, "e.csv", "question,gold\nq,1\n"))
    assert bind(no_answer, QUESTION).reference is None


def test_bind_with_mapping_and_defaults(tmp_path: Path) -> None:
    ds = load_dataset(write(tmp_path, "d.csv", "prompt,gold\nhello,1\n"))
    specs = {"question": {"type": "text"}, "style": {"type": "text", "default": "plain"}}
    binding = bind(ds, specs, mapping={"question": "prompt"}, reference="gold")
    assert binding == Binding(inputs={"question": "prompt"}, reference="gold")
    assert item_inputs(ds.rows[0], binding, specs) == {"question": "hello"}


def test_bind_errors_list_columns_and_hint(tmp_path: Path) -> None:
    ds = load_dataset(write(tmp_path, "d.csv", "prompt,gold\nhello,1\n"))
    with pytest.raises(DatasetError) as caught:
        bind(ds, QUESTION)
    assert "'question' has no column and no default" in str(caught.value) and "'prompt', 'gold'" in str(caught.value)
    with pytest.raises(DatasetError) as caught:
        bind(ds, QUESTION, mapping={"questoin": "prompt", "question": "promt"}, reference="answer")
    found = problems_of(caught)
    assert len(found) == 3
    assert "no such input" in found[0] and "did you mean 'question'" in found[0]
    assert "column 'promt'" in found[1] and "did you mean 'prompt'" in found[1]
    assert "reference column 'answer'" in found[2]


def test_check_rows_collects_every_row(tmp_path: Path) -> None:
    text = "question,n,answer\nq1,1,a\n,2,b\nq3,abc,c\n  ,inf,d\nq5,,e\nq6,2.5,f\n"
    ds = load_dataset(write(tmp_path, "d.csv", text))
    specs = {"question": {"type": "text"}, "n": {"type": "number"}}
    binding = bind(ds, specs)
    with pytest.raises(DatasetError) as caught:
        check_rows(ds, binding, specs)
    assert problems_of(caught) == [
        "row 2: no value for input 'question' (column 'question' is empty)",
        "row 3: input 'n' (column 'n') must be a number, got 'abc'",
        "row 4: no value for input 'question' (column 'question' is empty)",
        "row 4: input 'n' (column 'n') must be a finite number, got 'inf'",
        "row 5: no value for input 'n' (column 'n' is empty)",
    ]
    with_default = {"question": {"type": "text"}, "n": {"type": "number", "default": 3}}
    good = load_dataset(write(tmp_path, "g.csv", "question,n,answer\nq1,1,a\nq5,,e\nq6,2.5,f\nq7,1e3,g\n"))
    binding = bind(good, with_default)
    check_rows(good, binding, with_default)
    assert [item_inputs(row, binding, with_default)["n"] for row in good.rows] == [1, 3, 2.5, 1000.0]
    assert isinstance(item_inputs(good.rows[0], binding, with_default)["n"], int)
    assert item_reference(good.rows[2], binding) == "f"


def test_check_rows_on_jsonl_values(tmp_path: Path) -> None:
    lines = ['{"question": "a", "n": 2, "answer": 4}', '{"n": 1}', '{"question": "c", "n": true}',
             '{"question": 7, "n": "3", "answer": ""}', '{"question": "e", "n": 1, "data": "{bad"}']
    ds = load_dataset(write(tmp_path, "d.jsonl", "\n".join(lines) + "\n"))
    specs = {"question": {"type": "text"}, "n": {"type": "number"}, "data": {"type": "json", "default": {}}}
    binding = bind(ds, specs)
    assert binding.inputs == {"question": "question", "n": "n", "data": "data"}
    with pytest.raises(DatasetError) as caught:
        check_rows(ds, binding, specs)
    assert problems_of(caught) == [
        "row 2: no value for input 'question' (column 'question' is missing)",
        "row 3: input 'n' (column 'n') must be a number, got true",
        "row 5: input 'data' (column 'data') is not valid JSON: Expecting property name enclosed in double quotes",
    ]
    assert item_inputs(ds.rows[0], binding, specs) == {"question": "a", "n": 2, "data": {}}
    assert item_inputs(ds.rows[3], binding, specs) == {"question": "7", "n": 3, "data": {}}
    assert item_reference(ds.rows[0], binding) == "4" and item_reference(ds.rows[3], binding) is None


def test_select_items() -> None:
    assert select_items(5, None, False, 0) == [0, 1, 2, 3, 4]
    assert select_items(5, 2, False, 0) == [0, 1]
    assert select_items(5, 0, True, 1) == []
    expected = list(range(10))
    random.Random(7).shuffle(expected)
    assert select_items(10, None, True, 7) == expected
    assert select_items(10, 3, True, 7) == expected[:3] == select_items(10, 3, True, 7)
    with pytest.raises(ValueError):
        select_items(5, -1, False, 0)


# ------------------------------------------------------------------ finding datasets


def test_resolve_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("METAGEN_DATASETS", raising=False)
    dirs = datasets.dataset_dirs()
    assert dirs == [tmp_path / "home" / "datasets", ROOT / "datasets"]
    mine = dirs[0]
    mine.mkdir(parents=True)
    (mine / "mine.csv").write_text("question\nq\n", encoding="utf-8")
    assert resolve_dataset("mine") == mine / "mine.csv"
    assert resolve_dataset("mine.csv") == mine / "mine.csv"
    assert resolve_dataset("arithmetic") == ROOT / "datasets" / "arithmetic.jsonl"
    given = write(tmp_path, "given.jsonl", '{"a": 1}\n')
    assert resolve_dataset(given) == given and resolve_dataset(str(given)) == given
    with pytest.raises(DatasetError) as caught:
        resolve_dataset("nothing-here")
    assert "available datasets: arithmetic, code, instructions, mine" in str(caught.value)
    with pytest.raises(DatasetError):
        resolve_dataset("../datasets/arithmetic")  # a name is never a path out of the folders
