"""A dataset names its metric in NAME.meta.yaml beside it: datasets/arithmetic.jsonl is graded by `number` when
no metric is given (CLI, service), a metric given wins, and a meta file cannot make code run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval.dataset_meta import DatasetMetaError, declared_metric, meta_path

ROOT = Path(__file__).resolve().parents[2]
ARITHMETIC = ROOT / "datasets" / "arithmetic.jsonl"
COT = str(ROOT / "workflows" / "chain_of_thought.yaml")


def _data(tmp_path: Path, meta: str | None) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n", encoding="utf-8")
    if meta is not None:
        meta_path(path).write_text(meta, encoding="utf-8")
    return path


def test_the_arithmetic_dataset_declares_the_number_metric(tmp_path: Path) -> None:
    assert meta_path(ARITHMETIC).name == "arithmetic.meta.yaml"
    assert declared_metric(ARITHMETIC) == "number"
    assert declared_metric(_data(tmp_path, None)) is None  # no meta file: nothing declared
    assert declared_metric(Path("hf:owner/name")) is None and declared_metric(None) is None


@pytest.mark.parametrize(("meta", "expected"), [
    ("metric: python:instructions_metric.py\n", "runs code"),
    ("metric: tests\n", "runs code"),
    ("metric: nope\n", "metric 'nope'"),
    ("metric: number\nreference: x\n", "unknown key(s) reference"),
    ("- number\n", "must be a mapping"),
    ("metric: [number\n", "cannot read"),
    ("metric: 3\n", "metric must be a metric name"),
])
def test_a_bad_meta_file_is_refused_with_its_name(tmp_path: Path, meta: str, expected: str) -> None:
    with pytest.raises(DatasetMetaError) as err:
        declared_metric(_data(tmp_path, meta))
    assert expected in str(err.value) and "tiny.meta.yaml" in str(err.value)


def _metric_of_run(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    db = str(tmp_path / "t.db")
    assert main(["eval", COT, *args, "--limit", "2", "--dry-run", "--db", db, "--json", "-q"]) == 0
    eval_id = json.loads(capsys.readouterr().out)["eval_id"]
    assert main(["eval", "show", eval_id, "--db", db]) == 0
    shown = capsys.readouterr().out
    return shown.split("metric ", 1)[1].split()[0]


def test_the_cli_grades_arithmetic_by_number_unless_told_otherwise(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _metric_of_run(["--data", str(ARITHMETIC)], tmp_path, capsys) == "number"
    assert _metric_of_run(["--data", str(ARITHMETIC), "--metric", "contains"], tmp_path, capsys) == "contains"
    assert _metric_of_run(["--data", str(_data(tmp_path, None))], tmp_path, capsys) == "exact"


def test_a_bad_meta_file_stops_the_cli_before_anything_runs(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", COT, "--data", str(_data(tmp_path, "metric: tests\n")), "--dry-run",
                 "--db", str(tmp_path / "t.db"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "nothing was run" in err and "tiny.meta.yaml" in err
