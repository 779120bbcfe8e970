"""Selection and grading apart: the bundled code set's `public_tests`, the code examples selecting with them, and the
evaluation's warning when a workflow's verifier receives the column the metric grades with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli.main import main
from app.eval.plan import WorkflowSource, make_plan
from app.eval.results import summarize
from app.eval.selection import TESTS_WARNING, selecting_nodes
from app.eval.store import EvalStore
from app.traces.store import TraceStore
from app.viz import evaluation_summary_html
from app.workflow.spec import workflow_from_dict
from metagen import Evaluation
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "datasets" / "code.jsonl"
BEST = ROOT / "workflows" / "code_best_of_n.yaml"
ROWS = [json.loads(line) for line in CODE.read_text().splitlines()]
REGISTRY = default_registry()


def plan(workflow: Path, data: Path = CODE, metric: str | None = "tests", **kwargs: Any) -> Any:
    return make_plan([WorkflowSource(path=workflow)], data, registry=REGISTRY, metric=metric, **kwargs)


def oracle_copy(tmp_path: Path, through_template: bool = False) -> Path:
    """code_best_of_n as it was: its verifier wired to the `tests` input (the graded column)."""
    data = yaml.safe_load(BEST.read_text())
    data["inputs"]["tests"] = data["inputs"].pop("public_tests")
    verifier = next(n for n in data["nodes"] if n["id"] == "run_tests")
    verifier["inputs"]["tests"] = "inputs.tests"
    if through_template:
        data["nodes"].insert(0, {"id": "shown", "kind": "template", "params": {"template": "{tests}"},
                                 "inputs": {"tests": "inputs.tests"}})
        verifier["inputs"]["tests"] = "shown.text"
    data.pop("layout", None)
    path = tmp_path / "oracle.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_code_set_has_public_tests_apart_from_the_hidden_ones() -> None:
    assert len(ROWS) == 20
    for row in ROWS:
        hidden = row["tests"].splitlines()
        assert row["public_tests"] == hidden[0] and row["public_tests"].startswith("assert ")
        assert len(hidden) >= 3  # the metric grades with every assert, the workflow sees one


@pytest.mark.parametrize("name", ["code_best_of_n", "alphacode", "plansearch"])
def test_the_code_examples_select_with_public_tests_and_get_no_warning(name: str) -> None:
    made = plan(ROOT / "workflows" / f"{name}.yaml")
    assert made.workflows[0].binding.inputs["public_tests"] == "public_tests"
    assert "tests" not in made.workflows[0].binding.inputs
    assert made.warnings == []


def test_a_verifier_on_the_graded_tests_is_warned(tmp_path: Path) -> None:
    made = plan(oracle_copy(tmp_path))
    (warning,) = made.warnings
    assert TESTS_WARNING in warning and "node run_tests receives the column 'tests'" in warning
    assert made.config()["warnings"] == [warning]
    (warning,) = plan(oracle_copy(tmp_path, through_template=True)).warnings  # a template hands it on
    assert TESTS_WARNING in warning
    # the example itself, with the graded column mapped onto its examples' input
    (warning,) = plan(BEST, mapping={"public_tests": "tests"}).warnings
    assert TESTS_WARNING in warning
    assert plan(oracle_copy(tmp_path), metric="contains", reference="tests").warnings[0].startswith(
        "code-best-of-n: selection uses the graded reference: node run_tests receives the column 'tests'")


def test_only_selecting_nodes_count() -> None:
    wf = workflow_from_dict({"version": 1, "name": "w", "inputs": {"tests": {"type": "text", "default": "x"}},
                             "nodes": [{"id": "g", "kind": "generator", "params": {"prompt": "{tests}"},
                                        "inputs": {"tests": "inputs.tests"}},
                                       {"id": "v", "kind": "verifier", "params": {"method": "length"},
                                        "inputs": {"candidates": "g.text"}}],
                             "outputs": {"answer": "g.text"}})
    assert selecting_nodes(wf, ["tests"]) == []  # a prompt may show the tests (MBPP does); a verifier may not


def test_an_input_without_a_column_is_warned(tmp_path: Path) -> None:
    data = tmp_path / "no_public.jsonl"
    data.write_text("".join(json.dumps({k: r[k] for k in ("question", "tests", "entry_point")}) + "\n"
                            for r in ROWS[:2]))
    (warning,) = plan(BEST, data).warnings
    assert warning == ("code-best-of-n: input 'public_tests' has no column in the dataset, so node run_tests select "
                       "every item with its default; map a column to it (--map public_tests=COLUMN)")


def test_the_cli_json_summary_and_report_carry_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    code = main(["eval", str(BEST), "--data", str(CODE), "--metric", "tests", "--map", "public_tests=tests",
                 "--limit", "1", "--dry-run", "--db", str(db), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    (warning,) = out["warnings"]
    assert TESTS_WARNING in warning
    assert f"warning: {warning}" in captured.err
    traces = TraceStore(str(db))
    try:
        summary = summarize(EvalStore(traces.engine).get(out["eval_id"]))
    finally:
        traces.close()
    assert summary["warnings"] == [warning]
    assert "best-of-N equals pass@N here" in evaluation_summary_html(summary)
    assert Evaluation({"summary": summary, "points": [], "items": []}).warnings == [warning]
    code = main(["eval", str(BEST), "--data", str(CODE), "--metric", "tests", "--limit", "1", "--dry-run",
                 "--db", str(db), "-q"])
    captured = capsys.readouterr()
    assert code == 0 and "warning" not in captured.out + captured.err
