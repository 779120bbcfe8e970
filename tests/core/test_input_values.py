"""Number inputs must be finite: '1e999' (inf) used to be accepted and reached prompts and checks as inf."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.run.scheduler import resolve_inputs
from app.workflow.problems import WorkflowError
from app.workflow.spec import load_workflow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text", ["1e999", "-1e400", "nan", "inf"])
def test_non_finite_numbers_are_bad_inputs(text: str) -> None:
    wf = load_workflow(ROOT / "workflows" / "rejection_sampling.yaml")
    with pytest.raises(WorkflowError) as caught:
        resolve_inputs(wf, {"a": text})
    assert caught.value.issues[0].code == "bad_input" and "'a'" in caught.value.issues[0].message


def test_ordinary_numbers_still_pass() -> None:
    wf = load_workflow(ROOT / "workflows" / "rejection_sampling.yaml")
    assert resolve_inputs(wf, {"a": "2.5", "b": "1e3"}) == {"a": 2.5, "b": 1000.0}
