"""Task presets (tasks/*.yaml), each on a few rows made here: the prompt and reference they make, the metric they
grade with; `metagen eval --task gsm8k` end to end through a pre-filled, offline datasets cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval.datasets import Dataset, DatasetError
from app.eval.metrics import parse_metric
from app.eval.plan import WorkflowSource, make_plan, plan_from_config
from app.eval.tasks import TaskError, apply_task, available_tasks, load_task
from nodes.registry import default_registry
from tests.eval.hub_cache import prefill

ROOT = Path(__file__).resolve().parents[2]
COT = str(ROOT / "workflows" / "chain_of_thought.yaml")
GSM8K_ROWS = [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
              {"question": "A box holds 1,200 pens; sell 200.", "answer": "1200 - 200 = 1000\n#### 1,000"}]


def _made(name: str, rows: list[dict]) -> list[dict]:
    dataset = Dataset(path=Path("rows.jsonl"), rows=rows, columns=list(rows[0]), sha256="x")
    return apply_task(load_task(name), dataset).rows


def test_every_preset_loads_and_names_a_known_metric() -> None:
    tasks = {t.name: t for t in available_tasks()}
    assert {"gsm8k", "math500", "aime", "aime2024", "aime2025", "gpqa_diamond", "mmlu", "humaneval",
            "mbpp"} <= set(tasks)
    for task in tasks.values():
        assert task.dataset and all(d.startswith(("hf:", "bfcl:")) for d in task.dataset)  # bfcl: the wheel's files
        if task.metric != "tests":  # the code-execution metric may be absent (see below)
            parse_metric(task.metric)
    assert "gated" in tasks["gpqa_diamond"].notes


def test_gsm8k_reference_is_the_number_after_the_hashes() -> None:
    rows = _made("gsm8k", GSM8K_ROWS)
    assert [r["answer"] for r in rows] == ["7", "1000"]
    assert rows[0]["question"].startswith("Tom has 3 apples") and "Answer:" in rows[0]["question"]
    assert parse_metric("number").grade("so Answer: 1000", rows[1], rows[1]["answer"], {}).correct


@pytest.mark.parametrize("name", ["math500", "aime2024", "aime2025", "aime"])
def test_math_presets_ask_for_a_boxed_answer(name: str) -> None:
    pytest.importorskip("math_verify")
    rows = _made(name, [{"problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?", "answer": "\\frac{3}{4}"}])
    assert rows[0]["question"].startswith("What is $\\frac{1}{2}") and "\\boxed{}" in rows[0]["question"]
    assert parse_metric(load_task(name).metric).grade("so \\boxed{0.75}", rows[0], rows[0]["answer"], {}).correct


def test_gpqa_options_are_shuffled_the_same_way_every_time() -> None:
    row = {"Question": "Which is a noble gas?", "Correct Answer": "Argon", "Incorrect Answer 1": "Iron",
           "Incorrect Answer 2": "Sodium", "Incorrect Answer 3": "Carbon"}
    made = _made("gpqa_diamond", [row] * 6)
    assert made[0] == _made("gpqa_diamond", [row])[0]
    for r in made:
        letter = r["answer"]
        assert f"({letter}) Argon" in r["question"] and r["question"].count("(") >= 4
    assert len({r["answer"] for r in made}) > 1  # the correct option is not always A
    assert parse_metric("choice").grade(f"Answer: {made[0]['answer']}", made[0], made[0]["answer"], {}).correct


def test_mmlu_takes_the_options_from_a_list() -> None:
    made = _made("mmlu", [{"question": "2 + 2?", "choices": ["3", "4", "5", "6"], "answer": 1}])[0]
    assert made["answer"] == "B" and "(B) 4" in made["question"]


def test_code_presets_make_a_test_program() -> None:
    humaneval = _made("humaneval", [{"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"Sum.\"\"\"\n",
                                     "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
                                     "entry_point": "add", "canonical_solution": "    return a + b\n"}])[0]
    assert "def add(a, b)" in humaneval["question"] and humaneval["answer"].rstrip().endswith("check(add)")
    assert humaneval["tests"] == humaneval["answer"]
    mbpp = _made("mbpp", [{"task_id": 1, "text": "Write a function to add.", "code": "",
                           "test_list": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"], "test_setup_code": "",
                           "challenge_test_list": []}])[0]
    assert "assert add(1, 2) == 3\nassert add(0, 0) == 0" in mbpp["answer"]
    assert "assert add(0, 0) == 0" in mbpp["question"]


def test_a_row_without_the_preset_columns_is_named() -> None:
    with pytest.raises(DatasetError, match=r"row 1.*preset math500"):
        _made("math500", [{"question": "no problem column", "answer": "1"}])


def test_unknown_task_lists_the_presets() -> None:
    with pytest.raises(TaskError, match="gsm8k"):
        load_task("gsm9k")


def test_code_presets_grade_with_the_tests_metric(tmp_path: Path) -> None:
    """humaneval / mbpp declare `metric: tests` (the code-execution metric): their plans run the item's tests."""
    data = tmp_path / "he.jsonl"
    data.write_text(json.dumps({"prompt": "def f():\n", "test": "def check(candidate):\n    assert candidate() == 1\n",
                                "entry_point": "f", "canonical_solution": "    return 1\n", "task_id": "t/0"}) + "\n")
    plan = make_plan([WorkflowSource(path=ROOT / "workflows" / "code_best_of_n.yaml")], data,
                     registry=default_registry(), metric=None, task="humaneval")
    assert plan.metric_spec == "tests"


def test_eval_task_gsm8k_end_to_end_from_the_cache(hub_cache: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    prefill(hub_cache, "openai/gsm8k", "main", {"test": GSM8K_ROWS * 3, "train": GSM8K_ROWS})
    code = main(["eval", COT, "--task", "gsm8k", "--limit", "4", "--dry-run", "--db", str(tmp_path / "t.db"),
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    point = out["points"][0]
    assert point["total"] == 4 and point["workflow"] == "chain-of-thought"
    from app.eval.store import EvalStore
    from app.traces.store import TraceStore

    traces = TraceStore(str(tmp_path / "t.db"))
    try:
        config = EvalStore(traces.engine).get(out["eval_id"])["evaluation"]["config"]
    finally:
        traces.close()
    assert (config["task"], config["metric"]) == ("gsm8k", "number")
    assert config["dataset"]["path"] == "hf:openai/gsm8k:main@test" and config["dataset"]["rows"] == 6
    again = plan_from_config(config, default_registry())  # what --resume rebuilds: the same task and items
    assert (again.task, again.metric_spec, again.items) == ("gsm8k", "number", [0, 1, 2, 3])
    assert again.dataset.rows[1]["answer"] == "1000"
