"""Validation: every problem at once, with stable codes, node ids, lines and hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.workflow.spec import load_workflow
from app.workflow.validation import validate
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "tests" / "resources"
REGISTRY = default_registry()


def codes(name: str) -> list[str]:
    return [i.code for i in validate(load_workflow(RESOURCES / name), REGISTRY) if i.severity == "error"]


def test_four_problems_reported_in_one_run_with_lines_and_hints() -> None:
    issues = validate(load_workflow(RESOURCES / "four_problems.yaml"), REGISTRY)
    by_code = {i.code: i for i in issues}
    assert {"cycle", "unknown_kind", "unknown_ref", "bad_param"} <= set(by_code)
    assert by_code["unknown_kind"].node_id == "judge" and by_code["unknown_kind"].line == 16
    assert "verifier" in by_code["unknown_kind"].hint  # did-you-mean
    assert by_code["bad_param"].node_id == "draft" and by_code["bad_param"].line == 9
    assert by_code["unknown_ref"].node_id == "vote" and by_code["unknown_ref"].line == 19
    assert by_code["cycle"].line is not None and "draft" in by_code["cycle"].message
    assert all(i.hint for i in issues)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("duplicate_id.yaml", "duplicate_id"),
        ("type_mismatch.yaml", "type_mismatch"),
        ("unknown_model.yaml", "unknown_model"),
        ("no_outputs.yaml", "no_outputs"),
        ("missing_input.yaml", "missing_input"),
        ("unknown_top_level.yaml", "unknown_key"),
    ],
)
def test_bad_fixture_reports_code(name: str, code: str) -> None:
    assert code in codes(name)


def test_missing_input_names_the_template_variable() -> None:
    [issue] = [i for i in validate(load_workflow(RESOURCES / "missing_input.yaml"), REGISTRY)
               if i.code == "missing_input"]
    assert "'context'" in issue.message and issue.node_id == "gen"


@pytest.mark.parametrize("path", sorted((ROOT / "workflows").glob("*.yaml")), ids=lambda p: p.name)
def test_examples_validate_cleanly(path: Path) -> None:
    assert validate(load_workflow(path), REGISTRY) == []


def test_registry_declares_every_kind_with_ports_and_described_params() -> None:
    kinds = set(REGISTRY.kinds())
    assert {"generator", "sampler", "verifier", "voter", "refiner", "search", "input", "output",
            "template"} <= kinds
    for entry in REGISTRY.schema():
        assert entry["description"], entry["kind"]
        for param in entry["params"]:
            assert param["description"], f"{entry['kind']}.{param['name']} has no description"
            if param["type"] == "choice":
                assert param["default"] in param["choices"], f"{entry['kind']}.{param['name']}"


def test_unknown_kind_is_reported_once_not_again_by_the_outputs_reading_it() -> None:
    from app.workflow.spec import load_workflow_text

    wf = load_workflow_text("""version: 1
name: typo
inputs:
  q: {type: text, default: hi}
nodes:
- id: vote
  kind: votr
  inputs: {candidates: inputs.q}
outputs: {answer: vote.answer}
""")
    assert [i.code for i in validate(wf, REGISTRY)] == ["unknown_kind"]
