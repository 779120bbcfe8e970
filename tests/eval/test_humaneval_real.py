"""HumanEval's real problems through `--task humaneval` and the `tests` metric: canonical solutions correct, wrong
variants graded item by item as the benchmark's own harness grades them (its program run here in a plain
subprocess), and every statement of check() given a result without changing the verdict. The 7 problems whose
check() holds statements other than asserts and 20 others run here; benchmarks/bench_humaneval_gold.py runs all 164."""

from __future__ import annotations

import pytest

from app.eval.metrics import parse_metric
from app.eval.tasks import load_task, task_row
from nodes.algorithms.code_tests import count_tests, run_code_tests
from tests.eval.humaneval_data import has_non_assert_checks, official_passes, problems, wrong_variant

PROBLEMS = problems()
NON_ASSERT = [i for i, p in enumerate(PROBLEMS) if has_non_assert_checks(p)]
OTHERS = [i for i in range(len(PROBLEMS)) if i not in NON_ASSERT][::7][:20]
SELECTED = NON_ASSERT + OTHERS
TASK = load_task("humaneval")
METRIC = parse_metric(TASK.metric)


def _row(index: int) -> dict:
    return task_row(TASK, PROBLEMS[index], index)


def _answer(problem: dict, completion: str) -> str:
    """What a workflow answering with the whole function replies: prompt + completion in a python block."""
    return f"Here it is:\n```python\n{problem['prompt']}{completion}```\n"


def test_the_wheel_holds_164_problems_7_with_statements_other_than_asserts() -> None:
    assert len(PROBLEMS) == 164
    assert len(NON_ASSERT) == 7 and len(OTHERS) == 20


@pytest.mark.parametrize("index", SELECTED, ids=[PROBLEMS[i]["task_id"] for i in SELECTED])
def test_the_canonical_solution_is_correct_and_every_check_statement_has_a_result(index: int) -> None:
    problem, row = PROBLEMS[index], _row(index)
    grade = METRIC.grade(_answer(problem, problem["canonical_solution"]), row, row["answer"], {})
    assert grade.correct and grade.score == 1.0 and not grade.ungraded, grade.detail
    report = run_code_tests(_answer(problem, problem["canonical_solution"]), tests=row["tests"],
                            entry_point=row["entry_point"])
    assert report.passed_all and report.total == count_tests(row["tests"], row["entry_point"])
    assert len(report.tests) == report.total and all(t["passed"] for t in report.tests)


@pytest.mark.parametrize("index", SELECTED, ids=[PROBLEMS[i]["task_id"] for i in SELECTED])
def test_a_wrong_variant_is_graded_as_the_official_rule_grades_it(index: int) -> None:
    problem, row = PROBLEMS[index], _row(index)
    completion = wrong_variant(problem)
    grade = METRIC.grade(_answer(problem, completion), row, row["answer"], {})
    assert grade.correct == official_passes(problem, completion), grade.detail
    assert not grade.ungraded


def test_the_breakdown_never_changes_the_verdict() -> None:
    """A program that passes every statement of check() one by one but not as the whole program (check() returns
    early here only when run as a function) is graded by the whole program; and the reverse."""
    tests = ("def check(candidate):\n    assert candidate(1) == 1\n    if candidate(2) == 2:\n        return\n"
             "    raise AssertionError('reached only when candidate(2) != 2')\n")
    good = run_code_tests("def f(x):\n    return x\n", tests=tests, entry_point="f")
    assert good.passed_all and good.score == 1.0
    # a statement-level failure that the official program never reaches: check() has returned before it
    assert [t["passed"] for t in good.tests] == [True, False, False]
    bad = run_code_tests("def f(x):\n    return 1\n", tests=tests, entry_point="f")
    assert not bad.passed_all and bad.score < 1


def test_the_presets_check_call_is_not_lifted_into_the_setup() -> None:
    """The preset's reference ends with `check(entry_point)`; it was run before check existed (NameError)."""
    problem = PROBLEMS[0]
    row = _row(0)
    assert row["tests"].rstrip().endswith(f"check({problem['entry_point']})")
    report = run_code_tests(_answer(problem, problem["canonical_solution"]), tests=row["tests"],
                            entry_point=row["entry_point"])
    assert report.passed_all and "NameError" not in report.reason and report.passed == report.total


def test_canonical_solutions_score_all_through_eval_task_humaneval(tmp_path, capsys) -> None:
    """`metagen eval WORKFLOW --task humaneval --data HumanEval.jsonl` with a workflow answering each problem with
    its own canonical solution in a python block: every item correct (0/164 before: the NameError)."""
    import json

    from app.cli.main import main

    answer = tmp_path / "canonical.yaml"
    answer.write_text("name: canonical\ninputs:\n  prompt: {type: text}\n  canonical_solution: {type: text}\n"
                      "nodes:\n- id: t\n  kind: template\n"
                      "  params: {template: \"```python\\n{prompt}{canonical_solution}```\"}\n"
                      "  inputs: {prompt: inputs.prompt, canonical_solution: inputs.canonical_solution}\n"
                      "outputs: {answer: t.text}\n")
    rows = [PROBLEMS[i] for i in SELECTED]
    data = tmp_path / "HumanEval.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["eval", str(answer), "--task", "humaneval", "--data", str(data), "--dry-run", "--db",
                 str(tmp_path / "t.db"), "--json"])
    point = json.loads(capsys.readouterr().out)["points"][0]
    assert code == 0 and (point["correct"], point["total"], point["ungraded"]) == (len(rows), len(rows), 0)
