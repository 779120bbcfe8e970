"""The mbpp preset makes a `public_tests` column (its setup code and first assert), so the code examples select
with the problem's own example test under `--task mbpp`, not their input's default; the hidden tests stay graded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.eval.datasets import Dataset
from app.eval.plan import WorkflowSource, make_plan
from app.eval.tasks import TaskError, apply_task, available_tasks, load_task
from nodes.registry import default_registry
from tests.eval.preset_rows import MBPP

ROOT = Path(__file__).resolve().parents[2]


def _made(name: str, rows: list[dict]) -> Dataset:
    return apply_task(load_task(name), Dataset(path=Path("rows.jsonl"), rows=rows, columns=list(rows[0]), sha256="x"))


def test_mbpp_shows_the_first_assert_and_grades_with_all() -> None:
    made = _made("mbpp", MBPP)
    assert "public_tests" in made.columns
    first = made.rows[0]
    assert first["public_tests"] == 'assert remove_Occ("hello","l") == "heo"\n'
    assert first["tests"].count("assert ") == 3  # the hidden tests the metric grades with: all of them
    with_setup = _made("mbpp", [{**MBPP[0], "test_setup_code": "import math"}]).rows[0]
    assert with_setup["public_tests"] == 'import math\nassert remove_Occ("hello","l") == "heo"\n'


def test_humaneval_makes_its_public_tests_from_the_docstring_examples() -> None:
    """HumanEval's examples are docstring lines (`>>> f(x)` then the value): the preset makes them asserts."""
    assert load_task("humaneval").public_tests == {"docstring": "{prompt}", "asserts": 10}


def test_code_best_of_n_selects_with_the_public_tests_under_task_mbpp(tmp_path: Path) -> None:
    data = tmp_path / "mbpp.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in MBPP), encoding="utf-8")
    plan = make_plan([WorkflowSource(path=ROOT / "workflows" / "code_best_of_n.yaml")], data,
                     registry=default_registry(), metric=None, task="mbpp")
    assert plan.metric_spec == "tests"
    assert plan.workflows[0].binding.inputs["public_tests"] == "public_tests"
    assert not [w for w in plan.warnings if "public_tests" in w and "default" in w]  # no other problem's tests


@pytest.mark.parametrize("spec", ['{asserts: 1}', '{template: "{test_list}", asserts: 0}',
                                  '{template: "{test_list}", docstring: "{prompt}"}',
                                  '{template: "{test_list}", take: 1}', '"{test_list}"'])
def test_a_bad_public_tests_spec_is_refused(tmp_path: Path, spec: str) -> None:
    (tmp_path / "t.yaml").write_text(f"name: t\ndataset: x.jsonl\nprompt: '{{text}}'\nreference: {{column: a}}\n"
                                     f"metric: tests\npublic_tests: {spec}\n", encoding="utf-8")
    with pytest.raises(TaskError, match="public_tests must be"):
        available_tasks(tmp_path)
