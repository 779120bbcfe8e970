"""`metagen eval check --task NAME`: every preset's metric grades its dataset's own gold answers correct, on real
HumanEval rows (the wheel's) and schema-faithful rows of the others (tests/eval/preset_rows.py); the `check` word
next to workflows given by path."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval.gold import check_gold
from app.eval.metrics import parse_metric
from app.eval.tasks import available_tasks, load_task, task_row
from tests.eval.humaneval_data import problems
from tests.eval.preset_rows import ROWS
from tests.eval.test_ungraded import ECHO

HUMANEVAL_ROWS = problems()[:12]
BFCL = {"bfcl_simple": "simple_python", "bfcl_multiple": "multiple", "bfcl_parallel": "parallel",
        "bfcl_irrelevance": "irrelevance"}
BFCL_ROWS = {}
if importlib.util.find_spec("bfcl_eval") is not None:  # real rows from the wheel (tests/eval/test_bfcl.py: all of them)
    from app.eval.bfcl_data import load_rows

    BFCL_ROWS = {name: load_rows(f"bfcl:{category}")[0][:6] for name, category in BFCL.items()}
ALL_ROWS = {**ROWS, "humaneval": HUMANEVAL_ROWS, "humaneval_base": HUMANEVAL_ROWS, **BFCL_ROWS}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_every_preset_names_its_gold_answer_and_has_rows_here() -> None:
    assert {t.name for t in available_tasks()} == set(ALL_ROWS) | set(BFCL)
    assert all(t.gold for t in available_tasks())


@pytest.mark.parametrize("name", sorted(ALL_ROWS))
def test_the_gold_answers_of_every_preset_grade_correct(name: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(tmp_path / f"{name}.jsonl", ALL_ROWS[name])
    code = main(["eval", "check", "--task", name, "--data", str(data), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out == {"task": name, "total": len(ALL_ROWS[name]), "correct": len(ALL_ROWS[name]), "failures": [],
                   "ungraded": 0}
    assert code == 0


def test_a_wrong_gold_answer_is_named_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [dict(r) for r in ROWS["gsm8k"]]
    rows[1]["answer"] = rows[1]["answer"].replace("#### 3", "#### three")  # the reference cannot be read
    data = _write(tmp_path / "gsm8k.jsonl", rows)
    code = main(["eval", "check", "--task", "gsm8k", "--data", str(data), "--limit", "2"])
    text = capsys.readouterr().out
    assert code == 1
    assert text.startswith("gsm8k: 1/2 gold answers graded correct") and "item 1:" in text


def test_the_number_metric_reads_gsm8ks_own_marker() -> None:
    """The gold answer's last number and its `#### N` differ here: the marker decides, as GSM8K's authors grade."""
    task = load_task("gsm8k")
    row = {"question": "q", "answer": "Step 1 gives 5.\n#### 5\nChecked with 2 other methods."}
    made = task_row(task, row, 0)
    assert made["answer"] == "5"
    assert parse_metric("number").grade(row["answer"], made, made["answer"], {}).correct


def test_check_gold_from_python_counts_and_explains(tmp_path: Path) -> None:
    rows = [dict(r) for r in ROWS["mmlu"]]
    rows[0]["answer"] = 7  # no option H: the preset cannot read the row
    result = check_gold(load_task("mmlu"), _write(tmp_path / "mmlu.jsonl", rows))
    assert (result.total, result.correct) == (2, 1)
    assert result.failures[0]["item"] == 0 and "cannot read this row" in result.failures[0]["reason"]


def test_eval_check_and_a_workflow_file_named_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`check` is the gold check unless a file of that name is there (then it is a workflow, as for list/show)."""
    data = _write(tmp_path / "rows.jsonl", [{"question": "2", "answer": "2"}])
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "check", "--task", "gsm8k", "--data", str(_write(tmp_path / "g.jsonl", ROWS["gsm8k"])),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 3
    assert main(["eval", "check", "more.yaml", "--task", "gsm8k"]) == 2
    assert "takes no workflows" in capsys.readouterr().err
    assert main(["eval", "check", "--data", str(data)]) == 2
    assert "needs --task" in capsys.readouterr().err
    (tmp_path / "check").write_text(ECHO.replace("name: echo", "name: check"), encoding="utf-8")
    code = main(["eval", "check", "--data", str(data), "--metric", "exact", "--dry-run", "--db",
                 str(tmp_path / "t.db"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["points"][0]["workflow"] == "check" and out["points"][0]["correct"] == 1
