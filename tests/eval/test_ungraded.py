"""A grader that cannot run is not a wrong answer: a sandbox that does not start (bubblewrap missing or refused),
a math worker that dies, a metric that raises make the item `ungraded`; accuracy is over the graded items, the
count is shown, and an evaluation whose every item of a point is ungraded fails with the reason (exit 1)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval import metrics
from app.eval.metrics import parse_metric
from app.eval.results import json_points, summarize
from nodes.algorithms import code_exec, math_equiv
from nodes.algorithms.code_tests import run_code_tests

ECHO = ("name: echo\ninputs:\n  question: {type: text}\nnodes:\n- id: t\n  kind: template\n"
        "  params: {template: '{question}'}\n  inputs: {question: inputs.question}\noutputs: {answer: t.text}\n")
CODE_ROWS = [{"question": "def f():\n    return 1\n", "tests": "assert f() == 1\n"},
             {"question": "def f():\n    return 2\n", "tests": "assert f() == 1\n"}]


@pytest.fixture
def broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """bubblewrap that the probe trusted but that cannot start now: missing, or refusing (as a kernel without
    user namespaces makes it refuse)."""
    if request.param == "missing":
        path = str(tmp_path / "no" / "bwrap")
    else:
        script = tmp_path / "bwrap"
        script.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        path = str(script)
    monkeypatch.setattr(code_exec, "isolation", lambda: "bwrap")
    monkeypatch.setattr(code_exec, "bwrap_path", lambda: path)
    return path


@pytest.mark.parametrize("broken_bwrap", ["missing", "refusing"], indirect=True)
def test_a_sandbox_that_cannot_start_grades_nothing(broken_bwrap: str) -> None:
    report = run_code_tests("def f():\n    return 1\n", tests="assert f() == 1\n")
    assert report.ungraded and "sandbox could not start" in report.ungraded and not report.passed_all
    grade = parse_metric("tests").grade("def f():\n    return 1\n", CODE_ROWS[0], None, {})
    assert grade.ungraded and not grade.correct and grade.detail.startswith("ungraded:")


@pytest.mark.parametrize("broken_bwrap", ["missing", "refusing"], indirect=True)
def test_an_evaluation_whose_sandbox_cannot_start_reports_ungraded_items_and_fails(
        broken_bwrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wf = tmp_path / "echo.yaml"
    wf.write_text(ECHO)
    data = tmp_path / "code.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in CODE_ROWS))
    args = ["eval", str(wf), "--data", str(data), "--metric", "tests", "--dry-run", "--db", str(tmp_path / "t.db")]
    code = main([*args, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["status"] == "failed"
    point = out["points"][0]
    assert (point["ungraded"], point["correct"], point["total"], point["accuracy"]) == (2, 0, 0, None)
    code = main([*args])
    captured = capsys.readouterr()
    assert code == 1
    assert f"bubblewrap ({broken_bwrap})" in captured.err  # the first line says which sandbox grades
    assert "0/0 (+2 ungraded)" in captured.out and "sandbox could not start" in captured.out
    assert "no item of echo could be graded" in captured.err


def test_accuracy_is_over_the_graded_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A metric that raises on one item leaves it ungraded; the rest are graded and the evaluation succeeds."""
    metric_file = tmp_path / "picky.py"
    metric_file.write_text("def metric(output, row):\n    if output == 'boom':\n        raise RuntimeError('no')\n"
                           "    return output == row['answer']\n")
    wf = tmp_path / "echo.yaml"
    wf.write_text(ECHO)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [{"question": "a", "answer": "a"},
                                                             {"question": "boom", "answer": "boom"},
                                                             {"question": "b", "answer": "c"}]))
    code = main(["eval", str(wf), "--data", str(data), "--metric", f"python:{metric_file}", "--dry-run", "--db",
                 str(tmp_path / "t.db"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "succeeded"
    point = out["points"][0]
    assert (point["correct"], point["total"], point["ungraded"], point["accuracy"]) == (1, 2, 1, 0.5)
    from app.eval.store import EvalStore
    from app.traces.store import TraceStore
    from app.viz.evaluation import evaluation_report_html

    traces = TraceStore(str(tmp_path / "t.db"))
    try:
        store = EvalStore(traces.engine)
        summary = summarize(store.get(out["eval_id"]))
        assert store.finished_keys(out["eval_id"]) == {(0, 0, 0), (0, 0, 2)}  # a resume grades it again
    finally:
        traces.close()
    assert json_points(summary)[0]["ungraded"] == 1
    assert "metric failed" in summary["points"][0]["ungraded_reason"]
    assert "(1 ungraded)" in evaluation_report_html(summary)


def test_a_math_worker_that_dies_leaves_the_item_ungraded(monkeypatch: pytest.MonkeyPatch) -> None:
    checker = math_equiv.MathChecker(timeout_s=30, workers=1)
    monkeypatch.setattr(metrics, "default_checker", lambda: checker)
    metric = parse_metric("math")
    try:
        assert metric.grade("\\boxed{2}", {}, "2", {}).correct  # the worker runs
        worker = checker._idle.get()
        worker.proc.kill()  # it dies (as an out-of-memory kill would end it) between two items
        worker.proc.wait()
        checker._idle.put(worker)
        monkeypatch.setattr(math_equiv._Worker, "alive", property(lambda self: True))  # not noticed before asking
        grade = metric.grade("\\boxed{2}", {}, "2", {})
        assert grade.ungraded and "died" in grade.ungraded and not grade.correct
        monkeypatch.undo()
        verdict = checker.equal("\\boxed{3}", "3")  # a fresh worker takes the next item
        assert verdict.equal and not verdict.ungraded
    finally:
        checker.close()


@pytest.mark.parametrize("broken_bwrap", ["refusing"], indirect=True)
def test_the_python_api_shows_ungraded_points(broken_bwrap: str, tmp_path: Path) -> None:
    import metagen

    wf = tmp_path / "echo.yaml"
    wf.write_text(ECHO)
    with metagen.Studio(dry_run=True, trace_db=tmp_path / "traces.db", workflows_dir=tmp_path / "workflows",
                        models_dir=tmp_path / "models") as studio:
        result = metagen.evaluate(metagen.load(str(wf)), CODE_ROWS, metric="tests", studio=studio, progress=False)
    assert result.status == "failed" and "could be graded" in (result.summary["error"] or "")
    assert result.points[0]["ungraded"] == 2 and result.points[0]["total"] == 0
    assert all(item["status"] == "ungraded" for item in result.items)
